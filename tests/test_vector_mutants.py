"""The catalogue's mutants of spec.vector are killed: each is applied to a copy of the
package, loaded in place of spec.vector, and a fixed set of cheap cases (random-valued
convolution graphs, a signed-zero chain, rounding near subnormals and ties, tie samples,
hard transcendental arguments) finds a difference from the pure-Python spec.

(The conformance suite kills them as well: its link property compares spec.vector with the
reference on every case.)"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import spec
import spec.domains
import spec.vector
from conformance.graphs.hard import transcendental_hard
from conformance.mutate.catalogue import CATALOGUE, Mutant
from spec.domains import BFLOAT16, BINARY32, FLOAT64, round_rational_to_format
from spec.graph import Graph, GraphBuilder, backprop_all_ctx, eval_jvp
from spec.ops.table import OPS
from spec.tensor import Tensor, TensorPack

ROOT = Path(__file__).resolve().parent.parent
VECTOR_MUTANTS = [m for m in CATALOGUE if m.file.startswith("spec/vector/")]


@contextmanager
def mutated(m: Mutant, tmp: Path) -> Iterator[ModuleType]:
    """spec.vector with the mutant applied, imported from a copy in `tmp`."""
    pkg = tmp / "vector"
    shutil.copytree(ROOT / "spec" / "vector", pkg)
    target = pkg / Path(m.file).name
    src = target.read_text()
    assert src.count(m.snippet) == 1, m.id
    target.write_text(src.replace(m.snippet, m.replacement))
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[:2] == ["spec", "vector"]}
    for k in saved:
        del sys.modules[k]
    attr = spec.vector
    try:
        loc = importlib.util.spec_from_file_location(
            "spec.vector", pkg / "__init__.py", submodule_search_locations=[str(pkg)]
        )
        assert loc is not None and loc.loader is not None
        mod = importlib.util.module_from_spec(loc)
        sys.modules["spec.vector"] = mod
        loc.loader.exec_module(mod)
        yield mod
    finally:
        for k in [k for k in sys.modules if k.split(".")[:2] == ["spec", "vector"]]:
            del sys.modules[k]
        sys.modules.update(saved)
        spec.vector = attr


def _differs(V: ModuleType, D, g: Graph, xs: list[Tensor], pack: TensorPack) -> bool:
    F = V.format_of(D)
    vals, tans = eval_jvp(D, g, xs, pack.tensors[: g.num_inputs])
    cots = backprop_all_ctx(D, g, xs, pack)
    want = (vals.tensors, cots.tensors, tans.tensors)
    got = V.link_sides(D, g, [F.array(x) for x in xs], (), [F.array(t) for t in pack.tensors])
    return any(
        V.first_difference(a, [F.array(t) for t in b]) is not None
        for a, b in zip(got, want, strict=True)
    )


def _random_case(D, g: Graph, seed: int) -> tuple[list[Tensor], TensorPack]:
    rng = np.random.default_rng(seed)
    fmt = spec.vector.format_of(D)
    xs = [fmt.tensor(fmt.cast(fmt.rnd(rng.standard_normal(s)))) for s in g.inputs]
    pack = TensorPack.of([fmt.tensor(fmt.cast(fmt.rnd(rng.standard_normal(s)))) for s in g.shapes])
    return xs, pack


def _conv_graph() -> Graph:
    b = GraphBuilder()
    x, w, bias = b.input((1, 3, 6, 6)), b.input((4, 3, 3, 3)), b.input((4,))
    y = b.node("relu", b.node("conv2d", x, w, bias, padding=(1, 1)))
    y = b.node("max_pool2d", y, kernel_size=(2, 2), stride=(1, 1))
    y = b.node("reshape", b.node("adaptive_avg_pool2d", y, output_size=(1, 1)), shape=(1, 4))
    return b.build()


def _conv(V: ModuleType) -> bool:
    g = _conv_graph()
    return any(_differs(V, D, g, *_random_case(D, g, 1)) for D in (BINARY32, BFLOAT16))


def _zero_chain(V: ModuleType) -> bool:
    """%2 = relu(%1), every seed -0: the unused input %0 gets -0 + 0 = +0 (the node's
    zero addition), %1 gets -0 + relu's cotangent."""
    b = GraphBuilder()
    b.input((2,))
    y = b.input((2,))
    b.node("relu", y)
    g = b.build()
    D = BINARY32
    xs = [Tensor((2,), (D.one(), D.neg(D.one())))] * 2
    pack = TensorPack.of([Tensor(s, (D.from_float(-0.0),) * 2) for s in g.shapes])
    return _differs(V, D, g, xs, pack)


def _rounding(V: ModuleType) -> bool:
    vals = [2.0**-140, 3 * 2.0**-136, 1 + 2**-8 + 2**-30, -1.5 * 2.0**-25, 2.0**-20 * 1.7]
    for D in (BFLOAT16, spec.domains.FLOAT16):
        got = V.format_of(D).rnd(np.array(vals))
        for v, r in zip(vals, got, strict=True):
            want = round_rational_to_format(Fraction(v), D.precision, D.emin, D.emax)
            if Fraction(float(r)) != want:
                return True
    return False


def _ties(V: ModuleType) -> bool:
    for op in ("maximum", "minimum", "reduce_max"):
        for s in OPS[op].samples:
            b = GraphBuilder()
            ids = [b.input(shape) for shape, _ in s.args]
            b.node(op, *ids, **dict(s.attrs))
            g = b.build()
            D = BINARY32
            xs = [Tensor(shape, tuple(_v(D, v) for v in vs)) for shape, vs in s.args]
            pack = TensorPack.of([Tensor(sh, (D.one(),) * int(np.prod(sh))) for sh in g.shapes])
            if _differs(V, D, g, xs, pack):
                return True
    return False


def _v(D, v):
    return D.from_float(v) if isinstance(v, float) else D.from_rational(v)


def _hard(V: ModuleType) -> bool:
    D = FLOAT64
    F = V.format_of(D)
    # hard arguments and ordinary ones (where a platform binary64 function is not always
    # correctly rounded either)
    ordinary = np.random.default_rng(0).uniform(0.1, 5.0, 200)
    x = np.concatenate([np.array(transcendental_hard("float64")), ordinary])
    for name in ("exp", "log", "tanh", "sin", "cos"):
        with np.errstate(all="ignore"):
            got = V.crmath.correctly_rounded(F, name, x)
        want = [float(getattr(D, name)(D.from_float(float(v)))) for v in x]
        if not V.same_arrays(got, np.array(want)).all():
            return True
    return False


CHECKS: tuple[Callable[[ModuleType], bool], ...] = (_rounding, _ties, _zero_chain, _conv, _hard)


def test_the_checks_pass_on_the_real_evaluator() -> None:
    """Without a mutant, none of the kill checks finds a difference (they can fail only
    through a mutant)."""
    assert not any(c(spec.vector) for c in CHECKS)


def test_there_are_vector_mutants() -> None:
    assert len(VECTOR_MUTANTS) >= 8


@pytest.mark.parametrize("m", VECTOR_MUTANTS, ids=lambda m: m.id)
def test_each_vector_mutant_is_killed(m: Mutant, tmp_path: Path) -> None:
    with mutated(m, tmp_path) as V:
        killed = [c.__name__ for c in CHECKS if c(V)]
    assert killed, f"{m.id} survived every check"
