"""Session numerics and PyTorch conveniences: one rounding from Python
ints and Fractions, the float-environment probe at session / trainer / conformance start,
the gradient hook per seed 001, gradient lists with provenance, `torch.matmul`'s 1-D rules
and positional attributes."""

from __future__ import annotations

import argparse
import struct
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import runtime.session.core as session_core
from runtime.session import Session
from runtime.session.gradients import GradientList
from spec import probe
from spec.domains import BFLOAT16, BINARY32, FLOAT16, FLOAT64, round_rational_to_format
from spec.errors import DomainError, HookError, StaleHandleError

FORMATS = {"float64": FLOAT64, "float32": BINARY32, "bfloat16": BFLOAT16, "float16": FLOAT16}
UINT = {"float64": np.uint64, "float32": np.uint32, "bfloat16": np.uint16, "float16": np.uint16}


def oracle_bits(q: Fraction, dtype: str) -> int | None:
    """The correctly rounded bits of q by the integer-arithmetic oracle (independent of
    MPFR and NumPy); None on overflow. Bit layout written out here from the format."""
    D = FORMATS[dtype]
    r = round_rational_to_format(q, D.precision, D.emin, D.emax)
    if isinstance(r, float):
        return None
    sign = 1 if (r < 0 or (r == 0 and q < 0)) else 0
    a = abs(Fraction(r))
    mbits, bias = D.precision - 1, 2 ** (D.ebits - 1) - 1
    top = sign << (D.ebits + mbits)
    if a == 0:
        return top
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    if e < 1 - bias:  # subnormal
        return top | int(a / Fraction(2) ** (1 - bias - mbits))
    return top | ((e + bias) << mbits) | int((a / Fraction(2) ** e - 1) * 2**mbits)


def session_bits(s: Session, x: Any) -> int:
    v = s.get_value(x)
    return int(np.asarray(v).reshape(-1)[0].view(UINT[s.dtype]))


# --------------------------------------------------------------------------- one rounding


def test_golden_int_rounds_once_into_float32() -> None:
    s = Session(dtype="float32")
    assert session_bits(s, s.input(2**54 + 2**30 + 1)) == 0x5A800001
    # through float64 it would be 0x5a800000 (the tie 2**54 + 2**30 rounds to even)
    assert int(np.float32(float(2**54 + 2**30 + 1)).view(np.uint32)) == 0x5A800000
    # the same value as a const, a param and a Python scalar operand of an op
    assert session_bits(s, s.const(2**54 + 2**30 + 1)) == 0x5A800001
    p = s.param([2**54 + 2**30 + 1])
    assert int(p.get().view(np.uint32)[0]) == 0x5A800001
    z = s.input(np.float32(0.0).reshape(()))
    assert session_bits(s, s.add(z, 2**54 + 2**30 + 1)) == 0x5A800001
    q = Fraction(2**54 + 2**30 + 1, 2**80)
    assert session_bits(s, s.mul(s.input(np.float32(1.0).reshape(())), q)) == oracle_bits(
        q, "float32"
    )


_TIE_CASES = [
    # (value, dtype): ties just above an even neighbour, subnormal ties, largest finite
    (Fraction(2**24 + 1) + Fraction(1, 2**40), "float32"),
    (Fraction(2**11 + 1) + Fraction(1, 2**30), "float16"),
    (Fraction(2**8 + 1) + Fraction(1, 2**30), "bfloat16"),
    (Fraction(2**53 + 1) + Fraction(1, 2**60), "float64"),
    (Fraction(3, 2**150), "float32"),  # 1.5 * min subnormal: a tie broken to even (2)
    (Fraction(1, 2**150) + Fraction(1, 2**200), "float32"),  # just above half the min
    (Fraction(1, 2**150), "float32"),  # exactly half the min subnormal: rounds to 0
]


@pytest.mark.parametrize(("q", "dtype"), _TIE_CASES)
def test_ties_and_subnormals_round_once(q: Fraction, dtype: str) -> None:
    s = Session(dtype=dtype)
    want = oracle_bits(q, dtype)
    assert session_bits(s, s.input(q)) == want
    assert session_bits(s, s.input(-q)) == oracle_bits(-q, dtype)


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_overflowing_exact_values_are_refused(dtype: str) -> None:
    D = FORMATS[dtype]
    big = Fraction(2) ** D.emax  # rounds to infinity
    s = Session(dtype=dtype)
    n = len(s.tape)
    for v in (big, -big, int(big), 10**400):
        with pytest.raises(DomainError, match=f"input: .*out of range for {dtype}"):
            s.input(v)
    assert len(s.tape) == n
    # the largest finite value is fine, and a float keeps IEEE overflow to inf
    top = Fraction(2) ** D.emax - Fraction(2) ** (D.emax - D.precision)
    assert session_bits(s, s.input(top)) == oracle_bits(top, dtype)


