"""The work an output-bound certificate demands of its checker, bounded before checking.

Public: `Work` (an estimate), `estimate(cert)`, `check_work(cert, max_width, max_ops)`,
the default caps `MAX_WIDTH`, `MAX_OPS` and `MAX_DENSE` and their environment variables,
`caps()`.

Invariants:
- `estimate` reads only sizes: list lengths and the window parameters of conv / pool
  stages (`in_shape`, kernel, stride, padding, dilation), never a weight's value, and
  allocates nothing proportional to the widths it computes. It follows the network stage
  by stage the way the checker decodes it and stops at the first stage it cannot size (a
  malformed stage: the checker refuses the certificate there, before any later stage).
- The estimate counts rational operations of the checker's method on structured layers:
  a stage's per-row cost is out x in for a linear stage, out x taps for conv2d / pooling
  (taps: channels per group x kernel area), its width otherwise; each affine stage
  before the last is tightened by a backward pass of 2 x width rows through every stage
  up to it; the final enclosure by one of 2 x outputs rows through all of them; all of
  this per chain (CROWN 1, alpha-CROWN 2, branch and bound 2 plus one per branch) and
  per level (2). `width` is the widest value of the network (the box included).
- `dense` counts the entries of the matrices the checker materialises: it builds each
  conv2d / avg_pool2d stage, and the average pooling behind each max_pool2d stage, as a
  dense out x in matrix (`bounds_certificate_ia.windowed`), so a small file naming a wide
  window stage would demand memory proportional to out x in; that product is capped
  (`MAX_DENSE`, about 8 bytes an entry) before anything is decoded.
- Split certificates (`torchlean_split_bounds_v1`) are checked in float64, not in
  rationals: their estimate counts float64 multiply-adds (`flops`), per leaf 2 x width
  rows of every linear stage back-substituted through every stage up to it, plus each
  objective row through all of them (leaves sharing a box and the signs below a stage
  share that stage's work in the checker, so this is an upper estimate), capped by
  `MAX_FLOPS` (`TORCHLEAN_MAX_CERT_FLOPS`).
- `check_work` raises `CertificateWorkError` (a `TorchLeanError`) naming the estimate, the
  cap and how to raise it when any exceeds its cap; the caps default to `MAX_WIDTH` /
  `MAX_OPS` / `MAX_DENSE`, overridden by `TORCHLEAN_MAX_CERT_WIDTH` /
  `TORCHLEAN_MAX_CERT_OPS` / `TORCHLEAN_MAX_CERT_DENSE`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from spec.errors import TorchLeanError

__all__ = [
    "ENV_DENSE",
    "ENV_FLOPS",
    "ENV_OPS",
    "ENV_WIDTH",
    "MAX_DENSE",
    "MAX_FLOPS",
    "MAX_OPS",
    "MAX_WIDTH",
    "CertificateWorkError",
    "Work",
    "caps",
    "check_work",
    "dense_cap",
    "estimate",
    "flops_cap",
]

MAX_WIDTH = 2**20
"""The widest value (neurons of one stage, or box inputs) a certificate may declare."""
MAX_OPS = 10**10
"""The most rational operations (see the module docstring) a certificate may demand."""
MAX_DENSE = 2**24
"""The most dense-matrix entries (out x in over the window stages) the checker may build."""
ENV_WIDTH, ENV_OPS = "TORCHLEAN_MAX_CERT_WIDTH", "TORCHLEAN_MAX_CERT_OPS"
ENV_DENSE = "TORCHLEAN_MAX_CERT_DENSE"
MAX_FLOPS = 10**13
"""The most float64 multiply-adds (see the module docstring) a split certificate may demand."""
ENV_FLOPS = "TORCHLEAN_MAX_CERT_FLOPS"
SPLIT_FORMAT = "torchlean_split_bounds_v1"
_WINDOWED = ("conv2d", "avg_pool2d", "max_pool2d")
_AFFINE = ("linear", "conv2d", "avg_pool2d")
_CHAINS = {"ibp": 0, "crown": 1, "alpha-crown": 2, "bab": 2}


class CertificateWorkError(TorchLeanError):
    """A certificate demands more checking work than the caps allow."""


@dataclass(frozen=True)
class Work:
    """The widest value, the rational operations, and the stages sized (all of them
    unless a malformed stage stopped the estimate)."""

    width: int
    ops: int
    stages: int
    dense: int = 0
    flops: int = 0


def _ints(v: Any, k: int, least: int) -> list[int] | None:
    if isinstance(v, list) and len(v) == k and all(type(x) is int and x >= least for x in v):
        return v
    return None


def _list_len(v: Any) -> int | None:
    return len(v) if isinstance(v, list) and v else None


def _windowed(st: dict[str, Any], n: int) -> tuple[int, int] | None:
    """(output width, taps per output) of a conv2d / pooling stage reading n values."""
    shape = _ints(st.get("in_shape"), 3, 1)
    stride, pad = _ints(st.get("stride"), 2, 1), _ints(st.get("padding"), 2, 0)
    if shape is None or stride is None or pad is None or shape[0] * shape[1] * shape[2] != n:
        return None
    C, H, W = shape
    if st.get("op") == "conv2d":
        dil, w = _ints(st.get("dilation"), 2, 1), st.get("weight")
        try:
            O, cg, kh, kw = len(w), len(w[0]), len(w[0][0]), len(w[0][0][0])
        except (TypeError, IndexError, KeyError):
            return None
        if dil is None:
            return None
    else:
        k, dil = _ints(st.get("kernel_size"), 2, 1), [1, 1]
        if k is None:
            return None
        O, cg, (kh, kw) = C, 1, k
    ho = (H + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (W + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    if ho < 1 or wo < 1:
        return None
    return O * ho * wo, cg * kh * kw


def _stage(st: Any, n: int) -> tuple[int, int] | None:
    """(output width, per-row cost) of one stage reading a value of width n."""
    if not isinstance(st, dict):
        return None
    op = st.get("op")
    if op == "linear":
        rows = _list_len(st.get("weight"))
        return None if rows is None else (rows, rows * n)
    if op in ("conv2d", "avg_pool2d", "max_pool2d"):
        got = _windowed(st, n)
        return None if got is None else (got[0], got[0] * got[1])
    return (n, n) if isinstance(op, str) else None


def _split_estimate(cert: dict[str, Any], n: int, stages: list[Any]) -> Work:
    """Float64 multiply-adds of a split certificate's check (see the module docstring)."""
    widths, prefix, per_leaf = [n], 0, 0
    for st in stages:
        got = _stage(st, widths[-1])
        if got is None:
            break
        widths.append(got[0])
        if isinstance(st, dict) and st.get("op") == "linear":
            prefix += got[1]
            per_leaf += 2 * got[0] * prefix
    rows = cert.get("rows")
    per_leaf += (len(rows) if isinstance(rows, list) else 1) * prefix
    leaves = cert.get("leaves")
    count = len(leaves) if isinstance(leaves, list) else 0
    return Work(max(widths), 0, len(widths) - 1, 0, count * per_leaf)


