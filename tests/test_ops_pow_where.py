"""prelu, where, pow and pow_tensor: hand-worked goldens of the spec rules, exact
rationals, shape errors, the `ordered` kernels against the spec on every sample in every
IEEE dtype, `cr_pow` against MPFR, and (where installed) PyTorch, the ONNX export run by
ONNX Runtime, and the ONNX / torch.export importers.

Oracles: values worked by hand (binary fractions), `fractions.Fraction` arithmetic, MPFR's
pow through gmpy2 directly (not through spec), PyTorch's own results.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.backends import DTYPE_DOMAIN, NUMPY, from_spec, to_spec
from runtime.engine.context import KernelContext, fp_quiet
from runtime.engine.crmath import cr_pow
from runtime.kernels import KERNELS
from spec.domains import FLOAT64, RATIONAL, IEEEDomain
from spec.errors import DomainError, GraphError, ShapeError
from spec.graph import GraphBuilder
from spec.ops import OPS
from spec.tensor import Tensor

IEEE = ("float64", "float32", "bfloat16", "float16")
NEW = ("prelu", "where", "pow", "pow_tensor")
NAN, INF = float("nan"), float("inf")


def _t(D: Any, shape: tuple[int, ...], *vals: Any) -> Tensor:
    return Tensor(shape, tuple(D.from_float(float(v)) for v in vals))


def _f(t: Tensor) -> list[float]:
    return [float(v) for v in t.data]


def _fwd(op: str, xs: list[Tensor], **attrs: Any) -> Tensor:
    return OPS[op].forward(FLOAT64, xs, attrs, ())


def _vjp(op: str, xs: list[Tensor], g: Tensor, **attrs: Any) -> list[Tensor]:
    return OPS[op].vjp(FLOAT64, xs, g, attrs, ())


def _same_floats(got: list[float], want: list[float]) -> bool:
    return all(
        (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
        for a, b in zip(got, want, strict=True)
    ) and len(got) == len(want)


# --------------------------------------------------------------------------- goldens


def test_pow_goldens() -> None:
    D = FLOAT64
    x = _t(D, (6,), -2, 0, -0.0, 4, -8, NAN)
    assert _same_floats(_f(_fwd("pow", [x], exponent=3)), [-8, 0, -0.0, 64, -512, NAN])
    assert _same_floats(_f(_fwd("pow", [x], exponent=0)), [1, 1, 1, 1, 1, 1])
    assert _same_floats(_f(_fwd("pow", [x], exponent=-1)), [-0.5, INF, -INF, 0.25, -0.125, NAN])
    assert _same_floats(
        _f(_fwd("pow", [x], exponent=Fraction(1, 2))), [NAN, 0, 0, 2, NAN, NAN]
    )  # pow(-0, 1/2) = +0 (C99; sqrt would give -0)
    g = _t(D, (6,), 1, 1, 1, 1, 1, 1)
    # d/dx x**3 = 3x**2; exponent 0: 0 everywhere (x = 0 and NaN included)
    assert _f(_vjp("pow", [x], g, exponent=3)[0])[:5] == [12, 0, 0, 48, 192]
    assert _same_floats(_f(_vjp("pow", [x], g, exponent=0)[0]), [0.0] * 6)
    # exponent 1/2 at 4: (1/2)·4**(-1/2) = 1/4; at +0: (1/2)·inf
    assert _f(_vjp("pow", [x], g, exponent=Fraction(1, 2))[0])[1:4] == [INF, INF, 0.25]


def test_pow_tensor_goldens() -> None:
    D = FLOAT64
    a = _t(D, (5,), 2, 0, 0, -0.0, 1)
    b = _t(D, (5,), 3, 0, 2, -1, NAN)
    assert _same_floats(_f(_fwd("pow_tensor", [a, b])), [8, 1, 0, -INF, 1])
    ga, gb = _vjp("pow_tensor", [a, b], _t(D, (5,), 1, 1, 1, 1, 1))
    # to a: b·a**(b-1): 12, 0 (b = 0), 0, -1·(-0)**-2 = -inf, NaN (b NaN)
    assert _same_floats(_f(ga), [12, 0, 0, -INF, NAN])
    # to b: a**b·log a = 8·ln 2; 0 at a = 0 with b >= 0; (-inf)·log(-0) = +inf; log 1 = 0
    assert _same_floats(_f(gb), [8 * math.log(2), 0, 0, INF, 0])
    # broadcast exponent: the cotangent of b is the left fold over the broadcast rows
    a2, b2 = _t(D, (2, 1), 2, 4), _t(D, (1,), 2)
    ga2, gb2 = _vjp("pow_tensor", [a2, b2], _t(D, (2, 1), 1, 1))
    assert _f(ga2) == [4, 8] and _f(gb2) == [4 * math.log(2) + 16 * math.log(4)]


def test_prelu_goldens() -> None:
    D = FLOAT64
    x = _t(D, (2, 2, 2), 1, -2, 0, -0.0, -4, 3, NAN, -1)
    w = _t(D, (2,), 0.5, -0.25)
    # channel axis 1: (n0, c0) = 1, -2; (n0, c1) = 0, -0; (n1, c0) = -4, 3; (n1, c1) = NaN, -1
    assert _same_floats(_f(_fwd("prelu", [x, w])), [1, -1, -0.0, 0.0, -2, 3, NAN, 0.25])
    gx, gw = _vjp("prelu", [x, w], _t(D, (2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8))
    # x > 0 passes g; otherwise w·g (x = 0 and NaN included: the weight branch)
    assert _f(gx) == [1, 1, -0.75, -1, 2.5, 6, -1.75, -2]
    # per channel, the fold of (x > 0 ? 0 : x·g): channel 0 = 0 + (-2·2) + (-4·5) + 0;
    # channel 1 holds x = NaN
    assert _same_floats(_f(gw), [-24.0, NAN])
    x2 = _t(D, (2, 2), 1, -2, 0, -4)
    shared = _vjp("prelu", [x2, _t(D, (1,), 2)], _t(D, (2, 2), 1, 2, 3, 4))
    assert _f(shared[0]) == [1, 4, 6, 8] and _f(shared[1]) == [-4 + 0 - 16]


def test_prelu_rank_one_shares_one_weight() -> None:
    D = FLOAT64
    y = _fwd("prelu", [_t(D, (3,), -1, 2, -3), _t(D, (1,), 0.5)])
    assert _f(y) == [-0.5, 2, -1.5]
    with pytest.raises(ShapeError, match=r"prelu.*channel"):
        _fwd("prelu", [_t(D, (3,), -1, 2, -3), _t(D, (3,), 1, 1, 1)])


def test_where_goldens() -> None:
    D = FLOAT64
    a, b = _t(D, (3,), 1, NAN, 3), _t(D, (), INF)
    attrs = {"mask": (1, 0, 1, 1, 1, 0), "mask_shape": (2, 3)}
    y = _fwd("where", [a, b], **attrs)
    assert y.shape == (2, 3) and _same_floats(_f(y), [1, INF, 3, 1, NAN, INF])
    ga, gb = _vjp("where", [a, b], _t(D, (2, 3), 1, 2, 3, 4, 5, 6), **attrs)
    assert _f(ga) == [5, 5, 3] and _f(gb) == [8]


def test_shape_and_attribute_errors_name_the_op() -> None:
    b = GraphBuilder()
    x, w = b.input((2, 3)), b.input((2,))
    with pytest.raises(ShapeError, match=r"prelu.*input 1"):
        b.node("prelu", x, w)
    with pytest.raises(GraphError, match=r"where.*0 or 1"):
        b.node("where", x, x, mask=(2,), mask_shape=(1,))
    with pytest.raises(ShapeError, match="where"):
        b.node("where", x, x, mask=(1, 0), mask_shape=(2,))


def test_rational_pow_is_exact() -> None:
    Q = Fraction
    assert RATIONAL.pow(Q(-2, 3), Q(3)) == Q(-8, 27)
    assert RATIONAL.pow(Q(0), Q(0)) == 1
    assert RATIONAL.pow(Q(4, 9), Q(3, 2)) == Q(8, 27)
    assert RATIONAL.pow(Q(2), Q(-2)) == Q(1, 4)
    with pytest.raises(DomainError, match="divides by zero"):
        RATIONAL.pow(Q(0), Q(-1))
    with pytest.raises(DomainError, match="not exact"):
        RATIONAL.pow(Q(2), Q(1, 2))


# --------------------------------------------------------------------------- kernels


def _arg(D: Any, shape: tuple[int, ...], vals: Any) -> Tensor:
    return Tensor(
        shape,
        tuple(D.from_float(v) if isinstance(v, float) else D.from_rational(v) for v in vals),
    )


@pytest.mark.parametrize("dtype", IEEE)
@pytest.mark.parametrize("op", NEW)
def test_ordered_kernels_equal_the_spec_on_every_sample(op: str, dtype: str) -> None:
    """Forward, VJP (cotangent 1, -1/2, 3, ...) and JVP bit for bit, specials included."""
    D = DTYPE_DOMAIN[dtype]
    d, k = OPS[op], KERNELS[op]
    ctx = KernelContext(dtype, "ordered", NUMPY)
    for smp in d.samples:
        xs = [_arg(D, s, v) for s, v in smp.args]
        a = dict(smp.attrs)
        y = d.forward(D, xs, a, ())
        pattern = (1, Fraction(-1, 2), 3, Fraction(1, 4))
        g = Tensor(y.shape, tuple(D.from_rational(pattern[i % 4]) for i in range(len(y.data))))
        with fp_quiet():
            ky, saved = k.forward(ctx, [from_spec(x, dtype) for x in xs], a, ())
            kg = k.vjp(ctx, saved, from_spec(g, dtype), a, ())
            kt = k.jvp(ctx, saved, [from_spec(x, dtype) for x in xs], a, ())
        assert to_spec(np.asarray(ky), dtype).same(D, y), (op, dtype, smp.note)
        for got, want in zip(kg, d.vjp(D, xs, g, a, ()), strict=True):
            assert to_spec(np.asarray(got), dtype).same(D, want), (op, dtype, smp.note, "vjp")
        want_t = d.jvp(D, xs, xs, a, ())
        assert to_spec(np.asarray(kt), dtype).same(D, want_t), (op, dtype, smp.note, "jvp")


_SPECIAL = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -2.0, 3.0, INF, -INF, NAN])


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from(["float64", "float32", "float16"]),
    a=st.lists(st.floats(-1e4, 1e4, allow_nan=False) | _SPECIAL, min_size=4, max_size=4),
    b=st.lists(st.floats(-40, 40, allow_nan=False) | _SPECIAL, min_size=4, max_size=4),
)
def test_cr_pow_is_mpfr_rounded_once(dtype: str, a: list[float], b: list[float]) -> None:
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    np_dt = {"float64": np.float64, "float32": np.float32, "float16": np.float16}[dtype]
    A, B = np.asarray(a, dtype=np_dt), np.asarray(b, dtype=np_dt)
    got = np.asarray(cr_pow(A, B, dtype))
    ctx = gmpy2.context(D.ctx)
    for i in range(4):
        want = ctx.pow(gmpy2.mpfr(float(A[i]), 53), gmpy2.mpfr(float(B[i]), 53))
        w = np.asarray(float(want), dtype=np_dt)
        same = (np.isnan(w) and np.isnan(got[i])) or (
            w.tobytes() == np.asarray(got[i], dtype=np_dt).tobytes()
        )
        assert same, (dtype, float(A[i]), float(B[i]), float(got[i]), float(want))


# --------------------------------------------------------------------------- PyTorch


def _torch() -> Any:
    return pytest.importorskip("torch", reason="pip install torch")


def test_pytorch_agrees_on_values_and_gradients() -> None:
    torch = _torch()
    D = FLOAT64
    xv = [1.5, -2.0, 0.0, -0.5, 3.0, -1.25]
    wv = [0.25, -0.5, 2.0]
    x = torch.tensor(xv, dtype=torch.float64).reshape(2, 3).requires_grad_(True)
    w = torch.tensor(wv, dtype=torch.float64).requires_grad_(True)
    y = torch.nn.functional.prelu(x, w)
    g = torch.arange(1.0, 7.0, dtype=torch.float64).reshape(2, 3)
    gx, gw = torch.autograd.grad(y, (x, w), g)
    sx, sw = _t(D, (2, 3), *xv), _t(D, (3,), *wv)
    assert _f(_fwd("prelu", [sx, sw])) == y.detach().reshape(-1).tolist()
    sgx, sgw = _vjp("prelu", [sx, sw], _t(D, (2, 3), *g.reshape(-1).tolist()))
    assert _f(sgx) == gx.reshape(-1).tolist() and _f(sgw) == gw.tolist()
    # pow_tensor on positive bases and PyTorch's convention at 0**b (b >= 0)
    av, bv = [0.5, 2.0, 0.0, 0.0, 3.0], [1.5, -1.0, 0.0, 2.0, 2.0]
    a = torch.tensor(av, dtype=torch.float64).requires_grad_(True)
    b = torch.tensor(bv, dtype=torch.float64).requires_grad_(True)
    y = torch.pow(a, b)
    ga, gb = torch.autograd.grad(y, (a, b), torch.ones(5, dtype=torch.float64))
    sa, sb = _t(D, (5,), *av), _t(D, (5,), *bv)
    assert _f(_fwd("pow_tensor", [sa, sb])) == y.detach().tolist()
    sga, sgb = _vjp("pow_tensor", [sa, sb], _t(D, (5,), *[1] * 5))
    np.testing.assert_allclose(_f(sga), ga.tolist(), rtol=4e-16, atol=0)
    np.testing.assert_allclose(_f(sgb), gb.tolist(), rtol=4e-16, atol=0)
    # pow with a constant exponent, exponent 0 at x = 0 included (gradient 0)
    for e in (2, 0, Fraction(1, 2), -1):
        xt = torch.tensor([0.0, 2.0, 4.0], dtype=torch.float64).requires_grad_(True)
        yt = torch.pow(xt, float(e))
        (gt,) = torch.autograd.grad(yt, (xt,), torch.ones(3, dtype=torch.float64))
        sx3 = _t(D, (3,), 0, 2, 4)
        assert _f(_fwd("pow", [sx3], exponent=e)) == yt.detach().tolist(), e
        # PyTorch's backward takes x**(e - 1) through rsqrt / reciprocal kernels (-1/2,
        # -2): within 1 ulp of the spec's correctly rounded pow
        sg = _vjp("pow", [sx3], _t(D, (3,), 1, 1, 1), exponent=e)[0]
        np.testing.assert_allclose(_f(sg), gt.tolist(), rtol=2.3e-16, atol=0, err_msg=str(e))


def test_aten_rules_emit_the_table_ops() -> None:
    """aten.prelu/_prelu_kernel, aten.pow (number and tensor exponent, number base),
    aten.where.self and aten.reciprocal, as the torch.export importer calls them."""
    from runtime.interop.aten import ATEN
    from runtime.interop.core import Emitter, Static, Unsupported

    E = Emitter()
    x, w, e = E.input((2, 3, 2)), E.input((3, 1)), E.input((2, 3, 2))
    w1, w2 = E.input((1,)), E.input((2,))
    ops = [
        ATEN["aten._prelu_kernel"](E, x, w),
        ATEN["aten.prelu"](E, x, w1),
        ATEN["aten.pow"](E, x, 3),
        ATEN["aten.pow"](E, x, e),
        ATEN["aten.pow"](E, 2.0, x),
        ATEN["aten.where"](E, Static(np.array([True, False])), x, e),
        ATEN["aten.reciprocal"](E, x),
    ]
    g = E.b.build(output=ops[-1].id)
    got = [(n.op, dict(n.attrs)) for n in g.nodes if n.op not in ("reshape", "const")]
    assert got == [
        ("prelu", {}),
        ("prelu", {}),
        ("pow", {"exponent": Fraction(3)}),
        ("pow_tensor", {}),
        ("pow_tensor", {}),
        ("where", {"mask": (1, 0), "mask_shape": (2,)}),
        ("inv", {}),
    ]
    with pytest.raises(Unsupported, match="condition computed"):
        ATEN["aten.where"](E, x, x, e)
    with pytest.raises(Unsupported, match="prelu weight"):
        ATEN["aten.prelu"](E, x, w2)


@pytest.mark.skipif(
    not os.environ.get("TORCHLEAN_TORCH_EXPORT"), reason="TORCHLEAN_TORCH_EXPORT=1 (about 20 s)"
)
def test_torch_export_maps_prelu_pow_where_reciprocal() -> None:
    """A module exported by torch.export and imported (opt-in: the export alone takes tens
    of seconds on a shared 2-core machine); the rules themselves are checked above."""
    torch = _torch()
    from runtime.interop import from_torch

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.p = torch.nn.PReLU(3)
            self.register_buffer("m", torch.tensor([[True, False, True]]))

        def forward(self, x: Any, y: Any) -> Any:
            b = torch.pow(self.p(x), 2) + x**0.5 + torch.pow(y.abs() + 1, x)
            return torch.where(self.m, b, torch.reciprocal(y))

    m = M().double()
    with torch.no_grad():
        m.p.weight.copy_(torch.tensor([0.25, -0.5, 2.0]))
    x = torch.tensor([[1.5, -2.0, 0.25], [3.0, -0.5, 2.0]], dtype=torch.float64)
    y = torch.tensor([[0.5, 2.0, -3.0], [1.25, 4.0, -1.0]], dtype=torch.float64)
    imp = from_torch(m, (x, y))
    ops = {n.op for n in imp.graph.nodes}
    assert {"prelu", "pow", "pow_tensor", "where", "inv"} <= ops, ops
    outs, grads = imp.spec_run("float64")
    want = m(x, y)
    np.testing.assert_allclose(_f(outs[0]), want.reshape(-1).tolist(), rtol=1e-15)
    xg = x.clone().requires_grad_(True)
    (gx,) = torch.autograd.grad(m(xg, y).sum(), (xg,))
    np.testing.assert_allclose(_f(grads["x"]), gx.reshape(-1).tolist(), rtol=1e-14)


# --------------------------------------------------------------------------- ONNX


def test_onnx_export_runs_in_onnxruntime_and_imports_back() -> None:
    pytest.importorskip("onnx", reason="pip install onnx")
    ort = pytest.importorskip("onnxruntime", reason="pip install onnxruntime")
    from runtime.interop import from_onnx, to_onnx

    b = GraphBuilder()
    x, w, e = b.input((2, 3)), b.input((3,)), b.input((3,))
    p = b.node("prelu", x, w)
    q = b.node("pow", p, exponent=2)
    r = b.node("pow_tensor", b.node("abs", x), e)
    out = b.node("where", q, r, mask=(1, 0, 1), mask_shape=(3,))
    g = b.build(output=out)
    model = to_onnx(g, names={0: "x", 1: "w", 2: "e"}, dtype="float64")
    kinds = {n.op_type for n in model.graph.node}
    assert {"PRelu", "Pow", "Where"} <= kinds, kinds
    xv = np.array([[1.5, -2.0, 0.25], [3.0, -0.5, 2.0]])
    wv, ev = np.array([0.25, -0.5, 2.0]), np.array([1.5, 2.0, -1.0])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {"x": xv, "w": wv, "e": ev})
    D = FLOAT64
    from spec.graph import eval_graph

    want = eval_graph(D, g, [_t(D, (2, 3), *xv.reshape(-1)), _t(D, (3,), *wv), _t(D, (3,), *ev)])
    np.testing.assert_allclose(got.reshape(-1), _f(want.tensors[-1]), rtol=1e-15)
    back = from_onnx(model, inputs={"x": xv, "w": wv, "e": ev})
    # initializers import as parameters: the exponent is a graph value there (pow_tensor)
    assert {"prelu", "pow_tensor", "where"} <= {n.op for n in back.graph.nodes}


# --------------------------------------------------------------------------- engines

_AUTOGRAD_NEW = ("hardsigmoid", "hardswish", "celu", "selu", "mish")


@pytest.mark.parametrize("engine", ["torch", "autograd"])
def test_engine_adapters_agree_with_the_spec_on_the_samples(engine: str) -> None:
    """The adapters of the new ops (and autograd's new activations) judged on every finite
    sample of the ops in float32: covered, not refused, nothing wrong (conventions such as
    PyTorch's forward-mode prelu tie are named, not failures)."""
    pytest.importorskip(engine, reason=f"pip install {engine}")
    from conformance.engines import load_engine
    from conformance.engines.local import check_node

    eng = load_engine(engine)
    D = DTYPE_DOMAIN["float32"]
    ops = NEW + (_AUTOGRAD_NEW if engine == "autograd" else ())
    checked = 0
    for op in ops:
        for smp in OPS[op].samples:
            if not all(isinstance(v, Fraction) for _, vals in smp.args for v in vals):
                continue
            xs = [_arg(D, s, v) for s, v in smp.args]
            y = OPS[op].forward(D, xs, dict(smp.attrs), ())
            g = Tensor(
                y.shape, tuple(D.from_rational(Fraction(j + 1, 4)) for j in range(len(y.data)))
            )
            res = check_node(eng, "float32", op, dict(smp.attrs), xs, g, xs)
            assert res.covered and res.refused is None, (engine, op, res.refused)
            assert res.wrong is None, (engine, op, smp.note, res.wrong)
            checked += 1
    assert checked >= len(ops)
