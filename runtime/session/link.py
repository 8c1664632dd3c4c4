"""The link check on one graph: runtime `backward_dense_from(lower(g))` against spec
`backprop_all_ctx(g)`, runtime values against `eval_graph` and runtime forward tangents
(`forward_tangents`) against `jvp_ctx`; and the session part that
exports its recorded typed graph and checks the link on it (`GraphExport`, which reads the
session's `Recording` through its public interface only).

Invariants:
- `link_check` returns (ok, text) and never raises on a mismatch; the text names the first
  mismatching value. IEEE dtypes use the `ordered` kernels and bit equality (NaN matches
  NaN); "exact" uses exact equality.
- For IEEE dtypes the spec side is `spec.vector` (the array evaluator of the spec's
  semantics, whose reference is the pure-Python `spec_side`), the inputs and seeds stay
  arrays on both sides, and the text reports the evaluator's per-node fallbacks to spec
  rules and its count of elements computed by MPFR (`array_link_check`).
- `Session.graph()` (typed-graph mode only) is the recorded spec graph with its leaf values
  and environment; `Session.check_link(seed)` runs `link_check` on it with a full
  pseudo-random seed from the spec RNG.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spec import rng as srng
from spec import vector
from spec.errors import TorchLeanError
from spec.graph import Graph, backprop_all_ctx, eval_jvp
from spec.tensor import Tensor, TensorPack

from ..backends.base import DTYPE_DOMAIN, NUMPY, OBJECT_DTYPES, Backend, round_f64, to_spec
from ..engine.context import KernelContext
from ..engine.lower import lower
from .recording import Recording

__all__ = [
    "GraphExport",
    "LinkCheck",
    "RecordedGraph",
    "array_link_check",
    "array_sides",
    "compare_sides",
    "first_mismatch",
    "link_check",
    "random_seed_pack",
    "runtime_side",
    "spec_side",
    "spec_stats_text",
]


def _fmt(D: Any, t: Tensor) -> str:
    return "[" + ", ".join(str(v) if D.name == "rational" else D.encode(v) for v in t.data) + "]"


def first_mismatch(D: Any, what: str, got: Sequence[Tensor], want: Sequence[Tensor]) -> str | None:
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        if not a.same(D, b):
            return (
                f"{what} of value %{i}: runtime {_fmt(D, a)} vs spec {_fmt(D, b)} (shape {b.shape})"
            )
    return None


def random_seed_pack(g: Graph, dtype: str, seed: int) -> TensorPack:
    """A full seed over every value, from the spec RNG (small integers / 8)."""
    from fractions import Fraction

    D = DTYPE_DOMAIN[dtype]
    key = srng.key_of(seed, 0)
    out, k = [], 0
    for s in g.shapes:
        n = 1
        for d in s:
            n *= d
        vals = []
        for _ in range(n):
            vals.append(D.from_rational(Fraction(srng.sample_nat(key, k) % 33 - 16, 8)))
            k += 1
        out.append(Tensor(s, tuple(vals)))
    return TensorPack.of(out)


Sides = tuple[list[Tensor], list[Tensor], list[Tensor]]
"""(values, cotangents, tangents): the tangents are forward mode from the seed pack's
entries at the inputs, used as input tangents."""


def spec_side(
    g: Graph, xs: Sequence[Tensor], env: Sequence[int], pack: TensorPack, dtype: str
) -> Sides:
    """Spec values and tangents (`eval_jvp`) and cotangents (`backprop_all_ctx`) in the
    dtype's domain."""
    D = DTYPE_DOMAIN[dtype]
    vals, tans = eval_jvp(D, g, xs, pack.tensors[: g.num_inputs], env)
    cots = backprop_all_ctx(D, g, xs, pack, env)
    return list(vals.tensors), list(cots.tensors), list(tans.tensors)


def runtime_side(
    g: Graph,
    xs: Sequence[Tensor],
    env: Sequence[int],
    pack: TensorPack,
    dtype: str,
    kernels: str = "ordered",
    backend: Backend = NUMPY,
    compiled: bool | None = None,
) -> Sides:
    """Runtime values of `lower(g)`, its `backward_dense_from(pack)` and its
    `forward_tangents` (from the pack's input entries) on `backend`, as spec tensors.
    `compiled` is `KernelContext`'s switch (True: the compiled ordered kernels at every
    size)."""
    ctx = KernelContext(dtype, kernels, backend, compiled=compiled)
    tape = lower(g, [backend.from_spec(x, dtype) for x in xs], env, ctx=ctx)
    seeds = [backend.from_spec(t, dtype) for t in pack.tensors]
    got = tape.backward_dense_from(seeds)
    tans = tape.forward_tangents({i: seeds[i] for i in range(g.num_inputs)})
    return (
        [backend.to_spec(n.value, dtype) for n in tape.nodes],
        [backend.to_spec(a, dtype) for a in got],
        [backend.to_spec(t, dtype) for t in tans],
    )


def compare_sides(dtype: str, got: Sides, want: Sides) -> str | None:
    """The first mismatching value, else cotangent, else tangent; None when all match."""
    D = DTYPE_DOMAIN[dtype]
    return (
        first_mismatch(D, "value", got[0], want[0])
        or first_mismatch(D, "cotangent", got[1], want[1])
        or first_mismatch(D, "tangent", got[2], want[2])
    )


