"""The interval arithmetic and JSON readers of the output-bound certificate checker
(`proofs.bounds_certificate_check`), kept apart so its CROWN and alpha-CROWN validation
stays readable. Imports nothing from `runtime/`.

Invariants:
- `IA` is outward-rounded interval arithmetic: (RD(lo), RU(hi)) of every operation, in
  PRECISION-bit contexts (level 1, finer than the writer's 160 bits) or in a format's own
  contexts (precision, emin, emax, subnormals: level 2), where constants are rounded to
  nearest once as the runtime casts them. `act` and `ibp_stage` follow the ordered kernels'
  op order (linear: a left fold from the first product, then + b; sigmoid 1/(1+exp(-x));
  BatchNorm ((x - mean) / sqrt(var + eps)) * w + b; GELU split at 0 and GELU_GRID, its cube
  bounded by its endpoints; LayerNorm with d*d as a square; leaky_relu and hardtanh, both
  nondecreasing, by their directed endpoint values).
- `phi_bounds` encloses min and max of f(x) - a x for tanh/sigmoid (convex on x <= 0,
  concave on x >= 0: endpoints on one side, a supporting tangent on the other);
  `piecewise` does it for GELU/BatchNorm from the interval evaluation on PIECES equal
  pieces; `lin_err` and `act_err` are the level-2 rounding-error bounds of a linear layer
  (gamma_{n+1} (sum |w| max|x| + |b|) + n eta (1 + gamma_{n+1})) and of tanh/sigmoid.
- `rat` reads a 'p/q' string (at most MAX_RATIONAL_CHARS), `jlist` a non-empty JSON list of
  a given length, `ints` a list of k integers; all raise `CertificateError` naming the
  field. `windowed` builds a conv2d / avg_pool2d stage's `Window` from its window
  parameters: per output position its taps, per output channel its kernel (gmpy2
  rationals) and first input; no dense matrix (memory O(positions x taps + kernel));
  rows are read window by window and pushed back as the transposed convolution
  (max_pool2d's windows are the rows of the same-shaped average pooling); `back_pool`
  pushes rows back through a max pooling's validated lines (max >= x_k, max <= u, or
  max = x_k when x_k dominates its window). `ibp_stage` takes [max of the lower ends, max
  of the upper ends] per max pooling window (max is exact).
- DAG networks: `stage_inputs` reads a stage's "inputs" (earlier values only; an add's two
  of one width), `add_err` is an add's level-2 error u max|a + b|, and `backward` is the
  checker's exact backward pass over a validated chain (`cross` per stage; rows split per
  value read and summed at fan-out points; `concretise` over a value's interval). The
  pass computes in gmpy2 rationals (exact, as Fractions would be; a zero coefficient is
  skipped: it adds nothing).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import gmpy2
from gmpy2 import mpfr, mpq

from spec.errors import TorchLeanError
from spec.ops import GELU_C, GELU_K

__all__ = [
    "AFFINE",
    "GELU_C",
    "GELU_GRID",
    "GELU_K",
    "IA",
    "MAX_RATIONAL_CHARS",
    "PIECES",
    "PRECISION",
    "CertificateError",
    "Window",
    "act",
    "act_err",
    "add_err",
    "back_pool",
    "back_pool_lines",
    "backward",
    "concretise",
    "cross",
    "exact",
    "exact_q",
    "ibp_stage",
    "ints",
    "jlist",
    "lin_err",
    "phi_bounds",
    "piecewise",
    "rat",
    "rejecting",
    "short",
    "stage_inputs",
    "windowed",
]

PRECISION = 200
AFFINE = ("linear", "conv2d", "avg_pool2d")  # stages crossed as y = W x + b
PIECES = 24  # GELU / BatchNorm1d relaxations: pieces per neuron (runtime.verification.PIECES)
# GELU's negative split points (runtime.verification.GELU_GRID); 0 is always a split point
GELU_GRID = [Fraction(v) for v in (-6, -4, -3, -5 / 2, -2, -7 / 4, -3 / 2, -5 / 4, -1)] + [
    Fraction(-k, 8) for k in range(7, 0, -1)
]
MAX_RATIONAL_CHARS = 2000
"""A 'p/q' string longer than this is refused (the writer's rationals are a few hundred
characters: binary64 values and 160-bit bounds)."""


class CertificateError(TorchLeanError):
    """The certificate is malformed or does not hold."""


def rejecting(check: Callable[[Any], str], cert: Any) -> str:
    """`check(cert)`, with any error other than `CertificateError` (a malformed value the
    checker did not anticipate) turned into a `CertificateError` refusing the certificate."""
    try:
        return check(cert)
    except CertificateError:
        raise
    except Exception as e:
        raise CertificateError(f"malformed certificate: {type(e).__name__}: {e}") from None


def rat(s: Any, what: str) -> Fraction:
    if not isinstance(s, str) or "/" not in s:
        raise CertificateError(f"{what}: expected a rational 'p/q', got {short(s)}")
    if len(s) > MAX_RATIONAL_CHARS:
        raise CertificateError(
            f"{what}: a rational of {len(s)} characters (at most {MAX_RATIONAL_CHARS}): refused"
        )
    try:
        p, q = s.split("/")
        return Fraction(int(p), int(q))
    except (ValueError, ZeroDivisionError):
        raise CertificateError(f"{what}: expected a rational 'p/q', got {s!r}") from None


class IA:
    """Outward interval arithmetic; `fmt` = (precision, emin, emax) for a format, else wide."""

    def __init__(self, fmt: tuple[int, int, int] | None) -> None:
        kw: dict[str, Any] = {"precision": PRECISION}
        if fmt is not None:
            kw = {"precision": fmt[0], "emin": fmt[1], "emax": fmt[2], "subnormalize": True}
        self.fmt = fmt
        self.d = gmpy2.context(round=gmpy2.RoundDown, **kw)
        self.u = gmpy2.context(round=gmpy2.RoundUp, **kw)
        self.n = gmpy2.context(round=gmpy2.RoundToNearest, **kw)

    def _in(self, ctx: Any, q: Fraction) -> Any:
        with gmpy2.context(ctx):
            return gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator))

    def box(self, q: Fraction) -> tuple[Any, Any]:
        return self._in(self.d, q), self._in(self.u, q)

    def const(self, q: Fraction) -> tuple[Any, Any]:
        if self.fmt is None:
            return self.box(q)
        v = self._in(self.n, q)
        return v, v

    def add(self, a: Any, b: Any) -> tuple[Any, Any]:
        return self.d.add(a[0], b[0]), self.u.add(a[1], b[1])

    def neg(self, a: Any) -> tuple[Any, Any]:
        return self.d.minus(a[1]), self.u.minus(a[0])  # not `-x`: the global context rounds

    def mul(self, a: Any, b: Any) -> tuple[Any, Any]:
        lo = [self.d.mul(x, y) for x in a for y in b]
        hi = [self.u.mul(x, y) for x in a for y in b]
        if any(gmpy2.is_nan(v) for v in lo + hi):
            raise CertificateError("interval product is NaN")
        return min(lo), max(hi)

    def div(self, a: Any, b: Any) -> tuple[Any, Any]:
        if not b[0] > 0:
            raise CertificateError("interval division by a non-positive interval")
        lo = [self.d.div(x, y) for x in a for y in b]
        hi = [self.u.div(x, y) for x in a for y in b]
        return min(lo), max(hi)

    def mono(self, fn: str, a: Any) -> tuple[Any, Any]:
        return getattr(self.d, fn)(a[0]), getattr(self.u, fn)(a[1])


def exact(x: Any) -> Fraction:
    if not gmpy2.is_finite(x):
        raise CertificateError(f"a recomputed bound is not finite ({x})")
    n, d = x.as_integer_ratio()
    return Fraction(int(n), int(d))


def exact_q(x: Any) -> Any:
    """`exact` as a gmpy2 rational (the same value; faster arithmetic)."""
    if not gmpy2.is_finite(x):
        raise CertificateError(f"a recomputed bound is not finite ({x})")
    return mpq(x)


def act(ia: IA, op: str, st: dict[str, Any], j: int, x: Any) -> tuple[Any, Any]:
    if op == "relu":
        return max(x[0], mpfr(0)), max(x[1], mpfr(0))
    if op == "tanh":
        return ia.mono("tanh", x)
    if op == "sigmoid":
        one = ia.const(Fraction(1))
        return ia.div(one, ia.add(one, ia.mono("exp", ia.neg(x))))
    if op == "bn":
        den = ia.mono("sqrt", ia.add(ia.box(st["var"][j]), ia.const(st["eps"])))
        y = ia.div(ia.add(x, ia.neg(ia.box(st["mean"][j]))), den)
        return ia.add(ia.mul(y, ia.box(st["weight"][j])), ia.box(st["bias"][j]))
    if op == "leaky_relu":  # x if x > 0 else RN(s x), s in [0, 1]: nondecreasing
        sl = ia.const(st["negative_slope"])
        lo = x[0] if x[0] > 0 else ia.mul(sl, (x[0], x[0]))[0]
        return lo, x[1] if x[1] > 0 else ia.mul(sl, (x[1], x[1]))[1]
    if op == "hardtanh":  # clamp(x, a, b): exact, nondecreasing in x, a and b
        a, b = ia.const(st["min_val"]), ia.const(st["max_val"])
        return min(max(x[0], a[0]), b[0]), min(max(x[1], a[1]), b[1])
    if op == "gelu":
        cuts = [x[0], *(mpfr(g) for g in [*GELU_GRID, Fraction(0)] if x[0] < g < x[1]), x[1]]
        lo = hi = None
        for a, b in itertools.pairwise(cuts):
            v = (a, b)
            # x -> (x*x)*x is nondecreasing (also rounded): bound it by its endpoints
            cube = (ia.d.mul(ia.d.mul(a, a) if a >= 0 else ia.u.mul(a, a), a),
                    ia.u.mul(ia.u.mul(b, b) if b >= 0 else ia.d.mul(b, b), b))  # fmt: skip
            t = ia.mul(ia.const(GELU_K), cube)
            t = ia.mono("tanh", ia.mul(ia.const(GELU_C), ia.add(v, t)))
            y = ia.mul(ia.mul(ia.const(Fraction(1, 2)), v), ia.add(ia.const(Fraction(1)), t))
            lo = y[0] if lo is None else min(lo, y[0])
            hi = y[1] if hi is None else max(hi, y[1])
        return lo, hi
    raise CertificateError(f"unknown op {op!r}")


def _layernorm(ia: IA, st: dict[str, Any], xs: list[Any]) -> list[Any]:
    n = ia.const(Fraction(len(xs)))
    acc = xs[0]
    for x in xs[1:]:
        acc = ia.add(acc, x)
    mu = ia.div(acc, n)
    ds = [ia.add(x, ia.neg(mu)) for x in xs]
    sq = []
    for d in ds:  # the square of one value is >= 0 (no `abs`: it rounds to 53 bits)
        if d[0] >= 0:
            sq.append((ia.d.mul(d[0], d[0]), ia.u.mul(d[1], d[1])))
        elif d[1] <= 0:
            sq.append((ia.d.mul(d[1], d[1]), ia.u.mul(d[0], d[0])))
        else:
            sq.append((mpfr(0), max(ia.u.mul(d[0], d[0]), ia.u.mul(d[1], d[1]))))
    acc = sq[0]
    for v in sq[1:]:
        acc = ia.add(acc, v)
    den = ia.mono("sqrt", ia.add(ia.div(acc, n), ia.const(st["eps"])))
    return [
        ia.add(ia.mul(ia.div(d, den), ia.box(w)), ia.box(b))
        for d, w, b in zip(ds, st["weight"], st["bias"], strict=True)
    ]


def ibp_stage(ia: IA, st: dict[str, Any], xs: list[Any]) -> list[Any]:
    """A stage's output intervals from its input intervals (an add's two inputs
    concatenated)."""
    if st["op"] == "add":  # one rounded addition per element
        n = len(xs) // 2
        return [ia.add(a, b) for a, b in zip(xs[:n], xs[n:], strict=True)]
    if st["op"] == "ln":
        return _layernorm(ia, st, xs)
    if st["op"] == "max_pool2d":  # exact in every format: one of the window's inputs
        return [(max(xs[i][0] for i in w), max(xs[i][1] for i in w)) for w in st["windows"]]
    if st["op"] in ("conv2d", "avg_pool2d"):  # summation order not modelled: any order
        out, win = [], st["window"]
        ends = [(exact_q(x[0]), exact_q(x[1])) for x in xs]
        for j, (b, e) in enumerate(zip(st["bias"], lin_err(ia.fmt, st, xs), strict=True)):
            lo = hi = b
            for i, w in win.row(j):
                a, c = w * ends[i][0], w * ends[i][1]
                lo, hi = lo + min(a, c), hi + max(a, c)
            out.append((ia.box(lo - e)[0], ia.box(hi + e)[1]))
        return out
    if st["op"] == "linear":
        out = []
        for row, b in zip(st["weight"], st["bias"], strict=True):
            acc = None
            for w, x in zip(row, xs, strict=True):
                p = ia.mul(ia.box(w), x)
                acc = p if acc is None else ia.add(acc, p)
            out.append(ia.add(acc, ia.box(b)))
        return out
    return [act(ia, st["op"], st, j, x) for j, x in enumerate(xs)]


def jlist(v: Any, n: int | None, what: str) -> list[Any]:
    """A non-empty JSON list, of length n when n is given."""
    if not isinstance(v, list) or not v or (n is not None and len(v) != n):
        want = f"{n} entries" if n is not None else "a non-empty list"
        raise CertificateError(f"{what}: expected {want}, got {short(v)}")
    return v


def short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def phi_bounds(op: str, a: Fraction, lo: Fraction, hi: Fraction) -> tuple[Fraction, Fraction]:
    """Enclosure of min and max of f(x) - a x on [lo, hi] (f convex on x<=0, concave x>=0)."""
    ia = IA(None)
    A = ia.box(a)

    def f(x: Fraction) -> Any:
        return act(ia, op, {}, 0, ia.box(x))

    def phi(x: Fraction) -> Any:
        return ia.add(f(x), ia.neg(ia.mul(A, ia.box(x))))

    def dphi(x: Fraction) -> Any:
        y, one = f(x), ia.const(Fraction(1))
        d = ia.add(one, ia.neg(ia.mul(y, y))) if op == "tanh" else ia.mul(y, ia.add(one, ia.neg(y)))
        return ia.add(d, ia.neg(A))

    def fprime(x: float) -> float:
        if op == "tanh":
            t = math.tanh(x)
            return 1.0 - t * t
        s = 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
        return s * (1.0 - s)

    pieces = []
    if lo < 0:
        pieces.append((lo, min(hi, Fraction(0)), True))
    if hi > 0:
        pieces.append((max(lo, Fraction(0)), hi, False))
    if not pieces:
        pieces.append((lo, hi, True))
    mins, maxs = [], []
    for p, q, convex in pieces:
        # a tangent point: f' increases on the convex piece, decreases on the concave one
        pf, qf, af = float(p), float(q), float(a)
        if (fprime(pf) >= af) == convex:
            df = pf
        elif (fprime(qf) <= af) == convex:
            df = qf
        else:
            for _ in range(100):
                m = (pf + qf) / 2
                if (fprime(m) < af) == convex:
                    pf = m
                else:
                    qf = m
            df = (pf + qf) / 2
        d = min(max(Fraction(df), p), q)
        ep, eq = phi(p), phi(q)
        span = (ia.box(p - d)[0], ia.box(q - d)[1])
        tan = ia.add(phi(d), ia.mul(dphi(d), span))
        if convex:
            mins.append(exact(tan[0]))
            maxs.append(max(exact(ep[1]), exact(eq[1])))
        else:
            mins.append(min(exact(ep[0]), exact(eq[0])))
            maxs.append(exact(tan[1]))
    return min(mins), max(maxs)


def piecewise(ia: IA, st: dict[str, Any], j: int, lo: Fraction, hi: Fraction,
               a: Fraction) -> tuple[Fraction, Fraction]:  # fmt: skip
    """Enclosure of min and max of f(x) - a x on [lo, hi] from the interval evaluation of f
    on PIECES equal pieces, each widened outward to the arithmetic's numbers. BatchNorm at
    the real level (`ia.fmt` None) is affine in x, so is f(x) - a x: its extremes are at
    the ends, and the two one-point pieces [lo, lo], [hi, hi] suffice."""
    cuts = [lo + (hi - lo) * Fraction(i, PIECES) for i in range(PIECES + 1)]
    pieces = list(itertools.pairwise(cuts))
    if st["op"] == "bn" and ia.fmt is None:
        pieces = [(lo, lo), (hi, hi)]
    mn: Fraction | None = None
    mx: Fraction | None = None
    for p, q in pieces:
        P, Q = ia.box(p)[0], ia.box(q)[1]
        f = act(ia, st["op"], st, j, (P, Q))
        ap, aq = a * exact(P), a * exact(Q)
        lo_i, hi_i = exact(f[0]) - max(ap, aq), exact(f[1]) - min(ap, aq)
        mn = lo_i if mn is None else min(mn, lo_i)
        mx = hi_i if mx is None else max(mx, hi_i)
    assert mn is not None and mx is not None
    return mn, mx


def lin_err(fmt: tuple[int, int, int] | None, st: dict[str, Any], xs: list[Any]) -> list[Any]:
    """Level 2: per output, gamma_{n+1} (sum |w| max|x| + |b|) + n eta (1 + gamma_{n+1}),
    with n the row length for linear (its fold) and the row's nonzero weights for conv2d /
    avg_pool2d (any order; a zero weight gives an exact zero)."""
    if fmt is None:
        return [Fraction(0)] * len(st["bias"])
    u, eta = Fraction(1, 2 ** fmt[0]), Fraction(1, 2 ** (1 - fmt[1]))
    X = [max(abs(exact_q(x[0])), abs(exact_q(x[1]))) for x in xs]
    out = []
    for j, b in enumerate(st["bias"]):
        if st["op"] == "linear":
            row, n = list(enumerate(st["weight"][j])), len(xs)
        else:  # a window's nonzero weights
            row = st["window"].row(j)
            n = len(row)
        g = (n + 1) * u / (1 - (n + 1) * u)
        s = sum((abs(w) * X[i] for i, w in row if w), Fraction(0))
        out.append(g * (s + abs(b)) + n * eta * (1 + g))
    return out


def add_err(fmt: tuple[int, int, int] | None, xs: list[Any]) -> list[Fraction]:
    """Level 2, an add of two values (xs: their intervals, concatenated): per element
    u max|a + b|, the round-to-nearest error of one addition (exact when subnormal)."""
    n = len(xs) // 2
    if fmt is None:
        return [Fraction(0)] * n
    u = Fraction(1, 2 ** fmt[0])
    return [u * max(abs(exact(a[0]) + exact(b[0])), abs(exact(a[1]) + exact(b[1])))
            for a, b in zip(xs[:n], xs[n:], strict=True)]  # fmt: skip


def act_err(fmt: tuple[int, int, int] | None, op: str, lo: Fraction, hi: Fraction) -> Fraction:
    if fmt is None or op not in ("tanh", "sigmoid"):
        return Fraction(0)
    ia = IA(None)
    ends = [act(ia, op, {}, 0, ia.box(v)) for v in (lo, hi)]
    M = max(max(abs(exact(e[0])), abs(exact(e[1]))) for e in ends)
    u, eta = Fraction(1, 2 ** fmt[0]), Fraction(1, 2 ** (1 - fmt[1]))
    if op == "tanh":
        return u * M + eta
    return M * ((1 + u) / ((1 - u) * (1 - u - eta)) - 1) + eta + Fraction(1, 2 ** (fmt[2] - 1))


def ints(v: Any, k: int, what: str, least: int = 0) -> list[int]:
    if not (isinstance(v, list) and len(v) == k and all(type(x) is int and x >= least
                                                          for x in v)):  # fmt: skip
        raise CertificateError(f"{what}: expected {k} integers >= {least}, got {short(v)}")
    return v


class Window:
    """A conv2d / avg_pool2d stage's matrix kept as its windows: output j = o * positions
    + pix has, for each (k, off) in `taps[pix]`, weight `kernel[o][k]` on input
    `base[o] + off` and 0 on every other input (the taps of one output read distinct
    inputs; taps in the zero padding are left out)."""

    def __init__(self, n_in: int, taps: list[list[tuple[int, int]]],
                 kernel: list[list[Fraction]], base: list[int]) -> None:  # fmt: skip
        self.n_in, self.taps, self.base = n_in, taps, base
        self.kernel = [[mpq(v) for v in r] for r in kernel]  # exact, faster than Fraction
        self.positions = len(taps)

    def row(self, j: int) -> list[tuple[int, Any]]:
        """Row j's nonzero entries (input index, weight)."""
        o, pix = divmod(j, self.positions)
        ker, b = self.kernel[o], self.base[o]
        return [(b + off, ker[k]) for k, off in self.taps[pix] if ker[k]]

    def back(self, lam: list[Any]) -> list[Any]:
        """The row lam times the matrix (exact), window by window."""
        out = [mpq(0)] * self.n_in
        for j, lv in enumerate(lam):
            if lv:
                for i, w in self.row(j):
                    out[i] += lv * w
        return out


