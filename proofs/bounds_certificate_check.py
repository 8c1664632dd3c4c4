"""Independent checker of output-bound certificates: `python -m proofs check-cert FILE`.

A certificate (format `torchlean_output_bounds_v1`, written by
`runtime.verification.VerificationResult.save_certificate`) claims bounds on a trained network's
outputs over an L-infinity box, at level `real` (the real-valued network) and `runtime`
(the ordered-kernel execution in the network's dtype). This module re-validates it without
importing `runtime`: it decodes the weights from their bit patterns itself, and uses only
gmpy2, `fractions`, the spec's GELU constants and `spec.safe_files` (to read a file).
(Not to be confused with `proofs/certificate.py`, the certificate of a proof run.)

Invariants (what `check_certificate` establishes before it accepts):
- the `digest` is the sha256 of the certificate without it (any edit is detected), and
  `model_hash` is the sha256 of the embedded network (architecture and state bits);
- the box is consistent: lower = center - radius, upper = center + radius, radius >= 0,
  norm "inf";
- IBP certificates: for each level, this module's own interval evaluation (200-bit
  directed rounding for `real`; directed rounding in the dtype's own format, following the
  ordered op order, for `runtime`) lies inside the certified bounds (and margins);
- CROWN certificates: every relaxation in the witness is checked to be valid on its
  interval (ReLU, exactly: an upper line at the endpoints, since ReLU minus a line is convex;
  a lower line at the endpoints and, when the interval contains 0 inside, at the kink 0;
  tanh/sigmoid: by this module's own convexity and
  tangent enclosure of min/max of f(x) - a x, widened by the level-2 rounding error; GELU and
  BatchNorm1d: constant bounds containing this module's interval evaluation, or parallel
  lines whose intercepts enclose this module's evaluation of f(x) - a x on 24 equal
  pieces of the interval; leaky_relu and hardtanh: exactly, at the ends and the kinks
  inside, leaky_relu's level-2 product error recomputed: `bounds_certificate_relax`),
  every stored interval is checked to contain the intersection of IBP and the
  exact-rational backward pass over the already-validated relaxations (stopping at a
  LayerNorm, whose validated
  output interval it concretises over; a conv2d / avg_pool2d stage reading the box
  itself, with no `alpha`, is checked against its IBP interval alone, which equals that
  intersection exactly), and the certified bounds (and margins)
  contain the final intersection. By induction every stored interval is sound, hence the
  bounds are.
- DAG networks (residual adds): a network stage may carry "inputs", the values it reads
  (0: the input, t: stage t's output; earlier values only; two of one width for an "add",
  which it requires), else it reads the previous stage's output. IBP and the chains
  evaluate each stage on its inputs' validated intervals; an add is one rounded addition
  per element (level-2 error u max|a + b|, `add_err`) and its interval is tightened by the
  backward pass like an affine stage's; the backward pass sends an add's rows to both
  inputs and sums the rows reaching a value from several readers; a branch split clamps
  the value its ReLU stage reads. A network JSON without "inputs" is a chain, as always.
- alpha-CROWN certificates: the CROWN witness is validated as above; then a second chain
  (`alpha_witness`) the same way, except that each linear stage's interval is also
  intersected with the CROWN chain's validated one, and every backward pass uses the
  per-row ReLU / leaky_relu lower slopes and tanh / sigmoid relaxations it records
  (`alpha` of a stage entry for its intermediate bounds, the level's `alpha` for the final
  lower/upper/margin rows). Each slope is checked to give, with its neuron's validated
  intercept, a line below ReLU (leaky_relu) on the neuron's interval (at the ends and at
  the kink); each tanh / sigmoid
  relaxation as the witness's own are (this module's enclosure of min / max of
  f(x) - a x, widened by the level-2 error); the optimiser that chose them is not re-run. The
  final enclosure is the intersection of both chains' (and their last intervals').
- The interval arithmetic and JSON readers live in `proofs.bounds_certificate_ia`.
- The constants the writer and this checker must agree on (FORMAT, PIECES, GELU_GRID,
  FORMATS; PRECISION is this checker's own, finer than the writer's 160 bits) are restated
  here, not imported; tests/test_verify.py pins each equal to its `runtime.verification`
  counterpart.
- `algorithm` is one of ALGORITHMS; `kernels` is "ordered" or "fast"; each level's
  `statement` equals the one regenerated from the certificate's dtype and kernels
  (`statement`, restated from the writer and pinned equal by tests), so a rewritten or
  stronger statement is refused; a result whose kernels the runtime level does not model
  (not "ordered", dtype not exact) must claim nothing at the runtime level (`holds` null);
  unknown levels or level fields are refused.
- Branch and bound ("bab") certificates: the root is validated as alpha-CROWN; then, when
  the level has `branches`, their split paths must be the leaves of one complete binary
  tree (each inner node splits one ReLU or leaky_relu input both ways, >= 0 and <= 0, so the leaves
  cover the box); each leaf's chain is validated with its split neurons' inputs clamped
  to their sign (a leaf whose recomputed intervals cross holds no input and is skipped),
  and a margin is established when it is at most max(root margin, min over the feasible
  leaves of the leaf's validated margin).
- The file is parsed by `parse`: nesting deeper than MAX_DEPTH, integers longer than
  MAX_INT_DIGITS, NaN/Infinity and files over MAX_BYTES are refused before any check, and
  'p/q' strings over MAX_RATIONAL_CHARS are refused where they are read.
A rejected certificate raises `CertificateError` naming the first failed check; so does a
malformed one (wrong types or shapes: every layer tensor is checked against the sizes the
box and the previous layers declare, and any other error while parsing is reported as
"malformed certificate: ...").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from spec.safe_files import read_text

from .bounds_certificate_ia import (
    AFFINE,
    GELU_C,
    GELU_GRID,
    GELU_K,
    IA,
    MAX_RATIONAL_CHARS,
    PIECES,
    PRECISION,
    CertificateError,
    act,
    act_err,
    add_err,
    backward,
    exact,
    ibp_stage,
    jlist,
    lin_err,
    piecewise,
    rat,
    rejecting,
    short,
    stage_inputs,
    windowed,
)
from .bounds_certificate_relax import (
    PL_ATTRS,
    check_relax,
    leaky_slope_ok,
    pl_stage,
    pool_slopes,
    relu_lower_ok,
)

__all__ = [
    "ALGORITHMS",
    "FORMAT",
    "FORMATS",
    "GELU_C",
    "GELU_GRID",
    "GELU_K",
    "KERNELS",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_RATIONAL_CHARS",
    "PIECES",
    "PRECISION",
    "CertificateError",
    "canonical_sha",
    "check_certificate",
    "check_file",
    "decode_bits",
    "mpfr_format",
    "parse",
    "read_certificate",
    "statement",
]

FORMAT = "torchlean_output_bounds_v1"
# (precision, exponent bits) of each IEEE dtype
FORMATS = {"float64": (53, 11), "float32": (24, 8), "bfloat16": (8, 8), "float16": (11, 5)}


MAX_DEPTH = 32
"""JSON nesting deeper than this is refused before parsing (the format needs 6 levels)."""
MAX_BYTES = 64 * 2**20
MAX_INT_DIGITS = 30
"""JSON integers are only small counts and indices (property's label): longer ones are
refused while parsing."""
KERNELS = ("ordered", "fast")
ALGORITHMS = ("ibp", "crown", "alpha-crown", "bab")


def statement(level: str, dtype: str, kernels: str) -> str:
    """The statement a certificate's level must carry, regenerated from its fields
    (restated from `runtime.verification.results.statement`; tests pin them equal)."""
    if level == "real":
        return (
            "level 1: every output of the real-valued network (exact real arithmetic on the "
            "stored parameters) for every real input in the box lies in [lower, upper]; "
            "computed with outward rounding"
        )
    if dtype == "exact":
        return (
            "level 2: the runtime computes exactly in dtype 'exact', so its outputs for every"
            " rational input in the box lie in the level-1 bounds"
        )
    s = (
        f"level 2: Result.predict with kernels='ordered' in {dtype} returns, for every "
        "binary64 input in the box, outputs in [lower, upper] (directed rounding in the "
        f"{dtype} format following the ordered op order)"
    )
    if kernels != "ordered":
        s += (
            f"; this result uses kernels={kernels!r}, whose summation order and libm are not"
            " covered"
        )
    return s


def _depth_ok(text: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH (counted outside strings) before parsing."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise CertificateError(
                    f"JSON nested deeper than {MAX_DEPTH} levels: refused (not a certificate)"
                )
        elif ch in "]}":
            depth -= 1


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise CertificateError(
            f"a JSON integer of {len(text)} digits (at most {MAX_INT_DIGITS}): refused"
        )
    return int(text)


def _constant(name: str) -> Any:
    raise CertificateError(f"JSON constant {name} is not allowed in a certificate")


def parse(text: str, *, bounded_depth: bool = True) -> Any:
    """A certificate's JSON, refusing long integers, NaN/Infinity and files over MAX_BYTES;
    nesting deeper than MAX_DEPTH is refused before parsing, or, with `bounded_depth`
    False (formats that nest deeper), only where the JSON reader itself gives up."""
    if len(text) > MAX_BYTES:
        raise CertificateError(f"certificate of {len(text)} characters (at most {MAX_BYTES})")
    if bounded_depth:
        _depth_ok(text)
    try:
        return json.loads(text, parse_int=_int, parse_constant=_constant)
    except RecursionError:
        raise CertificateError("JSON nested too deeply: refused") from None
    except ValueError as e:
        raise CertificateError(f"cannot parse the certificate as JSON: {e}") from None


def _sha(obj: Any) -> str:
    return hashlib.sha256(
        json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("utf-8")
    ).hexdigest()


canonical_sha = _sha
"""sha256 of the canonical JSON of an object (sorted keys, no spaces): digests and model
hashes of every certificate format."""


def _decode(v: Any, dtype: str, what: str) -> Fraction:
    if dtype == "exact":
        return rat(v, what)
    p, e = FORMATS[dtype]
    if not isinstance(v, str) or not v.startswith("0x"):
        raise CertificateError(f"{what}: expected a hex bit pattern, got {v!r}")
    bits, mb = int(v, 16), p - 1
    bias = 2 ** (e - 1) - 1
    sign, ex, man = bits >> (e + mb), (bits >> mb) & (2**e - 1), bits & (2**mb - 1)
    if bits >> (1 + e + mb) or ex == 2**e - 1:
        raise CertificateError(f"{what}: {v} is not a finite {dtype} bit pattern")
    val = Fraction(man, 2 ** (bias - 1 + mb)) if ex == 0 else Fraction(2**mb + man, 2**mb)
    if ex:
        val *= Fraction(2) ** (ex - bias)
    return -val if sign else val


decode_bits = _decode
"""The exact value of a bit pattern (hex string) of the dtype ("exact": a p/q string)."""


def _pool_stage(ch: _Chain, st: dict[str, Any], w: dict[str, Any], where: str, t: int,
                cur: list[Any]) -> None:  # fmt: skip
    """Validate a max pooling's witness: per output [k, dominates, u] with k in the window,
    u >= every upper end of the window, and (if it dominates) x_k's lower end >= every
    other input's upper end."""
    wins = st["windows"]
    pl = jlist(w.get("pool"), len(wins), f"{where}.pool")
    ch.pool[t], ch.ins[t] = [], [(exact(x[0]), exact(x[1])) for x in cur]
    ins = ch.ins[t]
    for o, (e, win) in enumerate(zip(pl, wins, strict=True)):
        k, dom, u = jlist(e, 3, f"{where}.pool[{o}]")
        u = rat(u, f"{where}.pool[{o}]")
        if type(k) is not int or k not in win or dom not in (0, 1) or type(dom) is not int:
            raise CertificateError(f"{where}.pool[{o}]: expected [input of the window, 0 or 1, u]")
        if u < max(ins[i][1] for i in win) or (
            dom and any(ins[k][0] < ins[i][1] for i in win if i != k)
        ):
            raise CertificateError(f"{where}.pool[{o}]: relaxation {e} is not valid")
        ch.pool[t].append((k, bool(dom), u))


def _network(net: Any, n: int) -> tuple[str, list[dict[str, Any]], int]:
    """The decoded stages and the output width, for an input of width n; every tensor's
    shape is checked against the width of the value the stage reads (each decoded stage
    carries "src", the values it reads, and "widths", theirs)."""
    if not isinstance(net, dict) or set(net) != {"dtype", "stages"}:
        raise CertificateError("network: expected keys dtype, stages")
    dt = net["dtype"]
    if not isinstance(dt, str) or dt not in (*FORMATS, "exact"):
        raise CertificateError(f"network: unknown dtype {dt!r}")
    if not isinstance(net["stages"], list):
        raise CertificateError("network.stages: expected a list")
    out: list[dict[str, Any]] = []
    widths = [n]
    for k, st in enumerate(net["stages"]):
        w = f"network stage {k}"
        if not isinstance(st, dict):
            raise CertificateError(f"{w}: expected an object")
        src = stage_inputs(st, k + 1, widths, w)
        n = widths[src[0]]
        out.append(_stage(st, dt, n, w))
        out[-1].update(src=src, widths=[widths[i] for i in src])
        widths.append(len(out[-1]["bias"]) if out[-1]["op"] in AFFINE else
                      len(out[-1]["windows"]) if out[-1]["op"] == "max_pool2d" else n)  # fmt: skip
    return dt, out, widths[-1]


def _stage(st: dict[str, Any], dt: str, n: int, w: str) -> dict[str, Any]:
    """One decoded stage reading a value of width n."""
    op = st.get("op")

    def vec(name: str, size: int) -> list[Fraction]:
        return [_decode(v, dt, f"{w}.{name}") for v in jlist(st.get(name), size, f"{w}.{name}")]

    if op == "linear":
        rows = jlist(st.get("weight"), None, f"{w}.weight")
        weight = [[_decode(v, dt, f"{w}.weight") for v in jlist(r, n, f"{w}.weight[{i}]")]
                  for i, r in enumerate(rows)]  # fmt: skip
        return {"op": op, "weight": weight, "bias": vec("bias", len(rows))}
    if op == "bn":
        # BatchNorm2d: per channel, repeated over the channel's `spatial` positions
        rep = st.get("spatial", 1)
        if type(rep) is not int or rep < 1 or n % rep:
            raise CertificateError(f"{w}.spatial: expected a divisor of {n}")

        def ch(name: str) -> list[Any]:
            return [v for v in vec(name, n // rep) for _ in range(rep)]

        return {"op": op, "weight": ch("weight"), "bias": ch("bias"),
                "mean": ch("running_mean"), "var": ch("running_var"),
                "eps": rat(st.get("eps"), f"{w}.eps")}  # fmt: skip
    if op == "ln":
        return {"op": op, "weight": vec("weight", n), "bias": vec("bias", n),
                "eps": rat(st.get("eps"), f"{w}.eps")}  # fmt: skip
    if op in ("relu", "tanh", "sigmoid", "gelu", "add"):
        return {"op": op}
    if op in PL_ATTRS:
        return pl_stage(op, st, w)
    if op in ("conv2d", "avg_pool2d"):
        return windowed(st, dt, n, w, _decode)
    if op == "max_pool2d":  # the windows of the same-shaped average pooling
        avg = windowed({**st, "op": "avg_pool2d"}, dt, n, w, _decode)["window"]
        return {"op": op, "windows": [[i for i, _ in avg.row(j)]
                                      for j in range(len(avg.kernel) * avg.positions)]}  # fmt: skip
    raise CertificateError(f"{w}: unknown op {op!r}")


def mpfr_format(dt: str) -> tuple[int, int, int]:
    """(precision, emin, emax) of an IEEE dtype in MPFR's convention (subnormals included)."""
    p, e = FORMATS[dt]
    bias = 2 ** (e - 1) - 1
    return p, 2 - bias - (p - 1), 2 ** (e - 1)


class _Chain:
    """One validated CROWN chain of a level: relaxations, error terms, the (validated)
    stored interval after every stage, each relaxed stage's input intervals, and the last
    stage's enclosure."""

    def __init__(self) -> None:
        self.relax: dict[int, list[list[Fraction]]] = {}
        self.qrelax: dict[int, list[list[Any]]] = {}  # the same as gmpy2 rationals
        self.errs: dict[int, list[Fraction]] = {}
        self.outs: dict[int, list[tuple[Fraction, Fraction]]] = {}
        self.ins: dict[int, list[tuple[Fraction, Fraction]]] = {}
        # tanh / sigmoid stages: per neuron (level-2 error, this checker's own interval)
        self.act: dict[int, list[tuple[Fraction, tuple[Fraction, Fraction]]]] = {}
        self.pool: dict[int, list[tuple[int, bool, Fraction]]] = {}  # max_pool2d: k, dom, u
        self.cur: list[Any] = []
        self.empty = False
        self.fmt: Any = None  # the level's format (None at level 1)


def _slopes(obj: Any, ch: _Chain, stages: list[dict[str, Any]], t: int, rows: int,
            where: str) -> dict[int, list[list[Any]]]:  # fmt: skip
    """alpha-CROWN's per-row relaxations for a backward pass from stage t: for a ReLU stage
    a lower slope per neuron, checked to give a valid lower line (with the stage's own
    intercept) on its neuron's interval; for a tanh / sigmoid stage a relaxation [aL, cL,
    aU, cU] per neuron, checked like the witness's own relaxations."""
    if not isinstance(obj, dict):
        raise CertificateError(f"{where}: expected an object (stage -> rows of slopes)")
    out: dict[int, list[list[Any]]] = {}
    for key, val in obj.items():
        s = int(key) if isinstance(key, str) and key.isdigit() and len(key) < 6 else 0
        op = stages[s - 1]["op"] if 1 <= s < t else None
        if op == "max_pool2d" and s in ch.pool:
            out[s] = pool_slopes(val, stages[s - 1]["windows"], rows, f"{where}[{key}]")
            continue
        if op not in ("relu", "leaky_relu", "tanh", "sigmoid", "gelu") or s not in ch.relax:
            raise CertificateError(
                f"{where}: {key!r} is not a ReLU, tanh or sigmoid stage below stage {t}"
            )
        n, w = len(ch.relax[s]), f"{where}[{key}]"
        got = [[_entry(op, v, ch, s, j, f"{w}[{i}][{j}]", stages[s - 1])
                for j, v in enumerate(jlist(r, n, f"{w}[{i}]"))]
               for i, r in enumerate(jlist(val, rows, w))]  # fmt: skip
        out[s] = got
    return out


def _entry(op: str, v: Any, ch: _Chain, s: int, j: int, where: str,
           st: dict[str, Any]) -> Any:  # fmt: skip
    """One neuron's per-row entry, validated on the neuron's interval."""
    lo, hi = ch.ins[s][j]
    if op == "leaky_relu":  # a lower slope with the stage's own intercept
        return leaky_slope_ok(ch.fmt, st, rat(v, where), ch.relax[s][j][1], lo, hi, where)
    if op != "relu":
        rq = [rat(x, where) for x in jlist(v, 4, where)]
        err, const = ch.act[s][j]
        pw = lambda a: piecewise(IA(ch.fmt), st, j, lo, hi, a)  # noqa: E731
        check_relax(op, rq, lo, hi, err, const, where, pw)
        return rq
    a = rat(v, where)
    if not relu_lower_ok(a, ch.relax[s][j][1], lo, hi):
        raise CertificateError(
            f"{where}: slope {a} gives no lower line of ReLU on [{lo}, {hi}] (not valid)"
        )
    return a


def _chain(ia: IA, fmt: Any, stages: list[dict[str, Any]], start: list[Any],
           box: list[tuple[Fraction, Fraction]], wit: Any, where0: str,
           prior: _Chain | None, slopes: bool = False,
           splits: dict[int, dict[int, int]] | None = None) -> _Chain:  # fmt: skip
    """Validate one chain stage by stage (the CROWN witness; with `prior` the alpha-CROWN
    one, whose linear stages also intersect with `prior`'s validated intervals; with
    `slopes` per-row slopes are allowed; with `splits` a branch, whose split neurons' inputs
    are clamped to their sign): by induction every stored interval is sound. A branch whose
    recomputed intervals cross contains no input: the chain stops there (`empty`)."""
    partial = bool(splits) and isinstance(wit, list) and 0 < len(wit) < len(stages)
    if not isinstance(wit, list) or not (len(wit) == len(stages) or partial):
        raise CertificateError(f"{where0}: expected one entry per stage")
    ch, vals = _Chain(), [start]
    ch.fmt = fmt
    clamp = _clamps(stages, splits or {})
    for t, st in enumerate(stages, 1):
        if t > len(wit):
            raise CertificateError(f"{where0}: the branch is not infeasible by stage {t - 1}")
        cur = [x for i in st["src"] for x in vals[i]]
        nxt = ibp_stage(ia, st, cur)
        w, where = wit[t - 1], f"{where0}[{t - 1}]"
        if not isinstance(w, dict):
            raise CertificateError(f"{where}: expected an object")
        if w.get("op") != st["op"] or len(jlist(w.get("out"), None, f"{where}.out")) != len(nxt):
            raise CertificateError(f"{where}: does not match the network")
        tight = (*AFFINE, "add")  # the stages whose intervals the backward pass tightens
        if "alpha" in w and (not (slopes or prior) or st["op"] not in tight or t == len(stages)):
            raise CertificateError(f"{where}.alpha: slopes are not expected here")
        if st["op"] in tight:
            ch.errs[t] = lin_err(fmt, st, cur) if st["op"] != "add" else add_err(fmt, cur)
            # a conv2d / avg_pool2d on the box: the backward pass gives exactly its
            # interval (both are the exact sum over the window, widened by the same error)
            on_box = "window" in st and st["src"] == [0] and "alpha" not in w
            if t < len(stages):
                if not on_box:
                    nxt = _linear_stage(ch, stages, box, nxt, w, where, t, ia)
                if prior is not None:
                    nxt = [(max(o[0], ia.box(p[0])[0]), min(o[1], ia.box(p[1])[1]))
                           for o, p in zip(nxt, prior.outs[t], strict=True)]  # fmt: skip
        elif st["op"] == "max_pool2d":
            _pool_stage(ch, st, w, where, t, cur)
        elif st["op"] != "ln":
            _relaxed_stage(ch, ia, fmt, st, w, where, t, cur)
        sp, z = clamp.get(t, {}), ia.box(Fraction(0))[0]
        nxt = [o if j not in sp else ((max(o[0], z), o[1]) if sp[j] > 0 else (o[0], min(o[1], z)))
               for j, o in enumerate(nxt)]  # fmt: skip
        if any(o[0] > o[1] for o in nxt):
            ch.empty = True
            return ch
        stored = [(rat(a, where), rat(b, where)) for a, b in
                  (jlist(p, 2, f"{where}.out") for p in w["out"])]  # fmt: skip
        for j, ((sa, sb), o) in enumerate(zip(stored, nxt, strict=True)):
            if sa > exact(o[0]) or sb < exact(o[1]):
                raise CertificateError(f"{where}.out[{j}]: [{sa}, {sb}] is not sound")
        ch.outs[t] = stored
        vals.append([ia.box(a)[:1] + ia.box(b)[1:] for a, b in stored])
    ch.cur = vals[-1]
    return ch


def _clamps(stages: list[dict[str, Any]], splits: dict[int, dict[int, int]]) -> dict[int, Any]:
    """Per value: the split neurons' signs of the ReLU stages that read it."""
    out: dict[int, dict[int, int]] = {}
    for s, sp in splits.items():
        out.setdefault(stages[s - 1]["src"][0], {}).update(sp)
    return out


def _covers(paths: list[list[tuple[int, int, int]]], depth: int = 0) -> bool:
    """Whether the split paths are the leaves of one complete binary tree: every inner node
    splits one neuron both ways (+1: input >= 0, -1: <= 0), so the leaves cover the box."""
    if len(paths) == 1 and len(paths[0]) == depth:
        return True
    if any(len(p) <= depth for p in paths) or len({p[depth][:2] for p in paths}) != 1:
        return False
    pos = [p for p in paths if p[depth][2] == 1]
    neg = [p for p in paths if p[depth][2] == -1]
    return bool(pos) and bool(neg) and _covers(pos, depth + 1) and _covers(neg, depth + 1)


def _branches(ia: IA, fmt: Any, stages: list[dict[str, Any]], start: list[Any],
              box: list[Any], top: int, leaves: Any, where: str) -> list[Any]:  # fmt: skip
    """Branch and bound: per output j, the minimum over the feasible leaves of a complete
    split tree of the leaf's validated margin (None if no leaf is feasible)."""
    paths = []
    for i, leaf in enumerate(jlist(leaves, None, where)):
        sp = leaf.get("splits") if isinstance(leaf, dict) else None
        if not isinstance(sp, list) or not all(
            isinstance(x, list) and len(x) == 3 and all(type(v) is int for v in x)
            and 1 <= x[0] <= len(stages) and stages[x[0] - 1]["op"] in ("relu", "leaky_relu")
            and x[2] in (1, -1) for x in sp
        ):  # fmt: skip
            raise CertificateError(f"{where}[{i}].splits: expected [[relu stage, neuron, +-1]]")
        paths.append([tuple(x) for x in sp])
    if not _covers(paths):
        raise CertificateError(f"{where}: the split paths do not form a complete tree")
    best: list[Any] = []
    for i, (leaf, path) in enumerate(zip(leaves, paths, strict=True)):
        splits: dict[int, dict[int, int]] = {}
        for s, j, sign in path:
            splits.setdefault(s, {})[j] = sign
        w = f"{where}[{i}]"
        ch = _chain(ia, fmt, stages, start, box, leaf.get("witness"), f"{w}.witness", None,
                    True, splits)  # fmt: skip
        if leaf.get("infeasible") and not ch.empty:
            raise CertificateError(f"{w}: claimed infeasible, but it is not")
        if ch.empty:
            continue
        fs = leaf.get("alpha", {})
        if not isinstance(fs, dict) or not set(fs) <= {"margins"}:
            raise CertificateError(f"{w}.alpha: expected only margins")
        _, _, ms = _final([(ch, fs)], stages, box, len(ch.cur), top, f"{w}.alpha")
        best = ms if not best else [None if a is None else min(a, b)
                                    for a, b in zip(best, ms, strict=True)]  # fmt: skip
    return best


def _linear_stage(ch: _Chain, stages: list[dict[str, Any]], box: list[Any], nxt: list[Any],
                  w: dict[str, Any], where: str, t: int, ia: IA) -> list[Any]:  # fmt: skip
    """A linear stage's intervals intersected with the backward pass's bounds (with the
    stage's validated per-row slopes, if any)."""
    n = len(nxt)
    eye = [[Fraction(int(i == j)) for j in range(n)] for i in range(n)]
    al = w.get("alpha", {})
    if not isinstance(al, dict) or not set(al) <= {"lower", "upper"}:
        raise CertificateError(f"{where}.alpha: expected keys among lower, upper")
    sl = {k: _slopes(v, ch, stages, t, n, f"{where}.alpha.{k}") for k, v in al.items()}
    lw = backward(stages, ch, box, eye, t, sl.get("lower"))
    up = backward(stages, ch, box, [[-v for v in r] for r in eye], t, sl.get("upper"))
    return [(max(o[0], ia.box(a)[0]), min(o[1], ia.box(-b)[1]))
            for o, a, b in zip(nxt, lw, up, strict=True)]  # fmt: skip


def _relaxed_stage(ch: _Chain, ia: IA, fmt: Any, st: dict[str, Any], w: dict[str, Any],
                   where: str, t: int, cur: list[Any]) -> None:  # fmt: skip
    """Validate every relaxation of an elementwise stage on its input interval."""
    rl = w.get("relax")
    if not isinstance(rl, list) or len(rl) != len(cur):
        raise CertificateError(f"{where}: expected one relaxation per neuron")
    ch.relax[t], ch.ins[t], ch.act[t] = [], [], []
    for j, (r, x) in enumerate(zip(rl, cur, strict=True)):
        rq = [rat(v, f"{where}.relax[{j}]") for v in jlist(r, 4, f"{where}.relax[{j}]")]
        xl, xh = exact(x[0]), exact(x[1])
        const = act(ia, st["op"], st, j, x)
        pw = lambda a, st=st, j=j, xl=xl, xh=xh: piecewise(ia, st, j, xl, xh, a)  # noqa: E731
        err, ce = act_err(fmt, st["op"], xl, xh), (exact(const[0]), exact(const[1]))
        check_relax(st["op"], rq, xl, xh, err, ce, f"{where}.relax[{j}]", pw, fmt, st)
        ch.act[t].append((err, ce))
        ch.relax[t].append(rq)
        ch.ins[t].append((xl, xh))


def _final(chains: list[tuple[_Chain, Any]], stages: list[dict[str, Any]], box: list[Any],
           m: int, top: int | None, where: str) -> tuple[Any, Any, Any]:  # fmt: skip
    """The output enclosure and margins: every chain's last interval and its backward pass
    (with its validated final slopes, an object of lower/upper/margins), intersected."""
    out_lo = [max(exact(ch.cur[j][0]) for ch, _ in chains) for j in range(m)]
    out_hi = [min(exact(ch.cur[j][1]) for ch, _ in chains) for j in range(m)]
    margins = [None if top is None or j == top else out_lo[top] - out_hi[j] for j in range(m)]
    T = len(stages)
    eye = [[Fraction(int(i == j)) for j in range(m)] for i in range(m)]
    rows = [[Fraction(int(i == top) - int(i == j)) for i in range(m)]
            for j in range(m) if j != top]  # fmt: skip
    counts = {"lower": m, "upper": m, "margins": len(rows)}
    for ch, fs in chains:
        if not isinstance(fs, dict):
            raise CertificateError(f"{where}: expected an object")
        if not set(fs) <= set(counts) or (top is None and "margins" in fs):
            raise CertificateError(f"{where}: unexpected keys {sorted(fs)}")
        sl = {key: _slopes(v, ch, stages, T + 1, counts[key], f"{where}.{key}")
              for key, v in fs.items()}  # fmt: skip
        lw = backward(stages, ch, box, eye, T, sl.get("lower"))
        up = backward(stages, ch, box, [[-v for v in r] for r in eye], T, sl.get("upper"))
        out_lo = [max(a, b) for a, b in zip(out_lo, lw, strict=True)]
        out_hi = [min(a, -b) for a, b in zip(out_hi, up, strict=True)]
        if top is not None:
            it = iter(backward(stages, ch, box, rows, T, sl.get("margins")))
            margins = [None if j == top else max(margins[j], next(it)) for j in range(m)]
    return out_lo, out_hi, margins


def _check_level(cert: dict[str, Any], stages: list[dict[str, Any]], dt: str, level: str,
                 lo: list[Fraction], hi: list[Fraction], top: int | None) -> None:  # fmt: skip
    claim = cert["levels"].get(level)
    if not isinstance(claim, dict):
        raise CertificateError(f"levels.{level}: missing")
    fmt = mpfr_format(dt) if level == "runtime" and dt != "exact" else None
    ia = IA(fmt)
    cur = [(ia.box(a)[0], ia.box(b)[1]) for a, b in zip(lo, hi, strict=True)]
    box = [(exact(a), exact(b)) for a, b in cur]
    alg = cert["algorithm"]
    if alg == "ibp":
        vals = [cur]
        for st in stages:
            vals.append(ibp_stage(ia, st, [x for i in st["src"] for x in vals[i]]))
        cur = vals[-1]
        m = len(cur)
        out_lo, out_hi = [exact(x[0]) for x in cur], [exact(x[1]) for x in cur]
        margins = [None if top is None or j == top else out_lo[top] - out_hi[j]
                   for j in range(m)]  # fmt: skip
    else:
        where = f"levels.{level}"
        crown = _chain(ia, fmt, stages, cur, box, claim.get("witness"), f"{where}.witness", None)
        chains = [(crown, {})]
        if alg in ("alpha-crown", "bab"):
            alpha = _chain(ia, fmt, stages, cur, box, claim.get("alpha_witness"),
                           f"{where}.alpha_witness", crown)  # fmt: skip
            chains.append((alpha, claim.get("alpha", {})))
        m = len(crown.cur)
        out_lo, out_hi, margins = _final(chains, stages, box, m, top, f"{where}.alpha")
        if alg == "bab" and "branches" in claim and top is not None:
            leaf = _branches(ia, fmt, stages, cur, box, top, claim["branches"],
                             f"{where}.branches")  # fmt: skip
            if leaf:
                margins = [None if a is None else max(a, b)
                           for a, b in zip(margins, leaf, strict=True)]  # fmt: skip
    _check_claimed(cert, claim, dt, level, m, top, (out_lo, out_hi, margins))


def _check_claimed(cert: dict[str, Any], claim: dict[str, Any], dt: str, level: str, m: int,
                   top: int | None, got: tuple[Any, Any, Any]) -> None:  # fmt: skip
    """The certified bounds (and margins, holds) contain the recomputed enclosure."""
    out_lo, out_hi, margins = got
    c_lo = [rat(v, f"levels.{level}.lower") for v in claim.get("lower", [])]
    c_hi = [rat(v, f"levels.{level}.upper") for v in claim.get("upper", [])]
    if len(c_lo) != m or len(c_hi) != m:
        raise CertificateError(f"levels.{level}: expected {m} lower and upper bounds")
    for j in range(m):
        if c_lo[j] > out_lo[j] or c_hi[j] < out_hi[j]:
            raise CertificateError(
                f"levels.{level}: output {j}: certified [{c_lo[j]}, {c_hi[j]}] does not contain"
                f" the recomputed enclosure [{out_lo[j]}, {out_hi[j]}]"
            )
    if top is not None:
        cm = claim.get("margins")
        if not isinstance(cm, list) or len(cm) != m:
            raise CertificateError(f"levels.{level}.margins: expected {m} entries")
        for j in range(m):
            if j == top:
                continue
            mj = margins[j]
            assert mj is not None
            if rat(cm[j], f"levels.{level}.margins") > mj:
                raise CertificateError(f"levels.{level}.margins[{j}]: not established")
        holds = all(rat(cm[j], "margin") > 0 for j in range(m) if j != top)
        uncovered = level == "runtime" and cert["kernels"] != "ordered" and dt != "exact"
        if uncovered and claim.get("holds") is None:
            return  # no claim about what kernels the runtime level does not model make
        if claim.get("holds") is not holds:
            raise CertificateError(f"levels.{level}.holds: expected {holds}")


def _check_claims(cert: dict[str, Any], dt: str, kernels: str) -> None:
    """Every level's statement is the one its fields give, and a result whose kernels the
    runtime level does not model (kernels other than "ordered", dtype not exact) claims
    nothing about what it computes: its runtime `holds` is null."""
    expected_keys = {"statement", "lower", "upper", "margins", "holds", "witness"}
    if cert["algorithm"] in ("alpha-crown", "bab"):
        expected_keys |= {"alpha_witness", "alpha"}
    if cert["algorithm"] == "bab":
        expected_keys |= {"branches"}
    for level in ("real", "runtime"):
        claim = cert["levels"].get(level)
        if not isinstance(claim, dict):
            raise CertificateError(f"levels.{level}: missing")
        extra = sorted(set(claim) - expected_keys)
        if extra:
            raise CertificateError(f"levels.{level}: unknown fields {extra}")
        want = statement(level, dt, kernels)
        if claim.get("statement") != want:
            raise CertificateError(
                f"levels.{level}.statement: does not match what the certificate proves "
                f"(dtype {dt!r}, kernels {kernels!r}); expected {want!r}"
            )
    extra_levels = sorted(set(cert["levels"]) - {"real", "runtime"})
    if extra_levels:
        raise CertificateError(f"levels: unknown levels {extra_levels}")
    covered = kernels == "ordered" or dt == "exact"
    rt = cert["levels"]["runtime"]
    if not covered and "holds" in rt and rt["holds"] is not None:
        raise CertificateError(
            f"levels.runtime.holds: kernels {kernels!r} are not modelled by the runtime level; "
            "a certificate of such a result may not claim it (expected null)"
        )


def check_certificate(cert: Any) -> str:
    """Re-validate a certificate (a parsed JSON object); a one-line summary if it holds.
    Raises `CertificateError` for a certificate that is malformed or does not hold."""
    return rejecting(_check, cert)


def _check(cert: Any) -> str:
    if not isinstance(cert, dict) or cert.get("format") != FORMAT:
        raise CertificateError(f"not a {FORMAT} certificate")
    body = {k: v for k, v in cert.items() if k != "digest"}
    if cert.get("digest") != _sha(body):
        raise CertificateError("digest: the certificate was modified after it was written")
    if cert.get("model_hash") != _sha(cert.get("network")):
        raise CertificateError("model_hash: does not match the embedded network")
    b = cert.get("box")
    if not isinstance(b, dict):
        raise CertificateError("box: expected an object")
    if b.get("norm") != "inf":
        raise CertificateError(f"box.norm: expected 'inf', got {b.get('norm')!r}")
    c = [rat(v, "box.center") for v in jlist(b.get("center"), None, "box.center")]
    r = [rat(v, "box.radius") for v in jlist(b.get("radius"), None, "box.radius")]
    lo = [rat(v, "box.lower") for v in jlist(b.get("lower"), None, "box.lower")]
    hi = [rat(v, "box.upper") for v in jlist(b.get("upper"), None, "box.upper")]
    if not (len(c) == len(r) == len(lo) == len(hi)):
        raise CertificateError("box: center, radius, lower, upper must have equal lengths")
    if any(x < 0 for x in r):
        raise CertificateError(f"box.radius: must be >= 0, got {[str(x) for x in r]}")
    if lo != [a - d for a, d in zip(c, r, strict=True)] or hi != [
        a + d for a, d in zip(c, r, strict=True)
    ]:
        raise CertificateError("box: lower/upper are not center -+ radius")
    dt, stages, m = _network(cert["network"], len(lo))
    kernels = cert.get("kernels")
    if kernels not in KERNELS:
        raise CertificateError(f"kernels: expected one of {KERNELS}, got {short(kernels)}")
    if cert.get("algorithm") not in ALGORITHMS:
        raise CertificateError(f"algorithm: unknown {cert.get('algorithm')!r}")
    if not isinstance(cert.get("levels"), dict):
        raise CertificateError("levels: expected an object")
    prop = cert.get("property")
    top = None
    if prop != "bounds":
        if not (isinstance(prop, list) and len(prop) == 2 and prop[0] == "top_label"):
            raise CertificateError(f"property: unknown {prop!r}")
        k = prop[1]
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < m:
            raise CertificateError(
                f"property: top_label expects an integer 0 <= k < {m} (the outputs), got {k!r}"
            )
        top = k
    _check_claims(cert, dt, kernels)
    for level in ("real", "runtime"):
        _check_level(cert, stages, dt, level, lo, hi, top)
    return (
        f"certificate holds: {cert['algorithm']} bounds on {len(lo)} inputs, dtype {dt}, "
        f"levels real and runtime, model {cert['model_hash'][:12]}"
    )


def read_certificate(path: str, parse_text: Callable[[str], Any] = parse) -> Any:
    """A certificate file parsed by `parse_text`: a regular file (never a FIFO or device) of
    at most MAX_BYTES of UTF-8 (`spec.safe_files.read_text`); errors name the path."""
    text = read_text(path, MAX_BYTES, error=CertificateError)
    try:
        return parse_text(text)
    except CertificateError as e:
        raise CertificateError(f"{path}: {e}") from None


def check_file(path: str) -> str:
    """`check_certificate` of a file (`read_certificate`)."""
    return check_certificate(read_certificate(path))
