"""narrow, flip, roll, tile, repeat_interleave, cumsum, batch_norm_eval and
local_response_norm through the layers: hand-worked spec values, the spec against NumPy's
operation of the same meaning (Hypothesis), cumsum's kernels against a sequential fold,
Session.split / chunk, and the importers (ONNX against onnxruntime, torch.export against
PyTorch), each skipped where its package is missing."""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.engine.context import KernelContext
from runtime.kernels import KERNELS
from spec.domains import FLOAT64, RATIONAL
from spec.errors import TorchLeanError
from spec.ops import OPS
from spec.ops.shape import chunk_ranges, split_ranges
from spec.tensor import Tensor

Q = Fraction


def _t(a: np.ndarray) -> Tensor:
    return Tensor(a.shape, tuple(Q(int(v)) for v in a.reshape(-1)))


def _run(op: str, a: np.ndarray, **attrs) -> np.ndarray:
    y = OPS[op].forward(RATIONAL, [_t(a)], attrs, ())
    return np.array([int(v) for v in y.data], dtype=np.int64).reshape(y.shape)


# --------------------------------------------------------------------------- golden values


def test_hand_worked_values() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]])
    assert _run("narrow", x, dim=1, start=1, length=2).tolist() == [[2, 3], [5, 6]]
    assert _run("flip", x, dims=(0, 1)).tolist() == [[6, 5, 4], [3, 2, 1]]
    assert _run("roll", x, shifts=(-4,), dims=(1,)).tolist() == [[2, 3, 1], [5, 6, 4]]
    assert _run("roll", x, shifts=(1,)).tolist() == [[6, 1, 2], [3, 4, 5]]
    assert _run("tile", np.array([1, 2]), dims=(2, 2)).tolist() == [[1, 2, 1, 2], [1, 2, 1, 2]]
    assert _run("tile", x, dims=(0,)).shape == (2, 0)
    assert _run("repeat_interleave", x, repeats=(0, 2, 1), dim=1).tolist() == [
        [2, 2, 3],
        [5, 5, 6],
    ]
    assert _run("cumsum", x, dim=1).tolist() == [[1, 3, 6], [4, 9, 15]]
    assert _run("cumsum", x, dim=1, exclusive=True).tolist() == [[0, 1, 3], [0, 4, 9]]
    assert _run("cumsum", x, dim=1, reverse=True).tolist() == [[6, 5, 3], [15, 11, 6]]
    assert _run("cumsum", x, dim=0, exclusive=True, reverse=True).tolist() == [
        [4, 5, 6],
        [0, 0, 0],
    ]


def test_split_and_chunk_ranges_follow_torch() -> None:
    # torch.split(arange(7), 3) -> sizes 3, 3, 1; torch.chunk(arange(6), 4) -> 2, 2, 2
    assert split_ranges("split", 7, 3) == [(0, 3), (3, 3), (6, 1)]
    assert split_ranges("split", 5, [2, 0, 3]) == [(0, 2), (2, 0), (2, 3)]
    assert chunk_ranges("chunk", 6, 4) == [(0, 2), (2, 2), (4, 2)]
    assert chunk_ranges("chunk", 5, 3) == [(0, 2), (2, 2), (4, 1)]
    with pytest.raises(TorchLeanError, match="sum to the axis length"):
        split_ranges("split", 5, [2, 2])
    with pytest.raises(TorchLeanError, match="chunks must be positive"):
        chunk_ranges("chunk", 5, 0)


@pytest.mark.parametrize(
    "op, attrs, match",
    [
        ("narrow", {"dim": 1, "start": 2, "length": 2}, "start \\+ length exceeds"),
        ("flip", {"dims": (1, 1)}, "dims repeat an axis"),
        ("roll", {"shifts": (1, 2), "dims": (0,)}, "one shift per dim"),
        ("repeat_interleave", {"repeats": (1, 2), "dim": 1}, "one repeat, or one per element"),
        ("cumsum", {"dim": 2}, "dim out of range"),
    ],
)
def test_bad_attributes_name_the_op(op: str, attrs: dict, match: str) -> None:
    with pytest.raises(TorchLeanError, match=f"{op}.*{match}"):
        OPS[op].shape([(2, 3)], attrs)