def windowed(st: dict[str, Any], dt: str, n: int, w: str, decode: Any) -> dict[str, Any]:
    """A conv2d / avg_pool2d stage as its windows over the row-major (C, H, W) input
    (`Window`: output (o, i, j) sums w[o, c, p, r] * x[g * C/groups + c, i*s0 - p0 + p*d0,
    j*s1 - p1 + r*d1] over the taps inside the input), and its bias per output."""
    C, H, W = ints(st.get("in_shape"), 3, f"{w}.in_shape", 1)
    if C * H * W != n:
        raise CertificateError(f"{w}.in_shape: {[C, H, W]} does not hold {n} inputs")
    s0, s1 = ints(st.get("stride"), 2, f"{w}.stride", 1)
    p0, p1 = ints(st.get("padding"), 2, f"{w}.padding")
    if st["op"] == "conv2d":
        d0, d1 = ints(st.get("dilation"), 2, f"{w}.dilation", 1)
        groups = ints([st.get("groups")], 1, f"{w}.groups", 1)[0]
        wt = jlist(st.get("weight"), None, f"{w}.weight")
        O, cg = len(wt), len(jlist(wt[0], None, f"{w}.weight[0]"))
        kh = len(jlist(wt[0][0], None, f"{w}.weight[0][0]"))
        kw = len(jlist(wt[0][0][0], None, f"{w}.weight[0][0][0]"))
        if cg * groups != C or O % groups:
            raise CertificateError(f"{w}: channels and groups do not fit")
        kernel = [[decode(v, dt, f"{w}.weight") for c in jlist(o, cg, f"{w}.weight")
                   for r in jlist(c, kh, f"{w}.weight") for v in jlist(r, kw, f"{w}.weight")]
                  for o in wt]  # fmt: skip
        bias = [decode(v, dt, f"{w}.bias") for v in jlist(st.get("bias"), O, f"{w}.bias")]
        base = [(o // (O // groups)) * cg * H * W for o in range(O)]
    else:
        kh, kw = ints(st.get("kernel_size"), 2, f"{w}.kernel_size", 1)
        d0 = d1 = 1
        O, cg = C, 1
        kernel = [[Fraction(1, kh * kw)] * (kh * kw) for _ in range(C)]
        bias = [Fraction(0)] * C
        base = [o * H * W for o in range(O)]
    Ho, Wo = (H + 2 * p0 - d0 * (kh - 1) - 1) // s0 + 1, (W + 2 * p1 - d1 * (kw - 1) - 1) // s1 + 1
    if Ho < 1 or Wo < 1:
        raise CertificateError(f"{w}: empty output")
    taps = []
    for i, j in itertools.product(range(Ho), range(Wo)):
        pos = []
        for c, p, r in itertools.product(range(cg), range(kh), range(kw)):
            y, x = i * s0 - p0 + p * d0, j * s1 - p1 + r * d1
            if 0 <= y < H and 0 <= x < W:
                pos.append(((c * kh + p) * kw + r, (c * H + y) * W + x))
        taps.append(pos)
    bs = [bias[o] for o in range(O) for _ in range(Ho * Wo)]
    return {"op": st["op"], "window": Window(n, taps, kernel, base), "bias": bs}


def back_pool(pool: list[tuple[int, bool, Fraction]], lam: list[list[Fraction]],
               c: list[Fraction], n: int) -> list[list[Fraction]]:  # fmt: skip
    """Rows through a max pooling: max >= x_k under a coefficient >= 0 (or when x_k
    dominates: max = x_k), max <= u under a negative one."""
    out = []
    for r, row in enumerate(lam):
        new = [Fraction(0)] * n
        for (k, dom, u), lv in zip(pool, row, strict=True):
            if lv >= 0 or dom:
                new[k] += lv
            else:
                c[r] += lv * u
        out.append(new)
    return out


def stage_inputs(st: dict[str, Any], t: int, widths: list[int], w: str) -> list[int]:
    """The values stage t reads: `inputs` (DAG networks: earlier values, 0 the network
    input; two of equal width for an add, one otherwise), or the previous stage's output."""
    op, src = st.get("op"), st.get("inputs")
    if src is None and op != "add":
        return [t - 1]
    k = 2 if op == "add" else 1
    if not (isinstance(src, list) and len(src) == k
            and all(type(i) is int and 0 <= i < t for i in src)):  # fmt: skip
        raise CertificateError(f"{w}.inputs: expected {k} earlier value(s) (0 to {t - 1}), "
                               f"got {short(src)}")  # fmt: skip
    if op == "add" and widths[src[0]] != widths[src[1]]:
        raise CertificateError(f"{w}.inputs: the added values have widths "
                               f"{widths[src[0]]} and {widths[src[1]]}")  # fmt: skip
    return src


def back_pool_lines(pool: list[tuple[int, bool, Fraction]], windows: list[list[int]],
                    ins: list[tuple[Fraction, Fraction]], own: list[list[Any]],
                    lam: list[list[Fraction]], c: list[Fraction]
                    ) -> list[list[Fraction]]:  # fmt: skip
    """Rows through a max pooling with per-row upper lines (see the module docstring)."""
    out = []
    for r, row in enumerate(lam):
        new = [Fraction(0)] * len(ins)
        for o, ((k, dom, _), lv) in enumerate(zip(pool, row, strict=True)):
            if lv >= 0 or dom:
                new[k] += lv
                continue
            sl, win = own[r][o], windows[o]
            total = sum((a * ins[i][0] for a, i in zip(sl, win, strict=True)), Fraction(0))
            cl = max((1 - a) * ins[i][1] - (total - a * ins[i][0])
                     for a, i in zip(sl, win, strict=True))  # fmt: skip
            for a, i in zip(sl, win, strict=True):
                new[i] += lv * a
            c[r] += lv * cl
        out.append(new)
    return out


def backward(stages: list[dict[str, Any]], ch: Any, box: list[tuple[Fraction, Fraction]],
              C: list[list[Fraction]], t: int,
              sl: dict[int, list[list[Fraction]]] | None = None) -> list[Fraction]:  # fmt: skip
    """Exact lower bounds of C @ z_t over the chain's validated relaxations (with per-row
    ReLU lower slopes `sl` where given). Stages are crossed in decreasing order; a stage's
    rows over its inputs are split per value read and summed into that value's rows (an
    add sends each row to both of its inputs); a LayerNorm's rows, and the input's, are
    concretised over their value's (validated) interval."""
    pending: dict[int, list[list[Any]]] = {t: [[mpq(v) for v in r] for r in C]}
    c = [mpq(0)] * len(C)
    for s in range(t, 0, -1):
        lam = pending.pop(s, None)
        if lam is None:
            continue
        st = stages[s - 1]
        if st["op"] == "ln":
            concretise(lam, ch.outs[s], c)  # over LayerNorm's (validated) output interval
            continue
        new = cross(st, ch, s, lam, c, sl)
        off = 0
        for i, n in zip(st["src"], st["widths"], strict=True):
            part = [row[off : off + n] for row in new]
            off += n
            old = pending.get(i)
            if old is not None:  # a fan-out point: the rows of every reader, summed
                part = [[a + b for a, b in zip(ra, rb, strict=True)]
                        for ra, rb in zip(old, part, strict=True)]  # fmt: skip
            pending[i] = part
    if 0 in pending:
        concretise(pending[0], box, c)
    return c


def concretise(lam: list[list[Any]], box: list[Any], c: list[Any]) -> None:
    """Add each row's lower bound over the intervals `box` to its constant (exact)."""
    box = [(mpq(a), mpq(b)) for a, b in box]
    for r, row in enumerate(lam):
        c[r] += sum((lv * (box[j][0] if lv >= 0 else box[j][1]) for j, lv in enumerate(row)
                     if lv), mpq(0))  # fmt: skip


def cross(st: dict[str, Any], ch: Any, s: int, lam: list[list[Fraction]], c: list[Fraction],
           sl: dict[int, list[list[Fraction]]] | None) -> list[list[Fraction]]:  # fmt: skip
    """Rows through stage s (constants into c): the rows over its inputs, concatenated."""
    if st["op"] == "max_pool2d":
        own = sl.get(s) if sl is not None else None  # alpha-CROWN's upper lines, per row
        if own is None:
            return back_pool(ch.pool[s], lam, c, len(ch.ins[s]))
        return back_pool_lines(ch.pool[s], st["windows"], ch.ins[s], own, lam, c)
    if st["op"] == "add":  # y = a + b + delta, |delta| <= err: the row to a and to b
        for r, row in enumerate(lam):
            c[r] -= sum((abs(lv) * ev for lv, ev in zip(row, ch.errs[s], strict=True)),
                        Fraction(0))  # fmt: skip
        return [row + row for row in lam]
    if st["op"] in AFFINE:
        W = st.get("weight")
        b, e = [mpq(v) for v in st["bias"]], [mpq(v) for v in ch.errs[s]]
        for r, row in enumerate(lam):
            c[r] += sum((lv * b[j] - abs(lv) * e[j] for j, lv in enumerate(row) if lv), mpq(0))
        if "window" in st:  # conv2d / avg_pool2d: the transposed convolution of each row
            return [st["window"].back(row) for row in lam]
        Wq = [[mpq(v) for v in r] for r in W]
        return [[sum((row[i] * Wq[i][j] for i in range(len(Wq)) if row[i]), mpq(0))
                 for j in range(len(Wq[0]))] for row in lam]  # fmt: skip
    own = sl.get(s) if sl is not None else None
    if s not in ch.qrelax:
        ch.qrelax[s] = [[mpq(v) for v in r] for r in ch.relax[s]]
    rq = ch.qrelax[s]
    for r, row in enumerate(lam):
        for j, lv in enumerate(row):
            if not lv:
                continue  # a zero coefficient stays zero and adds nothing
            aL, cL, aU, cU = rq[j]
            if own is not None and isinstance(own[r][j], list):
                aL, cL, aU, cU = own[r][j]  # tanh / sigmoid: the row's relaxation
            elif own is not None:
                aL = own[r][j]  # ReLU: the row's lower slope
            row[j], c[r] = (lv * aL, c[r] + lv * cL) if lv >= 0 else (lv * aU, c[r] + lv * cU)
    return lam
