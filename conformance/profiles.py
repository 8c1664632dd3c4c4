"""Hypothesis profiles, chosen by the TORCHLEAN_PROFILE environment variable.

- `ci` (default): derandomised and bounded, so CI runs are reproducible and fast.
- `dev`: random, moderate.
- `thorough`: long campaigns (opt-in).

`run_settings` is the one settings block of the suite's own Hypothesis runs (the suite's
properties, the engines' judge, the Session state machine): no example database, no
deadline, every health check off, derandomised unless a seed is given, shrinking optional.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase, settings

__all__ = ["PROFILES", "load_profile", "run_settings"]

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
PROFILES = {
    "ci": settings(max_examples=40, derandomize=True, print_blob=True, **_COMMON),
    "dev": settings(max_examples=150, print_blob=True, **_COMMON),
    "thorough": settings(max_examples=2000, print_blob=True, **_COMMON),
}
for _name, _s in PROFILES.items():
    settings.register_profile(_name, _s)


def load_profile(name: str | None = None) -> str:
    name = name or os.environ.get("TORCHLEAN_PROFILE", "ci")
    if name not in PROFILES:
        raise ValueError(f"unknown TORCHLEAN_PROFILE {name!r}; choose one of {sorted(PROFILES)}")
    settings.load_profile(name)
    return name


def run_settings(
    max_examples: int, seed: int | None, *, shrink: bool = True, **extra: Any
) -> settings:
    """The settings of one of the suite's runs: `max_examples` cases, derandomised when
    `seed` is None (the caller applies an explicit seed), the shrink phase when `shrink`;
    `extra` sets further fields (`print_blob`, `stateful_step_count`)."""
    return settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        derandomize=seed is None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.generate, *([Phase.shrink] if shrink else [])),
        **{"print_blob": False, **extra},
    )