def estimate(cert: Any) -> Work:
    """The work `cert` demands (see the module docstring); sizes only, nothing decoded."""
    if not isinstance(cert, dict):
        return Work(0, 0, 0)
    box = cert.get("box")
    n = _list_len(box.get("lower")) if isinstance(box, dict) else None
    net = cert.get("network")
    stages = net.get("stages") if isinstance(net, dict) else None
    if n is None or not isinstance(stages, list):
        return Work(n or 0, 0, 0)
    if cert.get("format") == SPLIT_FORMAT:
        return _split_estimate(cert, n, stages)
    widths, prefix, ops, dense = [n], 0, 0, 0
    for k, st in enumerate(stages):
        n_in = widths[_source(st, len(widths))]
        got = _stage(st, n_in)
        if got is None:
            break
        n, cost = got
        if st.get("op") in _WINDOWED:
            dense += n * n_in
        widths.append(n)
        prefix += cost
        ops += cost  # the interval (IBP) pass
        if st.get("op") in _AFFINE and k < len(stages) - 1:
            ops += 2 * n * prefix  # the backward pass tightening this stage's interval
    ops += 2 * widths[-1] * prefix  # the final enclosure
    return Work(max(widths), _chains(cert) * 2 * ops, len(widths) - 1, dense)


def _source(st: Any, known: int) -> int:
    """The value a stage reads: its first `inputs` entry (DAG networks), else the last."""
    src = st.get("inputs") if isinstance(st, dict) else None
    if isinstance(src, list) and src and type(src[0]) is int and 0 <= src[0] < known:
        return src[0]
    return known - 1


def _chains(cert: dict[str, Any]) -> int:
    alg = cert.get("algorithm")
    chains = _CHAINS.get(alg, 2) if isinstance(alg, str) else 2
    levels = cert.get("levels")
    if alg == "bab" and isinstance(levels, dict):
        branches = [v.get("branches") for v in levels.values() if isinstance(v, dict)]
        chains += max((len(b) for b in branches if isinstance(b, list)), default=0)
    return max(chains, 1)


def _env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        v = int(raw)
    except ValueError:
        raise CertificateWorkError(f"{name}={raw!r} is not an integer") from None
    if v < 1:
        raise CertificateWorkError(f"{name}={raw!r} must be at least 1")
    return v


def caps() -> tuple[int, int]:
    """(width cap, operations cap) in force: the defaults or the environment's."""
    return _env(ENV_WIDTH, MAX_WIDTH), _env(ENV_OPS, MAX_OPS)


def dense_cap() -> int:
    """The dense-entries cap in force: `MAX_DENSE` or the environment's."""
    return _env(ENV_DENSE, MAX_DENSE)


def flops_cap() -> int:
    """The float64 multiply-add cap in force: `MAX_FLOPS` or the environment's."""
    return _env(ENV_FLOPS, MAX_FLOPS)


def check_work(cert: Any, max_width: int | None = None, max_ops: int | None = None) -> Work:
    """`estimate(cert)`, refused when over a cap (given, else `caps()`)."""
    dw, do = caps()
    max_width = dw if max_width is None else max_width
    max_ops = do if max_ops is None else max_ops
    w = estimate(cert)
    if w.width > max_width:
        raise CertificateWorkError(
            f"the certificate declares a value of {w.width} entries (at most {max_width}; "
            f"raise with --max-width or {ENV_WIDTH})"
        )
    if w.ops > max_ops:
        raise CertificateWorkError(
            f"checking the certificate would take about {w.ops:.3g} rational operations (at "
            f"most {max_ops:.3g}; raise with --max-work or {ENV_OPS})"
        )
    if w.flops > flops_cap():
        raise CertificateWorkError(
            f"checking the certificate would take about {w.flops:.3g} float64 multiply-adds "
            f"(at most {flops_cap():.3g}; raise with {ENV_FLOPS})"
        )
    if w.dense > dense_cap():
        raise CertificateWorkError(
            f"checking the certificate would build {w.dense:.3g} dense matrix entries for its "
            f"window stages (at most {dense_cap():.3g}; raise with {ENV_DENSE})"
        )
    return w
