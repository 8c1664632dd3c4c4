"""The certificate checker's validation of elementwise relaxations
(`proofs.bounds_certificate_check`): a recorded line pair (aL, cL, aU, cU) is checked to
lie below / above the stage's function on the neuron's validated interval, by this
module's own means. Imports nothing from `runtime/`.

Invariants (`check_relax` accepts a relaxation only when):
- constant bounds (both slopes 0) contain this checker's own interval evaluation; or
- ReLU: the upper line is above ReLU at both ends (ReLU minus a line is convex), the lower
  line below at both ends and, when lo < 0 < hi, at the kink (`relu_lower_ok`);
- GELU / BatchNorm: lines whose intercepts enclose the checker's piecewise evaluation of
  f(x) - a x for their slopes (parallel for CROWN, any two slopes for alpha-CROWN's
  GELU); tanh / sigmoid: the intercepts enclose `phi_bounds` (min / max of f(x) - a x),
  widened by the level-2 rounding error;
- leaky_relu / hardtanh (`PL_ATTRS`; `pl_valid`): exact. Their attributes are exact p/q
  strings in the network (`pl_stage`: negative_slope in [0, 1], min_val < max_val); at
  level 1 (fmt None) f uses them exactly, at level 2 each is rounded once to nearest into
  the format (as the kernels cast them): leaky_relu(x) = x if x > 0 else RN(s x),
  hardtanh(x) = clamp(x, a, b) (exact). f minus a line is piecewise linear with its kinks
  at 0 (leaky_relu) or a, b (hardtanh), so a line is below (above) f on [lo, hi] iff it is
  at lo, hi and the kinks strictly inside. At level 2 leaky_relu's rounded product is
  within err = u s max(0, -lo) + eta of s x (u = 2^-p, eta = 2^(emin - 1), recomputed
  here): a lower line must stay below f - err, an upper one above f + err. alpha-CROWN's
  leaky_relu lower slopes are checked the same way with the stage's own intercept
  (`leaky_slope_ok`). Their interval evaluation is `bounds_certificate_ia.act`.
- max_pool2d's alpha-CROWN upper lines (`pool_slopes`, `back_pool_lines`): per row and
  output, slopes lam in [0, 1] over the window's inputs; the line max <= sum lam_i x_i + c
  takes c = max over j of ((1 - lam_j) u_j - sum_{i != j} lam_i l_i), recomputed here on
  the validated input intervals [l_i, u_i]. It is sound for every such lam: h - max is
  concave in x, and max over the box of (x_j - sum lam_i x_i) for a fixed j is reached at
  x_j = u_j (coefficient 1 - lam_j >= 0), x_i = l_i (coefficient -lam_i <= 0); c is the
  maximum of those maxima. Where a coefficient is >= 0 (or the window is dominated) the
  validated lower line max >= x_k is used, as `bounds_certificate_ia.back_pool` does.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .bounds_certificate_ia import IA, CertificateError, exact, jlist, phi_bounds, rat

__all__ = [
    "PL_ATTRS",
    "check_relax",
    "leaky_slope_ok",
    "pl_stage",
    "pl_valid",
    "pool_slopes",
    "relu_lower_ok",
]

PL_ATTRS = {"leaky_relu": ("negative_slope",), "hardtanh": ("min_val", "max_val")}


def relu_lower_ok(a: Fraction, c: Fraction, lo: Fraction, hi: Fraction) -> bool:
    """a x + c <= ReLU(x) on [lo, hi]: at both ends and, when lo < 0 < hi, at the kink 0
    (the line minus ReLU is concave, so its maximum is at one of those points)."""
    ends = all(a * x + c <= max(x, Fraction(0)) for x in (lo, hi))
    return ends and not (lo < 0 < hi and c > 0)


def check_relax(op: str, r: list[Fraction], lo: Fraction, hi: Fraction, err: Fraction,
                const: tuple[Fraction, Fraction], where: str, piecewise: Any = None,
                fmt: tuple[int, int, int] | None = None,
                st: dict[str, Any] | None = None) -> None:  # fmt: skip
    """Raise `CertificateError` unless r relaxes the stage's f on [lo, hi] (see the module
    docstring; `st` and the level's `fmt` for leaky_relu / hardtanh)."""
    aL, cL, aU, cU = r
    bad = CertificateError(f"{where}: relaxation {[str(v) for v in r]} is not valid on "
                           f"[{lo}, {hi}]")  # fmt: skip
    if op in PL_ATTRS:
        if st is None or not pl_valid(fmt, st, tuple(r), lo, hi):
            raise bad
        return
    if aL == 0 and aU == 0 and cL <= const[0] and cU >= const[1]:
        return  # constant bounds around this checker's own interval
    if op == "relu":
        # ReLU - (aU x + cU) is convex, so the upper line is above ReLU on [lo, hi] iff it is
        # at the endpoints; (aL x + cL) - ReLU is concave with its kink at 0, so the lower
        # line needs the endpoints and, when lo < 0 < hi, x = 0 (intercept <= ReLU(0) = 0)
        for x in (lo, hi):
            if aU * x + cU < max(x, Fraction(0)):
                raise bad
        if not relu_lower_ok(aL, cL, lo, hi):
            raise bad
        return
    if op in ("gelu", "bn") and piecewise is not None and hi > lo:
        m, M = piecewise(aL)[0], piecewise(aU)[1]
        if cL > m or cU < M:
            raise bad
        return
    if op not in ("tanh", "sigmoid"):
        raise bad
    m, _ = phi_bounds(op, aL, lo, hi)
    _, M = phi_bounds(op, aU, lo, hi)
    if cL > m - err or cU < M + err:
        raise bad