def link_check(
    g: Graph,
    xs: Sequence[Tensor],
    env: Sequence[int],
    dtype: str,
    seed: int = 0,
    pack: TensorPack | None = None,
) -> tuple[bool, str]:
    if dtype not in OBJECT_DTYPES and pack is None:
        D = DTYPE_DOMAIN[dtype]
        arrays = [vector.format_of(D).array(x) for x in xs]
        return array_link_check(g, arrays, env, dtype, seed)
    pack = pack if pack is not None else random_seed_pack(g, dtype, seed)
    want = spec_side(g, xs, env, pack, dtype)
    mism = compare_sides(dtype, runtime_side(g, xs, env, pack, dtype), want)
    if mism is None:
        return True, f"link holds on {len(want[1])} values ({dtype}, ordered kernels)"
    return False, mism


ArraySides = tuple[list[Any], list[Any], list[Any]]


def array_sides(
    g: Graph,
    xs: Sequence[Any],
    env: Sequence[int],
    seeds: Sequence[Any],
    dtype: str,
    kernels: str = "ordered",
    backend: Backend = NUMPY,
    compiled: bool | None = None,
) -> ArraySides:
    """`runtime_side` on arrays: xs and seeds are float64 arrays holding values of the
    dtype; the result is host arrays of the dtype."""
    ctx = KernelContext(dtype, kernels, backend, compiled=compiled)
    tape = lower(g, [backend.from_host(round_f64(np.asarray(x), dtype)) for x in xs], env, ctx=ctx)
    sd = [backend.from_host(round_f64(np.asarray(s, dtype=np.float64), dtype)) for s in seeds]
    got = tape.backward_dense_from(sd)
    tans = tape.forward_tangents({i: sd[i] for i in range(g.num_inputs)})
    host = backend.to_host
    return [host(n.value) for n in tape.nodes], [host(a) for a in got], [host(t) for t in tans]


def spec_stats_text(st: vector.Stats) -> str:
    """The array evaluator's report: fallbacks to spec rules and MPFR elements."""
    fb = sum(st.fallbacks.values())
    fbs = ", ".join(f"{k} x{v}" for k, v in sorted(st.fallbacks.items()))
    fbs = f" ({fbs})" if fbs else ""
    return f"spec.vector: {fb} spec-rule fallbacks{fbs}, {st.mpfr} MPFR elements"


def _difference_text(D: Any, what: str, got: Sequence[Any], want: Sequence[Any]) -> str | None:
    d = vector.first_difference(got, want)
    if d is None:
        return None
    i, j = d
    a, b = np.asarray(got[i]), np.asarray(want[i])
    if a.shape != b.shape:
        return f"{what} of value %{i}: runtime shape {a.shape} vs spec {b.shape}"
    enc = lambda v: D.encode(D.from_float(float(v)))  # noqa: E731
    ra, rb = a.reshape(-1)[j], b.reshape(-1)[j]
    return (
        f"{what} of value %{i} (shape {b.shape}), element {j}: runtime {enc(ra)} ({float(ra)!r}) "
        f"vs spec {enc(rb)} ({float(rb)!r})"
    )


def array_link_check(
    g: Graph,
    xs: Sequence[Any],
    env: Sequence[int],
    dtype: str,
    seed: int = 0,
    kernels: str = "ordered",
    backend: Backend = NUMPY,
) -> tuple[bool, str]:
    """`link_check` for an IEEE dtype on arrays: the spec side by `spec.vector`, the seed
    pack `random_seed_pack`'s (as arrays), every value, cotangent and tangent bit for bit."""
    D = DTYPE_DOMAIN[dtype]
    F = vector.format_of(D)
    seeds = vector.seed_arrays(g, F, seed)
    st = vector.Stats()
    want = vector.link_sides(D, g, xs, env, seeds, st)
    got = array_sides(g, xs, env, seeds, dtype, kernels, backend)
    mism = (
        _difference_text(D, "value", got[0], want[0])
        or _difference_text(D, "cotangent", got[1], want[1])
        or _difference_text(D, "tangent", got[2], want[2])
    )
    if mism is None:
        return True, (
            f"link holds on {len(want[1])} values ({dtype}, {kernels} kernels; "
            f"{spec_stats_text(st)})"
        )
    return False, mism


@dataclass
class RecordedGraph:
    """The typed graph a session recorded, with its leaf values and environment."""

    graph: Graph
    inputs: list[Tensor]
    env: list[int]
    dtype: str


@dataclass
class LinkCheck:
    ok: bool
    text: str
    kernels: str

    def __bool__(self) -> bool:
        return self.ok


class GraphExport:
    """A session's graph export: its recorded typed graph and the link check on it."""

    def __init__(self, recording: Recording, dtype: str) -> None:
        self._recording = recording
        self._dtype = dtype

    def graph(self) -> RecordedGraph:
        """The recorded spec graph with its leaf values (typed-graph mode)."""
        rec = self._recording
        if not rec.typed:
            raise TorchLeanError("graph(): only typed_graph sessions record a graph")
        g = rec.build_graph()
        inputs = [to_spec(rec.tape.nodes[i].value, self._dtype) for i in range(g.num_inputs)]
        return RecordedGraph(g, inputs, list(rec.env), self._dtype)

    def check_link(self, seed: int = 0) -> LinkCheck:
        """Runtime backward_dense_from(lower(g)) vs spec backprop_all_ctx(g) on the recorded
        graph, with a full pseudo-random seed (spec RNG). Exact dtype: exact equality; IEEE:
        bit equality, computed with the `ordered` kernels (the fast kernels are checked by
        per-node bounds in the conformance suite, not bitwise)."""
        rec = self.graph()
        ok, text = link_check(rec.graph, rec.inputs, rec.env, self._dtype, seed)
        return LinkCheck(ok, text, "exact" if self._dtype in OBJECT_DTYPES else "ordered")