# --------------------------------------------------------------------------- spec vs NumPy

_shape = st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple)


@st.composite
def _movement(draw):
    s = draw(_shape)
    r = len(s)
    x = np.arange(int(np.prod(s)), dtype=np.int64).reshape(s) - 3
    op = draw(st.sampled_from(["narrow", "flip", "roll", "tile", "repeat_interleave"]))
    d = draw(st.integers(0, r - 1))
    if op == "narrow":
        start = draw(st.integers(0, s[d]))
        length = draw(st.integers(0, s[d] - start))
        cut = [slice(None)] * r
        cut[d] = slice(start, start + length)
        return x, op, {"dim": d, "start": start, "length": length}, x[tuple(cut)]
    if op == "flip":
        dims = tuple(draw(st.lists(st.integers(0, r - 1), unique=True)))
        return x, op, {"dims": dims}, np.flip(x, dims) if dims else x
    if op == "roll":
        dims = tuple(draw(st.lists(st.integers(0, r - 1), min_size=1, max_size=3)))
        shifts = tuple(draw(st.lists(st.integers(-7, 7), min_size=len(dims), max_size=len(dims))))
        return x, op, {"shifts": shifts, "dims": dims}, np.roll(x, shifts, dims)
    if op == "tile":
        reps = tuple(draw(st.lists(st.integers(0, 2), max_size=4)))
        return x, op, {"dims": reps}, np.tile(x, reps)
    reps = tuple(draw(st.lists(st.integers(0, 2), min_size=s[d], max_size=s[d]) | st.just([2])))
    want = np.repeat(x, reps if len(reps) > 1 else reps[0], axis=d)
    return x, op, {"repeats": reps, "dim": d}, want


@given(_movement())
def test_movement_ops_match_numpy(case) -> None:
    x, op, attrs, want = case
    got = _run(op, x, **attrs)
    assert got.shape == want.shape and (got == want).all()


@given(_shape, st.data())
def test_cumsum_matches_numpy_and_its_vjp_is_the_adjoint(s, data) -> None:
    x = np.arange(int(np.prod(s)), dtype=np.int64).reshape(s) * 3 - 5
    g = np.arange(int(np.prod(s)), dtype=np.int64).reshape(s) % 4 - 1
    d = data.draw(st.integers(0, len(s) - 1))
    ex, rv = data.draw(st.booleans()), data.draw(st.booleans())
    a = {"dim": d, "exclusive": ex, "reverse": rv}
    xx = np.flip(x, d) if rv else x
    want = np.cumsum(xx, axis=d)
    if ex:
        want = want - xx
    want = np.flip(want, d) if rv else want
    assert (_run("cumsum", x, **a) == want).all()
    # <cumsum(x), g> == <x, vjp(g)>: the VJP is the reverse cumulative sum
    gx = OPS["cumsum"].vjp(RATIONAL, [_t(x)], _t(g), a, ())[0]
    lhs = int((want * g).sum())
    rhs = sum(int(v) * w for v, w in zip(x.reshape(-1), gx.data, strict=True))
    assert lhs == rhs


# --------------------------------------------------------------------------- cumsum kernels


def _seq_fold(x: np.ndarray) -> np.ndarray:
    """cumsum along the last axis, one rounded float64 add per step (written here)."""
    out = np.empty_like(x)
    for idx in np.ndindex(*x.shape[:-1]):
        acc = None
        for k in range(x.shape[-1]):
            acc = x[(*idx, k)] if acc is None else acc + x[(*idx, k)]
            out[(*idx, k)] = acc
    return out