def pl_stage(op: str, st: dict[str, Any], where: str) -> dict[str, Any]:
    """A network entry of a leaky_relu / hardtanh stage, its attributes read exactly."""
    out: dict[str, Any] = {"op": op}
    for name in PL_ATTRS[op]:
        out[name] = rat(st.get(name), f"{where}.{name}")
    if op == "leaky_relu" and not 0 <= out["negative_slope"] <= 1:
        raise CertificateError(f"{where}.negative_slope: expected a slope in [0, 1]")
    if op == "hardtanh" and not out["min_val"] < out["max_val"]:
        raise CertificateError(f"{where}: expected min_val < max_val")
    return out


def _level(fmt: tuple[int, int, int] | None, v: Fraction) -> Fraction:
    """An attribute at the level: exact (fmt None) or rounded to nearest into the format."""
    return v if fmt is None else exact(IA(fmt).const(v)[0])


def pl_valid(fmt: tuple[int, int, int] | None, st: dict[str, Any], line: tuple[Fraction, ...],
             lo: Fraction, hi: Fraction, upper: bool | None = None) -> bool:  # fmt: skip
    """Whether line = (aL, cL, aU, cU) relaxes the stage's f on [lo, hi] at the level (with
    `upper` True / False only that line: (a, c) is checked as an upper / lower line)."""
    err = Fraction(0)
    if st["op"] == "leaky_relu":
        s = _level(fmt, st["negative_slope"])
        kinks = [Fraction(0)]
        if fmt is not None and lo < 0:
            err = Fraction(1, 2 ** fmt[0]) * s * -lo + Fraction(1, 2 ** (1 - fmt[1]))

        def f(x: Fraction) -> Fraction:
            return x if x > 0 else s * x
    else:
        a, b = _level(fmt, st["min_val"]), _level(fmt, st["max_val"])
        kinks = [a, b]

        def f(x: Fraction) -> Fraction:
            return a if x < a else (b if b < x else x)

    pts = [lo, *(k for k in kinks if lo < k < hi), hi]
    if upper is None:
        checks = [(line[0], line[1], False), (line[2], line[3], True)]
    else:
        checks = [(line[0], line[1], upper)]
    for k, c, up in checks:
        for p in pts:
            if (k * p + c < f(p) + err) if up else (k * p + c > f(p) - err):
                return False
    return True


def leaky_slope_ok(fmt: tuple[int, int, int] | None, st: dict[str, Any], a: Fraction,
                   c: Fraction, lo: Fraction, hi: Fraction, where: str) -> Fraction:  # fmt: skip
    """alpha-CROWN's lower slope a of a leaky_relu neuron (with the stage's intercept c),
    returned when it gives a lower line on [lo, hi]; else `CertificateError`."""
    if not pl_valid(fmt, st, (a, c), lo, hi, upper=False):
        raise CertificateError(
            f"{where}: slope {a} gives no lower line of leaky_relu on [{lo}, {hi}] (not valid)"
        )
    return a


def pool_slopes(val: Any, windows: list[list[int]], rows: int, where: str) -> list[list[Any]]:
    """alpha-CROWN's max_pool2d slopes: per row, per output, one p/q in [0, 1] per input of
    the output's window."""
    out = []
    for i, r in enumerate(jlist(val, rows, where)):
        row = []
        for o, (e, win) in enumerate(zip(jlist(r, len(windows), f"{where}[{i}]"), windows,
                                         strict=True)):  # fmt: skip
            w = f"{where}[{i}][{o}]"
            lam = [rat(v, w) for v in jlist(e, len(win), w)]
            if not all(0 <= a <= 1 for a in lam):
                raise CertificateError(f"{w}: slopes {[str(a) for a in lam]} not in [0, 1]")
            row.append(lam)
        out.append(row)
    return out
