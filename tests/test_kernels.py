"""runtime.kernels: the kernel table, the `ordered` kernels against spec, and the NumPy facts
the `ordered` profile relies on.

Oracles: the spec op rules (`spec.ops.OPS[name].forward/vjp/jvp`) evaluated in the matching
domain (MPFR, one rounding per operation; exact rationals for "exact"), `spec.tensor.fold_add`
and `spec.ops.unbroadcast`, and hand-worked binary fractions.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.graphs import scalars
from runtime.backends import DTYPE_DOMAIN, from_spec, to_spec
from runtime.engine.context import KernelContext
from runtime.kernels import KERNELS, Kernel
from spec.domains import BINARY32, FLOAT16, Domain, IEEEDomain
from spec.errors import TorchLeanError
from spec.ops import FAMILIES as SPEC_FAMILIES
from spec.ops import OPS, families_holding, unbroadcast
from spec.shape import Shape, size
from spec.tensor import Tensor, fold_add
from spec.validate import check_node

IEEE = ("float64", "float32", "bfloat16", "float16")

# --------------------------------------------------------------------------- the table


def test_kernel_table_covers_every_op() -> None:
    missing = [name for name in OPS if name not in KERNELS]
    assert not missing, f"ops without a runtime kernel: {missing}"
    extra = [name for name in KERNELS if name not in OPS]
    assert not extra, f"kernels for ops that are not in the spec table: {extra}"
    for name in OPS:
        k = KERNELS[name]
        assert isinstance(k, Kernel) and k.name == name
        assert callable(k.forward) and callable(k.vjp) and callable(k.jvp)
        assert isinstance(k.saves, str) and k.saves.strip(), f"{name}: no `saves` description"
        if OPS[name].precondition is not None:
            assert k.check is not None, f"{name}: spec has a precondition, the kernel no check"


# The op families, from the spec op table (the single source of truth): `OpDef.family`.
FAMILIES = {
    family: " ".join(name for name, op in OPS.items() if op.family == family)
    for family in SPEC_FAMILIES
}


def test_every_kernel_is_registered_by_its_family_module() -> None:
    family_of = {op: fam for fam, ops in FAMILIES.items() for op in ops.split()}
    assert sorted(family_of) == sorted(OPS), "the family list and the spec op table differ"
    assert sorted(KERNELS) == sorted(OPS)
    wrong = {n: k.family for n, k in KERNELS.items() if k.family != family_of[n]}
    assert not wrong, f"kernels registered outside their family module: {wrong}"
    for fam in families_holding(("primitive",)):  # a family of composites only has no module
        module = importlib.import_module(f"runtime.kernels.{fam}")
        assert module.__name__.rpartition(".")[2] == fam


# --------------------------------------------------------------------------- differential


@cache
def _elements(D: Domain, kind: str) -> st.SearchStrategy[Any]:
    if not isinstance(D, IEEEDomain):
        return scalars(D)
    any_bits = st.integers(0, 2**D.width - 1).map(D.from_bits)
    base = scalars(D, specials=True) | scalars(D) | any_bits
    if kind == "positive":  # strictly positive, not NaN (log's precondition)
        return base.map(D.abs).filter(lambda v: D.lt(D.zero(), v))
    return base


@cache
def _tensor(shape: Shape, D: Domain, kind: str = "any") -> st.SearchStrategy[Tensor]:
    n = size(shape)
    return st.lists(_elements(D, kind), min_size=n, max_size=n).map(
        lambda v: Tensor(shape, tuple(v))
    )


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        with np.errstate(all="ignore"):
            return "ok", fn()
    except TorchLeanError as e:
        return type(e).__name__, None


def _same(D: Domain, dtype: str, got: Any, want: Tensor, what: str) -> None:
    ctx_arr = np.asarray(got)
    if dtype == "exact":
        assert all(type(v) is Fraction for v in ctx_arr.reshape(-1)), f"{what}: not Fractions"
    t = to_spec(ctx_arr, dtype)
    assert t.same(D, want), (
        f"{what}: runtime {[D.encode(v) for v in t.data]} shape {t.shape} vs spec "
        f"{[D.encode(v) for v in want.data]} shape {want.shape}"
    )


CHECKED: set[str] = set()


def check_op(
    name: str,
    *signatures: Sequence[Shape],
    env: tuple[int, ...] = (),
    elems: str = "any",
    **attrs: Any,
) -> Callable[..., None]:
    """A test comparing the `ordered` kernel of `name` with the spec rule, bit for bit, in
    every IEEE dtype (and exactly in "exact" for algebraic ops): forward, the VJP per
    argument and the JVP, on the argument shapes of one of `signatures`."""
    CHECKED.add(name)
    op = OPS[name]
    dtypes = IEEE + (("exact",) if op.algebraic else ())

    @pytest.mark.parametrize("dtype", dtypes)
    @settings(max_examples=20)
    @given(data=st.data())
    def test(dtype: str, data: st.DataObject) -> None:
        D = DTYPE_DOMAIN[dtype]
        shapes = [tuple(s) for s in data.draw(st.sampled_from(signatures), label="shapes")]
        norm, out_shape = check_node(name, list(range(len(shapes))), attrs, shapes)
        xs = [data.draw(_tensor(s, D, elems), label=f"x{i}") for i, s in enumerate(shapes)]
        g = data.draw(_tensor(out_shape, D), label="cotangent")
        dxs = [data.draw(_tensor(s, D), label=f"dx{i}") for i, s in enumerate(shapes)]
        ctx = KernelContext(dtype, "ordered")
        kern = KERNELS[name]
        xs_np = [from_spec(x, dtype) for x in xs]

        if op.precondition is not None:
            want_pre = _outcome(lambda: op.precondition(D, xs, norm))  # type: ignore[misc]
            got_pre = _outcome(lambda: kern.check(ctx, xs_np, norm))  # type: ignore[misc]
            assert got_pre[0] == want_pre[0], (
                f"precondition: runtime {got_pre[0]}, spec {want_pre[0]}"
            )
            if want_pre[0] != "ok":
                return

        want_y = _outcome(lambda: op.forward(D, xs, norm, env))
        got_y = _outcome(lambda: kern.forward(ctx, xs_np, norm, env))
        assert got_y[0] == want_y[0], f"forward: runtime {got_y[0]}, spec {want_y[0]}"
        if want_y[0] != "ok":
            return
        y, saved = got_y[1]
        _same(D, dtype, ctx.arr(y), want_y[1], "forward")

        want_g = _outcome(lambda: op.vjp(D, xs, g, norm, env))
        got_g = _outcome(lambda: kern.vjp(ctx, saved, from_spec(g, dtype), norm, env))
        assert got_g[0] == want_g[0], f"vjp: runtime {got_g[0]}, spec {want_g[0]}"
        if want_g[0] == "ok":
            assert len(got_g[1]) == len(want_g[1]) == len(shapes if name != "const" else [])
            for i, (a, b) in enumerate(zip(got_g[1], want_g[1], strict=True)):
                _same(D, dtype, ctx.arr(a), b, f"vjp argument {i}")

        want_t = _outcome(lambda: op.jvp(D, xs, dxs, norm, env))
        got_t = _outcome(
            lambda: kern.jvp(ctx, saved, [from_spec(d, dtype) for d in dxs], norm, env)
        )
        assert got_t[0] == want_t[0], f"jvp: runtime {got_t[0]}, spec {want_t[0]}"
        if want_t[0] == "ok":
            _same(D, dtype, ctx.arr(got_t[1]), want_t[1], "jvp")

    test.__name__ = f"test_{name}"
    return test


BIN = ([(2, 3), (2, 3)], [(2, 3), (3,)], [(2, 1), (1, 3)], [(), (2,)], [(0, 3), (1,)])
UN = ([(2, 3)], [()], [(0,)])

test_add = check_op("add", *BIN)
test_sub = check_op("sub", *BIN)
test_mul = check_op("mul", *BIN)
test_div = check_op("div", *BIN)
test_maximum = check_op("maximum", *BIN)
test_minimum = check_op("minimum", *BIN)
test_neg = check_op("neg", *UN)
test_scale = check_op("scale", *UN, c=Fraction(-1, 3))
test_relu = check_op("relu", *UN)
test_abs = check_op("abs", *UN)
test_clamp = check_op("clamp", *UN, lo=Fraction(-1, 2), hi=3)
test_sqrt = check_op("sqrt", *UN)
test_exp = check_op("exp", *UN)
test_log = check_op("log", *UN, elems="positive")
test_tanh = check_op("tanh", *UN)
test_sin = check_op("sin", *UN)
test_cos = check_op("cos", *UN)
test_detach = check_op("detach", *UN)
test_const = check_op("const", [], shape=(2, 2), values=(Fraction(1, 3), -2, 0, Fraction(7, 5)))
test_sum = check_op("sum", [(2, 3)], [()], [(0,)], [(2, 1, 3)], [(12,)])
test_reduce_sum = check_op("reduce_sum", [(2, 3)], [(2, 3, 2)], [(2, 0)], axis=1)
test_matmul = check_op(
    "matmul",
    [(2, 3), (3, 2)],
    [(2, 2, 3), (3, 1)],
    [(1, 2, 3), (2, 3, 2)],
    [(2, 0), (0, 3)],
    [(3, 1), (1, 2)],
)
test_linear = check_op("linear", [(2, 3), (2, 3), (2,)], [(3,), (1, 3), (1,)])
test_reshape = check_op("reshape", [(2, 3)], [(6,)], [(1, 6)], shape=(3, 2))
test_swap_adjacent = check_op("swap_adjacent", [(2, 3)], [(2, 3, 1)], axis=0)
test_broadcast_to = check_op("broadcast_to", [(2, 3)], [(1, 3)], [(2, 1)], [()], shape=(2, 2, 3))
test_concat = check_op("concat", [(2, 3)], [(2, 3), (1, 3)], [(1, 3), (1, 3), (0, 3)])
test_slice = check_op("slice", [(4, 2)], [(3,)], start=1, stop=3)
test_select = check_op("select", [(3, 2)], [(2,)], index=1)
test_select_env = check_op("select", [(3, 2)], [(3,)], env=(2,), env_slot=0)
test_index_select = check_op("index_select", [(3, 2)], [(3,)], indices=(2, 0, 2))
test_scatter_add = check_op("scatter_add", [(3, 2)], [(3,)], indices=(1, 0, 1), size=3)
test_softmax = check_op("softmax", [(2, 3)], [(3,)], [(2, 1)])
test_log_softmax = check_op("log_softmax", [(2, 3)], [(3,)], [(2, 1)])
test_inv = check_op("inv", *UN)
test_mean = check_op("mean", [(2, 3)], [()])
test_reduce_mean = check_op("reduce_mean", [(2, 3)], [(3, 1)], axis=0)
test_transpose = check_op("transpose", [(2, 3)], [(2, 1, 3)])
test_sigmoid = check_op("sigmoid", *UN)
test_softplus = check_op("softplus", *UN)
test_gelu = check_op("gelu", *UN)
test_silu = check_op("silu", *UN)
test_safe_log = check_op("safe_log", *UN)
test_mse_loss = check_op("mse_loss", [(2, 3), (2, 3)], [(), ()])
test_cross_entropy = check_op("cross_entropy", [(2, 3), (2, 3)], [(3,), (3,)])
# model-scale ops (primitives, then composites run through their bodies)
test_gather = check_op("gather", [(2, 3)], [(3,)], indices=(2, 3, 0, 2), shape=(2, 2))
test_reduce_max = check_op("reduce_max", [(2, 3)], [(3, 2)], [(1, 3, 2)], axis=1)
test_mask_neg_inf = check_op("mask_neg_inf", [(2, 3)], [(3,)], mask=(1, 0, 1), mask_shape=(3,))
test_conv2d = check_op(
    "conv2d", [(1, 3, 3), (2, 1, 2, 2), (2,)], [(2, 1, 3, 3), (2, 1, 2, 2)], padding=(1, 0)
)
test_conv2d_groups = check_op("conv2d", [(2, 2, 3), (2, 1, 1, 2)], groups=2, stride=(1, 2))
test_conv_transpose2d = check_op(
    "conv_transpose2d", [(1, 2, 2), (1, 2, 2, 2), (2,)], [(1, 1, 2, 2), (1, 1, 2, 2)], stride=(2, 1)
)
test_avg_pool2d = check_op(
    "avg_pool2d", [(1, 3, 3)], [(2, 1, 2, 2)], kernel_size=(2, 2), padding=(1, 1)
)
test_max_pool2d = check_op(
    "max_pool2d", [(1, 3, 3)], [(2, 1, 2, 2)], kernel_size=(2, 2), stride=(1, 1), padding=(1, 1)
)
test_layer_norm = check_op("layer_norm", [(2, 3), (3,), (3,)], [(1,), (1,), (1,)])
test_batch_norm = check_op("batch_norm", [(2, 2), (2,), (2,)], [(2, 1, 2), (1,), (1,)])
test_sdpa = check_op(
    "scaled_dot_product_attention", [(2, 2), (3, 2), (3, 1)], [(1, 1), (1, 1), (1, 2)], causal=1
)
test_mha = check_op("multi_head_attention", [(2, 2)] * 7, heads=2)
test_embedding = check_op("embedding", [(3, 2)], indices=(2, 0, 2), shape=(1, 3))
test_one_hot = check_op("one_hot", [], indices=(1, 0), num_classes=2)


# Ops without a hand-written line above are checked on the argument shapes and attributes
# of their ordinary sample (the first of the op's samples record, spec.ops).
for _name, _op in OPS.items():
    if _name not in CHECKED and _op.samples:
        _smp = _op.samples[0]
        globals()[f"test_{_name}_from_samples"] = check_op(
            _name, [shape for shape, _ in _smp.args], **dict(_smp.attrs)
        )


def test_every_op_has_a_differential_check() -> None:
    assert set(OPS) - CHECKED == set(), "add a check_op line for each new op"


# --------------------------------------------------------------------------- NumPy facts

F32 = np.float32


def _bits32(a: Any) -> list[int]:
    return [int(b) for b in np.ascontiguousarray(a, dtype=F32).reshape(-1).view(np.uint32)]


def _spec_fold(D: IEEEDomain, values: Sequence[float]) -> float:
    return float(fold_add(D, [D.from_float(float(v)) for v in values]))


def _f32_values() -> st.SearchStrategy[float]:
    """binary32 values with cancellation and absorption: +-1, tiny powers, random floats."""
    return (
        st.sampled_from([1.0, -1.0, 2.0**-24, -(2.0**-24), 2.0**-23, 3.0, 2.0**24, -(2.0**24)])
        | st.floats(width=32, min_value=-1e6, max_value=1e6, allow_subnormal=False)
        | st.floats(width=32, min_value=-4, max_value=4)
    )


def _absorbing_column() -> list[float]:
    """1 followed by 15 copies of 2**-24: a left fold in binary32 stays 1 (each step is a
    tie to even); pairwise or 8-way blocked summation collects the small terms first."""
    return [1.0] + [2.0**-24] * 15


def test_np_sum_is_not_a_left_fold() -> None:
    a = np.array(_absorbing_column(), dtype=F32)
    assert _spec_fold(BINARY32, a) == 1.0
    assert float(np.sum(a)) != 1.0  # NumPy's pairwise/unrolled sum reassociates


@given(
    data=st.data(),
    k=st.integers(1, 40),
    n=st.integers(2, 9),
)
def test_add_reduce_axis0_on_c_contiguous_2d_float32_is_a_left_fold(
    data: st.DataObject, k: int, n: int
) -> None:
    vals = data.draw(st.lists(_f32_values(), min_size=k * n, max_size=k * n))
    a = np.array(vals, dtype=F32).reshape(k, n)
    if k >= 16:
        a[:16, 0] = _absorbing_column()
    assert a.flags.c_contiguous
    got = np.add.reduce(a, axis=0)
    want = [_spec_fold(BINARY32, a[:, j]) for j in range(n)]
    assert _bits32(got) == _bits32(np.array(want, dtype=F32))


@given(vals=st.lists(_f32_values(), min_size=1, max_size=40))
def test_add_accumulate_is_sequential(vals: list[float]) -> None:
    a = np.array(vals, dtype=F32)
    got = np.add.accumulate(a)
    want = [_spec_fold(BINARY32, a[: i + 1]) for i in range(len(a))]
    assert _bits32(got) == _bits32(np.array(want, dtype=F32))
    b = np.array(_absorbing_column(), dtype=F32)
    assert float(np.add.accumulate(b)[-1]) == 1.0


def _kloop(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    C = A[:, 0:1] * B[0:1, :]
    for k in range(1, A.shape[1]):
        C = C + A[:, k : k + 1] * B[k : k + 1, :]
    return C


@given(data=st.data(), m=st.integers(1, 3), k=st.integers(1, 20), n=st.integers(1, 3))
def test_kloop_matmul_is_a_left_fold(data: st.DataObject, m: int, k: int, n: int) -> None:
    A = np.array(
        data.draw(st.lists(_f32_values(), min_size=m * k, max_size=m * k)), dtype=F32
    ).reshape(m, k)
    B = np.array(
        data.draw(st.lists(_f32_values(), min_size=k * n, max_size=k * n)), dtype=F32
    ).reshape(k, n)
    D = BINARY32
    want = [
        float(
            fold_add(
                D,
                [
                    D.mul(D.from_float(float(A[i, p])), D.from_float(float(B[p, j])))
                    for p in range(k)
                ],
            )
        )
        for i in range(m)
        for j in range(n)
    ]
    assert _bits32(_kloop(A, B)) == _bits32(np.array(want, dtype=F32))


def test_blas_matmul_is_not_the_left_fold() -> None:
    # 1 + 15 * 2**-24 - 1: the left fold absorbs every small term (result 0); a blocked or
    # FMA-based BLAS kernel keeps some of them.
    row = [*_absorbing_column(), -1.0]
    A = np.array([row], dtype=F32)
    B = np.ones((len(row), 1), dtype=F32)
    assert _spec_fold(BINARY32, row) == 0.0
    assert _bits32(_kloop(A, B)) == [0]
    assert float(np.matmul(A, B)[0, 0]) != 0.0


def test_float16_reductions() -> None:
    # 1 + 2**-11 is a float16 tie (-> 1); per-step rounding keeps 1, float32 accumulation
    # gets 1 + 2**-10. np.add.reduce over a 1-D float16 array accumulates in float32.
    h = np.array([1, 2**-11, 2**-11], dtype=np.float16)
    assert _spec_fold(FLOAT16, h) == 1.0
    assert float(np.add.accumulate(h, dtype=np.float16)[-1]) == 1.0
    assert float(np.add.reduce(h)) == 1 + 2**-10  # documented: not per-step rounded
    ctx = KernelContext("float16", "ordered")
    assert float(ctx.fold0(h)) == 1.0
    assert float(ctx.sum_all(h)) == 1.0


# --------------------------------------------------------------------------- ordered folds


def _shape(max_rank: int = 3, lo: int = 0) -> st.SearchStrategy[Shape]:
    return st.lists(st.integers(lo, 4), min_size=1, max_size=max_rank).map(tuple)


def _fold_oracle(D: Domain, t: Tensor, axis: int) -> Tensor:
    arr = np.empty(len(t.data), dtype=object)
    arr[:] = list(t.data)
    arr = np.moveaxis(arr.reshape(t.shape), axis, 0)
    out_shape = arr.shape[1:]
    flat = arr.reshape(arr.shape[0], size(out_shape))
    return Tensor(out_shape, tuple(fold_add(D, list(flat[:, j])) for j in range(flat.shape[1])))


DT_ALL = (*IEEE, "exact")


@pytest.mark.parametrize("dtype", DT_ALL)
@given(data=st.data())
def test_ordered_fold0_and_sum_axis_are_spec_folds(dtype: str, data: st.DataObject) -> None:
    D = DTYPE_DOMAIN[dtype]
    shape = data.draw(_shape())
    x = data.draw(_tensor(shape, D))
    ctx = KernelContext(dtype, "ordered")
    xa = from_spec(x, dtype)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    with np.errstate(all="ignore"):
        f0, sa, s_all = ctx.fold0(xa), ctx.sum_axis(xa, axis), ctx.sum_all(xa)
    _same(D, dtype, f0, _fold_oracle(D, x, 0), "fold0")
    _same(D, dtype, sa, _fold_oracle(D, x, axis % len(shape)), "sum_axis")
    _same(D, dtype, s_all, Tensor((), (fold_add(D, x.data),)), "sum_all")


@st.composite
def _unbroadcast_case(draw: Any) -> tuple[Shape, Shape]:
    target = draw(st.lists(st.integers(0, 3), max_size=3).map(tuple))
    g = tuple(draw(st.integers(0, 3)) if d == 1 else d for d in target)
    prefix = draw(st.lists(st.integers(0, 3), max_size=2).map(tuple))
    return (*prefix, *g), target


@pytest.mark.parametrize("dtype", DT_ALL)
@given(data=st.data())
def test_ordered_unbroadcast_is_spec_unbroadcast(dtype: str, data: st.DataObject) -> None:
    D = DTYPE_DOMAIN[dtype]
    gshape, target = data.draw(_unbroadcast_case())
    g = data.draw(_tensor(gshape, D))
    ctx = KernelContext(dtype, "ordered")
    with np.errstate(all="ignore"):
        got = ctx.unbroadcast(from_spec(g, dtype), target)
    _same(D, dtype, got, unbroadcast(D, g, target), "unbroadcast")


@pytest.mark.parametrize("dtype", DT_ALL)
@given(
    data=st.data(),
    m=st.integers(0, 3),
    k=st.integers(0, 6),
    n=st.integers(0, 3),
    batch=st.sampled_from([(), (2,), (1,)]),
)
def test_ordered_matmul_is_the_spec_fold(
    dtype: str, data: st.DataObject, m: int, k: int, n: int, batch: Shape
) -> None:
    D = DTYPE_DOMAIN[dtype]
    a = data.draw(_tensor((*batch, m, k), D))
    b = data.draw(_tensor((*batch, k, n), D))
    ctx = KernelContext(dtype, "ordered")
    with np.errstate(all="ignore"):
        got = ctx.matmul(from_spec(a, dtype), from_spec(b, dtype))
    A = np.empty(len(a.data), dtype=object)
    A[:] = list(a.data)
    A = A.reshape(a.shape)
    B = np.empty(len(b.data), dtype=object)
    B[:] = list(b.data)
    B = B.reshape(b.shape)
    want = []
    for idx in np.ndindex(*batch, m, n):
        *bt, i, j = idx
        want.append(fold_add(D, [D.mul(A[(*bt, i, p)], B[(*bt, p, j)]) for p in range(k)]))
    _same(D, dtype, got, Tensor((*batch, m, n), tuple(want)), "matmul")