_exact_values = st.one_of(
    st.integers(min_value=-(2**140), max_value=2**140),
    st.fractions(max_denominator=2**160),
    st.builds(
        lambda m, e: Fraction(m) * Fraction(2) ** e,
        st.integers(min_value=-(2**60), max_value=2**60),
        st.integers(min_value=-1160, max_value=1100),
    ),
    # exact midpoints between neighbours (ties) at random exponents
    st.builds(
        lambda m, e: (Fraction(2 * m + 1) / 2) * Fraction(2) ** e,
        st.integers(min_value=2**52, max_value=2**53),
        st.integers(min_value=-1200, max_value=970),
    ),
)


@given(q=_exact_values, dtype=st.sampled_from(list(FORMATS)), nested=st.booleans())
def test_property_one_rounding_matches_the_oracle(q: Fraction, dtype: str, nested: bool) -> None:
    s = Session(dtype=dtype)
    value: Any = q if isinstance(q, int) or q.denominator != 1 else int(q)
    want = oracle_bits(Fraction(q), dtype)
    arg = [[value, 0.5]] if nested else value  # mixed with a float in one list
    if want is None:
        with pytest.raises(DomainError, match="out of range"):
            s.input(arg)
        return
    assert session_bits(s, s.input(arg)) == want


# --------------------------------------------------------------------------- probe wiring


def _ftz(a: Any, b: Any) -> Any:
    """A stand-in multiply that flushes subnormal results to zero (FTZ hardware)."""
    r = np.multiply(a, b) if isinstance(a, np.ndarray) else a * b
    if isinstance(r, np.ndarray):
        tiny = np.finfo(r.dtype).tiny
        return np.where(np.abs(r) < tiny, np.zeros_like(r), r)
    return 0.0 if abs(r) < 2.0**-1022 else r


@pytest.fixture
def flushed(monkeypatch: pytest.MonkeyPatch) -> None:
    def live() -> None:
        probe.check_float_environment(multiply=_ftz)

    monkeypatch.setattr(session_core, "check_float_environment", live)
    import conformance.cli as cli

    monkeypatch.setattr(cli, "check_float_environment", live)


@pytest.mark.parametrize("kernels", ["ordered", "fast"])
def test_session_start_runs_the_probe(flushed: None, kernels: str) -> None:
    with pytest.raises(probe.FloatEnvironmentError, match="FTZ"):
        Session(dtype="float32", kernels=kernels)
    Session(dtype="exact")  # exact rationals never touch the FPU's subnormal mode


def test_trainer_open_runs_the_probe(flushed: None) -> None:
    from runtime.nn import Linear, Sequential
    from runtime.optim import SGD
    from runtime.trainer import Trainer

    tr = Trainer(Sequential(Linear(1, 1)), optimizer=SGD(0.5), dtype="float32", kernels="ordered")
    with pytest.raises(probe.FloatEnvironmentError, match="numpy float32"):
        tr.open()


def test_conformance_select_runs_the_probe(flushed: None) -> None:
    import conformance.cli as cli

    a = argparse.Namespace(backend="numpy", against=None, dtype="float32", kernels="ordered")
    with pytest.raises(probe.FloatEnvironmentError):
        cli.select(a)


def test_the_wiring_passes_in_an_honest_environment() -> None:
    Session(dtype="float32", kernels="ordered")
    assert struct.pack("<d", 2.0**-1074) != struct.pack("<d", 0.0)


# --------------------------------------------------------------------------- hook (seed 001)


@pytest.mark.parametrize("mode", ["eager", "typed_graph"])
@pytest.mark.parametrize("dtype", ["exact", "float32"])
def test_golden_doubling_hook_on_a_chain_doubles_once(mode: str, dtype: str) -> None:
    s = Session(mode=mode, dtype=dtype, kernels="ordered")
    one: Any = 1 if dtype == "exact" else np.float32(1.0)
    x = s.input([3] if dtype == "exact" else np.array([3.0], dtype=np.float32), requires_grad=True)
    a = s.scale(x, c=1)
    b = s.scale(a, c=1)
    out = s.sum(b)  # x -> a -> b -> out: a chain of 3 nodes after the leaf
    plain = s.backward_dense_all(out, one)
    doubled = s.backward_dense_all_with_hook(out, one, lambda i, g: g * 2)
    for g0, g1 in zip(plain, doubled, strict=True):
        assert np.array_equal(np.asarray(g1), 2 * np.asarray(g0))  # 2x, not 8x
    assert float(np.asarray(doubled[x.id]).reshape(-1)[0]) == 2


