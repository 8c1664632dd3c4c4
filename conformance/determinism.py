"""Drawn cases that depend on the seed alone.

Invariant: inside `seed_only_draws()`, what Hypothesis draws depends only on the strategy
and the seed, not on which modules the process happens to have imported.

Why: Hypothesis (6.131 and later) mines the literal constants of every *local* module in
`sys.modules` (anything outside the standard library and site-packages: the project, its
tests, a user's script) and, with a small probability per draw, draws one of them. A
conformance run's cases then change when another module is imported first — a pytest
process that ran other tests, a Dask worker, a user's notebook — so one `--seed` named
different cases in different processes. The suite turns the pool of local constants off
while it draws; Hypothesis's global constants (0, ±inf, NaN, the subnormal boundaries,
...) stay. With a Hypothesis that has no such pool the context manager does nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["seed_only_draws"]

_LOCK = threading.RLock()


def _pool() -> tuple[Any, Any] | None:
    """(Hypothesis's providers module, an empty Constants), or None where the Hypothesis
    installed has no pool of local constants (the hooks are Hypothesis internals, so their
    absence is the expected case for other versions, not an error)."""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:  # pragma: no cover - a Hypothesis before local constants
        return None
    if not hasattr(providers, "_get_local_constants") or not hasattr(
        providers, "CONSTANTS_CACHE"
    ):  # pragma: no cover - another Hypothesis layout
        return None
    return providers, Constants()


@contextlib.contextmanager
def seed_only_draws() -> Iterator[None]:
    """Run the enclosed Hypothesis runs without the pool of local constants (re-entrant)."""
    pool = _pool()
    if pool is None:  # pragma: no cover
        yield
        return
    providers, empty = pool
    with _LOCK:
        saved = providers._get_local_constants
        providers._get_local_constants = lambda: empty
        providers.CONSTANTS_CACHE.cache.clear()
        try:
            yield
        finally:
            providers._get_local_constants = saved
            providers.CONSTANTS_CACHE.cache.clear()