@pytest.mark.parametrize("profile", ["ordered", "fast"])
def test_cumsum_kernel_is_the_sequential_fold(profile: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 11)) * 10.0 ** rng.integers(-8, 8, (3, 11))
    k, c = KERNELS["cumsum"], KernelContext("float64", profile)
    y, _ = k.forward(c, [x], {"dim": 1}, ())
    assert y.tobytes() == _seq_fold(x).tobytes()
    gx = k.vjp(c, None, x, {"dim": 1}, ())[0]
    assert gx.tobytes() == _seq_fold(x[:, ::-1])[:, ::-1].tobytes()
    spec = OPS["cumsum"].forward(
        FLOAT64, [Tensor(x.shape, tuple(FLOAT64.from_float(v) for v in x.reshape(-1)))],
        {"dim": 1}, (),
    )  # fmt: skip
    assert y.reshape(-1).tolist() == [float(v) for v in spec.data]


def test_cumsum_signed_zeros_and_exclusive_head() -> None:
    c = KernelContext("float64", "ordered")
    x = np.array([-0.0, -0.0, 1.0])
    y, _ = KERNELS["cumsum"].forward(c, [x], {"dim": 0}, ())
    assert np.signbit(y[:2]).all()  # the first term as is, -0 + -0 = -0
    y, _ = KERNELS["cumsum"].forward(c, [x], {"dim": 0, "exclusive": True}, ())
    assert not np.signbit(y[0]) and np.signbit(y[1])  # +0 head, then x_0 as is


# --------------------------------------------------------------------------- Session


def test_session_split_and_chunk_emit_one_narrow_per_piece() -> None:
    from runtime.session import Session

    s = Session(dtype="float64")
    x = s.input(np.arange(10.0).reshape(2, 5), requires_grad=True)
    parts = s.split(x, 2, -1)
    assert [p.shape for p in parts] == [(2, 2), (2, 2), (2, 1)]
    assert s.get_value(parts[2]).tolist() == [[4.0], [9.0]]
    assert [p.shape for p in s.chunk(x, 2, 0)] == [(1, 5), (1, 5)]
    loss = s.sum(s.mul(parts[1], parts[1]))
    g = s.grad(s.backward_scalar_dense_all(loss), x)
    assert g.tolist() == [[0, 0, 4, 6, 0], [0, 0, 14, 16, 0]]
    with pytest.raises(TorchLeanError, match="split: dim out of range"):
        s.split(x, 2, 2)


# --------------------------------------------------------------------------- importers