def test_hook_sees_the_finished_dense_array_in_id_order() -> None:
    s = Session(dtype="exact")
    x = s.input([1, 2], requires_grad=True)
    k = s.input([5, 5], requires_grad=False)  # frozen: its zero gradient reaches the hook
    y = s.sum(s.mul(x, k))
    seen: list[tuple[int, list[Fraction]]] = []

    def hook(i: int, g: Any) -> Any:
        seen.append((i, [Fraction(v) for v in np.asarray(g).reshape(-1)]))
        return g

    s.backward_dense_all_with_hook(y, 1, hook)
    assert [i for i, _ in seen] == list(range(len(s.tape)))
    assert seen[x.id][1] == [5, 5] and seen[k.id][1] == [0, 0]


def test_exact_hook_returning_floats_is_refused() -> None:
    s = Session(dtype="exact")
    x = s.input([1, 2], requires_grad=True)
    y = s.sum(x)
    with pytest.raises(HookError, match=f"non-exact value for node {x.id}.*float"):
        s.backward_dense_all_with_hook(y, 1, lambda i, g: g * 0.5)
    with pytest.raises(HookError, match="expected shape"):
        s.backward_dense_all_with_hook(y, 1, lambda i, g: np.zeros(3, dtype=object))
    g = s.backward_dense_all_with_hook(y, 1, lambda i, g: g * Fraction(1, 3))
    assert [Fraction(v) for v in g[x.id]] == [Fraction(1, 3)] * 2


# --------------------------------------------------------------------------- gradient lists


def test_gradient_lists_carry_owner_and_generation() -> None:
    s, t = Session(dtype="float32"), Session(dtype="float32")
    p = s.param(np.array([1.0, 2.0], dtype=np.float32))
    loss = s.sum(s.use(p))
    grads = s.backward_scalar_dense_all(loss)
    assert isinstance(grads, GradientList) and isinstance(grads, list)
    assert (grads.owner, grads.generation, len(grads)) == (s.owner, 0, len(s.tape))
    assert np.array_equal(grads[0], np.ones(2, dtype=np.float32))  # indexes like a list
    before = p.get().tobytes()
    # foreign: a gradient list of another session with the same tape layout
    q = t.param(np.array([1.0, 2.0], dtype=np.float32))
    foreign = t.backward_scalar_dense_all(t.sum(t.use(q)))
    with pytest.raises(StaleHandleError, match="foreign gradient list"):
        s.sgd_step_all(0.5, foreign)
    # stale: the same session after reset_tape, with an identical new tape
    s.reset_tape()
    s.sum(s.use(p))
    with pytest.raises(StaleHandleError, match="stale gradient list from generation 0"):
        s.sgd_step_all(0.5, grads)
    assert p.get().tobytes() == before
    s.sgd_step_all(0.5, list(grads))  # a plain list carries no provenance: validated, applied
    assert p.get().tolist() == [0.5, 1.5]


# --------------------------------------------------------------------------- torch.matmul


_MATMUL_SHAPES = [
    ((3,), (3, 4)),  # vector . matrix
    ((2, 3), (3,)),  # matrix . vector
    ((3,), (3,)),  # vector . vector
    ((3,), (5, 3, 4)),  # vector . batched matrix
    ((5, 2, 3), (3,)),  # batched matrix . vector
    ((2, 1, 2, 3), (3,)),
]