def _onnx_lrn(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    """ONNX's LRN formula in float64: channels c - floor((size-1)/2) .. c + ceil((size-1)/2)
    (onnxruntime refuses even sizes; onnx.reference's LRN loops over the batch axis)."""
    x = x.astype(np.float64)
    sq = np.zeros_like(x)
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    for c in range(x.shape[1]):
        sq[:, c] = (x[:, max(0, c - lo) : c + hi + 1] ** 2).sum(axis=1)
    return x / (bias + alpha / size * sq) ** beta


def test_onnx_split_tile_cumsum_lrn_batchnorm_against_onnxruntime() -> None:
    pytest.importorskip("onnx", reason="needs the onnx package")
    ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from runtime.interop import from_onnx

    F = TensorProto.FLOAT
    rng = np.random.default_rng(0)

    def check(nodes, ins, feeds, n_out, opset, inits=(), ops=(), expect=None):
        outs = [helper.make_tensor_value_info(f"y{i}", F, None) for i in range(n_out)]
        vi = [helper.make_tensor_value_info(n, F, s) for n, s in ins]
        m = helper.make_model(
            helper.make_graph(nodes, "g", vi, outs, initializer=list(inits)),
            opset_imports=[helper.make_opsetid("", opset)],
        )
        m.ir_version = 8
        if expect is not None:
            want = expect
        else:
            want = ort.InferenceSession(m.SerializeToString()).run(None, feeds)
        imp = from_onnx(m, inputs=feeds)
        got, _ = imp.run("float64")
        for g_, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g_), w, rtol=1e-5, atol=1e-6)
        used = {n.op for n in imp.graph.nodes}
        assert set(ops) <= used, (ops, used)

    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    ys = ["y0", "y1", "y2"]
    i64 = lambda name, *v: numpy_helper.from_array(np.asarray(v, dtype=np.int64), name)  # noqa: E731
    # Split: attribute (opset 11), input (13), num_outputs (18)
    check([helper.make_node("Split", ["x"], ys, axis=1, split=[1, 3, 1])],
          [("x", x.shape)], {"x": x}, 3, 11, ops={"narrow"})  # fmt: skip
    check([helper.make_node("Split", ["x", "s"], ys, axis=-2)],
          [("x", x.shape)], {"x": x}, 3, 13, [i64("s", 2, 0, 3)], ops={"narrow"})  # fmt: skip
    check([helper.make_node("Split", ["x"], ys, axis=1, num_outputs=3)],
          [("x", x.shape)], {"x": x}, 3, 18, ops={"narrow"})  # fmt: skip
    check([helper.make_node("Tile", ["x", "r"], ["y0"])],
          [("x", x.shape)], {"x": x}, 1, 13, [i64("r", 2, 1, 3)], ops={"tile"})  # fmt: skip
    for ex, rv in ((0, 0), (1, 0), (0, 1), (1, 1)):
        check([helper.make_node("CumSum", ["x", "a"], ["y0"], exclusive=ex, reverse=rv)],
              [("x", x.shape)], {"x": x}, 1, 14, [i64("a", -2)], ops={"cumsum"})  # fmt: skip
    lrn = {"alpha": 0.5, "beta": 0.75, "bias": 2.0}
    x4 = x.reshape(2, 5, 3, 1)  # onnxruntime's LRN takes 4-D inputs only
    check([helper.make_node("LRN", ["x"], ["y0"], size=3, **lrn)],
          [("x", x4.shape)], {"x": x4}, 1, 13, ops={"local_response_norm"})  # fmt: skip
    check([helper.make_node("LRN", ["x"], ["y0"], size=4, **lrn)],
          [("x", x4.shape)], {"x": x4}, 1, 13, expect=[_onnx_lrn(x4, 4, **lrn)])  # fmt: skip
    for shape in ((4, 5), (2, 5, 3), (1, 5, 2, 2, 3)):
        xb = rng.standard_normal(shape).astype(np.float32)
        st_ = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in
               zip("wbmv", (rng.standard_normal(5), rng.standard_normal(5),
                            rng.standard_normal(5), rng.random(5) + 0.5), strict=True)]  # fmt: skip
        check([helper.make_node("BatchNormalization", ["x", "w", "b", "m", "v"], ["y0"])],
              [("x", shape)], {"x": xb}, 1, 15, st_, ops={"batch_norm_eval"})  # fmt: skip


def test_torch_export_maps_onto_the_new_ops() -> None:
    torch = pytest.importorskip("torch", reason="needs torch")
    from runtime.interop import from_torch

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = torch.nn.BatchNorm3d(2).eval()
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a, b = torch.split(x, [1, 2], dim=-1)
            c = torch.chunk(x, 2, dim=1)[1]
            h = torch.flip(a, (0, 2)) * b.sum(-1, keepdim=True)
            h = torch.roll(h, (1, -2), (1, 0)) + torch.cumsum(c, 2).mean()
            t = h.repeat(1, 2, 2)
            t = torch.repeat_interleave(t, 2, dim=0)
            return self.bn(t.reshape(2, 2, 2, 2, 2))

    x = torch.randn(2, 2, 3, dtype=torch.float64)
    m = M().double().eval()
    imp = from_torch(m, (x,))
    used = {n.op for n in imp.graph.nodes}
    want_ops = {"narrow", "flip", "roll", "cumsum", "tile", "repeat_interleave", "batch_norm_eval"}
    assert want_ops <= used, used
    got, _ = imp.run("float64")
    want = m(x).detach().numpy()
    np.testing.assert_allclose(np.asarray(got[0]), want, rtol=1e-12, atol=1e-12)
    # LRN is a Python function in torch (no aten op): torch.export decomposes it into pow,
    # avg_pool3d and div, so the aten importer never sees local_response_norm


# --------------------------------------------------------------------------- laws across ops


@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.data())
def test_laws_across_ops_in_the_ordered_kernels(s, data) -> None:
    """flip∘flip = id, roll by k then -k = id, tile = concat of copies, and an inclusive
    cumsum's last element is reduce_sum's fold bit for bit (both left folds in order)."""
    c = KernelContext("float32", "ordered")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = (rng.standard_normal(s) * 10.0 ** rng.integers(-6, 6, s)).astype(np.float32)
    d = data.draw(st.integers(0, len(s) - 1))

    def run(op: str, v: np.ndarray, **a) -> np.ndarray:
        k = KERNELS[op]
        return np.asarray(k.forward(c, [v], a, ())[0])

    assert run("flip", run("flip", x, dims=(d,)), dims=(d,)).tobytes() == x.tobytes()
    k = data.draw(st.integers(-5, 5))
    back = run("roll", run("roll", x, shifts=(k,), dims=(d,)), shifts=(-k,), dims=(d,))
    assert back.tobytes() == x.tobytes()
    reps = [1] * len(s)
    reps[d] = 3
    assert run("tile", x, dims=tuple(reps)).tobytes() == np.concatenate([x] * 3, d).tobytes()
    last = np.take(run("cumsum", x, dim=d), [s[d] - 1], axis=d).squeeze(d)
    assert last.tobytes() == run("reduce_sum", x, axis=d).tobytes()


# --------------------------------------------------------------------------- engines

_MOVE = ("narrow", "flip", "roll", "tile", "cumsum", "batch_norm_eval")


_SLOW_ENGINES = pytest.mark.skipif(
    not os.environ.get("TORCHLEAN_ENGINE_SAMPLES"),
    reason="opt-in (TORCHLEAN_ENGINE_SAMPLES=1): tens of seconds of engine start-up and "
    "per-op compilation; `python -m conformance --engine NAME --ops ...` is the full judge",
)


@pytest.mark.parametrize(
    ("engine", "module", "ops", "dtypes"),
    [
        ("autograd", "autograd", _MOVE, ("float64",)),
        pytest.param(
            "autograd", "autograd", _MOVE, ("float32",), marks=_SLOW_ENGINES, id="autograd-f32"
        ),
        pytest.param(
            "torch",
            "torch",
            (*_MOVE, "repeat_interleave", "local_response_norm"),
            ("float64", "float32"),
            marks=_SLOW_ENGINES,
        ),
        pytest.param(
            "jax", "jax", (*_MOVE, "repeat_interleave"), ("float64", "float32"), marks=_SLOW_ENGINES
        ),
        pytest.param("tinygrad", "tinygrad", _MOVE, ("float64", "float32"), marks=_SLOW_ENGINES),
    ],
)
def test_engines_match_the_spec_on_the_samples(engine: str, module: str, ops, dtypes) -> None:
    """Every sample point of the new ops, forward, VJP and JVP, judged as the engine runner
    judges a node (HIPS autograd in float64 by default; the others opt-in)."""
    import math

    pytest.importorskip(module, reason=f"pip install {module}")
    from conformance.engines import load_engine
    from conformance.engines.local import check_node
    from runtime.backends import DTYPE_DOMAIN
    from spec.validate import check_node as normalise

    eng = load_engine(engine)
    for dtype in dtypes:
        D = DTYPE_DOMAIN[dtype]
        for op in ops:
            for smp in OPS[op].samples:
                xs = [Tensor(s, tuple(D.from_rational(Q(v)) if not isinstance(v, float)
                                      else D.from_float(v) for v in vals))
                      for s, vals in smp.args]  # fmt: skip
                y = OPS[op].forward(D, xs, dict(smp.attrs), ())
                g = Tensor(y.shape, tuple(D.from_float(math.cos(j)) for j in range(len(y.data))))
                ts = [Tensor(x.shape, tuple(D.from_float(math.sin(j + 1))
                                            for j in range(len(x.data)))) for x in xs]  # fmt: skip
                attrs, _ = normalise(op, list(range(len(xs))), dict(smp.attrs),
                                     [x.shape for x in xs])  # fmt: skip
                res = check_node(eng, dtype, op, attrs, xs, g, ts)
                assert res.covered and res.refused is None, (op, dtype, res.refused)
                assert res.wrong is None, (op, dtype, smp.note, res.wrong)