def _numpy_reference(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """sum(matmul(a, b)) and its gradients, from NumPy alone: np.matmul has torch.matmul's
    1-D rules, and the sum is linear in each operand, so d/da[i] = sum(matmul(e_i, b))
    exactly (small integers in binary64)."""
    out = np.matmul(a, b)

    def grad(x: np.ndarray, f: Any) -> np.ndarray:
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[i] = 1.0
            g[i] = np.sum(f(e))
        return g

    return out, grad(a, lambda e: np.matmul(e, b)), grad(b, lambda e: np.matmul(a, e))


def _torch_reference(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    torch = pytest.importorskip("torch", reason="the torch package is not installed")
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    tout = torch.matmul(ta, tb)
    tout.sum().backward()
    return tout.detach().numpy(), ta.grad.numpy(), tb.grad.numpy()


@pytest.mark.parametrize("reference", [_numpy_reference, _torch_reference])
@pytest.mark.parametrize(("sa", "sb"), _MATMUL_SHAPES)
def test_matmul_with_1d_operands_matches_torch(
    sa: tuple[int, ...], sb: tuple[int, ...], reference: Any
) -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(-4, 5, size=sa).astype(np.float64)
    b = rng.integers(-4, 5, size=sb).astype(np.float64)
    want, want_a, want_b = reference(a, b)
    for mode in ("eager", "typed_graph"):
        s = Session(mode=mode, dtype="float64", kernels="ordered")
        x, y = s.input(a, requires_grad=True), s.input(b, requires_grad=True)
        out = x @ y
        assert out.shape == tuple(np.shape(want))
        assert np.array_equal(s.get_value(out), want)
        g = s.backward_scalar_dense_all(s.sum(out))
        assert np.array_equal(g[x.id], want_a) and np.array_equal(g[y.id], want_b)
        if mode == "typed_graph":
            assert s.check_link().ok


def test_matmul_1d_mismatch_leaves_the_tape_unchanged() -> None:
    s = Session(dtype="float64")
    x, y = s.input(np.ones(3)), s.input(np.ones((4, 2)))
    n = len(s.tape)
    with pytest.raises(Exception, match="matmul"):
        s.matmul(x, y)
    assert len(s.tape) == n


# --------------------------------------------------------------------------- positional attrs


def test_positional_attributes_like_pytorch() -> None:
    s = Session(dtype="exact")
    x = s.input([[1, 2, 3], [4, 5, 6]])
    v = s.input([1, 2, 3])
    cases = [
        (s.reshape(x, (3, 2)), s.reshape(x, shape=(3, 2))),
        (s.broadcast_to(v, (2, 3)), s.broadcast_to(v, shape=(2, 3))),
        (s.sum(x, 0), s.reduce_sum(x, axis=0)),
        (s.sum(x, dim=1), s.reduce_sum(x, axis=1)),
        (s.mean(x, 1), s.reduce_mean(x, axis=1)),
        (s.scale(x, 3), s.scale(x, c=3)),
        (s.clamp(x, 2, 5), s.clamp(x, lo=2, hi=5)),
        (s.slice(x, 0, 1), s.slice(x, start=0, stop=1)),
        (s.reduce_max(x, 1), s.reduce_max(x, axis=1)),
    ]
    for got, want in cases:
        assert got.shape == want.shape
        assert s.get_value(got).tolist() == s.get_value(want).tolist()
    assert s.get_value(s.sum(x, 0)).tolist() == [5, 7, 9]


# --------------------------------------------------------------------------- linear check_link


def _dense_backprop_all(D: Any, g: Any, xs: Any, seed: Any, env: Any = ()) -> list[Any]:
    """The definition of backprop_all_ctx, written out densely (quadratic): every node adds
    its dense VJP to every earlier value."""
    from spec.graph import eval_graph, node_vjp_dense
    from spec.tensor import Tensor

    vals = eval_graph(D, g, xs, env).tensors
    ct = list(seed.tensors)
    for k in range(len(g.nodes) - 1, -1, -1):
        idx = g.num_inputs + k
        contrib = node_vjp_dense(D, g.nodes[k], g.shapes[:idx], vals, ct[idx], env)
        for j in range(idx):
            ct[j] = Tensor(
                ct[j].shape,
                tuple(D.add(p, q) for p, q in zip(ct[j].data, contrib[j].data, strict=True)),
            )
    return ct


@pytest.mark.parametrize("domain", [BINARY32, FLOAT16, "rational"])
def test_linear_backprop_all_ctx_equals_the_dense_definition(domain: Any) -> None:
    from hypothesis import given as given_

    from conformance.graphs.values import graph_cases
    from spec.domains import RATIONAL
    from spec.graph import backprop_all_ctx

    D = RATIONAL if domain == "rational" else domain

    @given_(case=graph_cases(D, specials=D is not RATIONAL, max_nodes=8))
    def check(case: Any) -> None:
        g, xs, seed = case
        try:
            want = _dense_backprop_all(D, g, xs, seed)
        except Exception as e:  # a precondition (e.g. log of a negative) refuses both
            with pytest.raises(type(e)):
                backprop_all_ctx(D, g, xs, seed)
            return
        got = backprop_all_ctx(D, g, xs, seed).tensors
        assert all(a.same(D, b) for a, b in zip(got, want, strict=True))

    check()


def test_check_link_cost_is_linear_in_the_tape() -> None:
    """Counted, not timed: the spec side performs a number of scalar additions linear in
    the number of ops (the dense definition would need one per earlier value per node)."""
    from spec.domains import BINARY32 as D32

    counts = []
    for n in (50, 100, 200):
        s = Session(mode="typed_graph", dtype="float32", kernels="ordered")
        x = s.input(np.array([1.0, -0.0], dtype=np.float32), requires_grad=True)
        y = x
        for i in range(n):
            y = s.add(y, x) if i % 2 else s.scale(y, c=1)
        calls = [0]
        orig = type(D32).add

        def counting(self: Any, a: Any, b: Any, orig: Any = orig, calls: Any = calls) -> Any:
            calls[0] += 1
            return orig(self, a, b)

        type(D32).add = counting  # type: ignore[method-assign]
        try:
            assert s.check_link().ok
        finally:
            type(D32).add = orig  # type: ignore[method-assign]
        counts.append(calls[0])
    # doubling the ops at most doubles the additions (+ a small constant), not quadruples
    assert counts[1] <= 2 * counts[0] + 64 and counts[2] <= 2 * counts[1] + 64, counts
