"""Graph-level theorems, checked over every graph of a bounded grammar with symbolic inputs.

Theorems (see `_DEFS` for the statements):
`link.backward_dense_from_lower_eq_backprop_all_ctx`, `link.lower_values_eq_eval_graph`,
`graph.backprop_correct`, `tape.lowered_zero_preserving`,
`tape.backward_dense_all_eq_from_one_hot`.

Invariants:
- One *sweep* walks `proofs.enumeration.GRAMMARS[mode]` (mode "quick" or "full") and, per
  graph, computes the requested *parts* (one per theorem) with fresh sympy symbols as
  inputs x, tangents dx and seeds (one full seed over every value); the runtime side runs
  the real runtime code, `runtime.engine.lower.lower(g, x, (), dtype="symbolic",
  kernels="ordered")`. Entries are equal when they are the same sympy expression, or when
  their difference expands to 0.
- A sweep's results are cached in the run's `CheckContext` and computed once for all the
  graph theorems selected in that run. With `jobs > 1` graphs are checked by worker
  processes; results are gathered in enumeration order, so counts and details do not
  depend on `jobs`.
- A check never raises for a failing graph: the part fails and the first failures are
  reported with the graph's text.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy
from sympy import QQ
from sympy.polys.polyerrors import CoercionFailed
from sympy.polys.rings import ring

from runtime.backends import from_spec, to_spec
from runtime.engine.lower import lower
from runtime.engine.tape import ZERO_REST
from spec.domains import SYMBOLIC
from spec.graph import backprop_all_ctx, backprop_ctx, eval_graph, format_graph, jvp_ctx
from spec.ops import OPS
from spec.tensor import Tensor, TensorPack, dot_list

from .decide import symbols
from .enumeration import GRAMMARS, GraphSpec, count_tier, enumerate_tier, grammar_summary
from .opaque_ops import OPAQUE_TIERS, count_shapes, sweep_opaque, tiers_summary
from .records import CheckContext, CheckResult, Scope, Theorem
from .witnesses import graph_witnesses

__all__ = ["PARTS", "TORCHLEAN_LINK_NAME", "check_graph", "sweep", "theorems"]

S = SYMBOLIC
PARTS = ("link", "values", "adjoint", "zero", "onehot")
_MAX_FAILURES = 5
_CHUNK = 32
LINK_PROOF = os.path.join(os.path.dirname(__file__), "link_theorem.md")


# --------------------------------------------------------------------------- per graph


def _same(p: Any, q: Any) -> bool:
    p, q = sympy.sympify(p), sympy.sympify(q)
    return p == q or _poly_equal(p, q)


def _poly_equal(p: Any, q: Any) -> bool:
    """p = q as polynomials over ℚ (canonical sparse forms), or by `expand` when either side
    is not a polynomial in its symbols."""
    gens = sorted(p.free_symbols | q.free_symbols, key=lambda s: s.name)
    if gens:
        try:
            R = ring(gens, QQ)[0]
            return bool(R.from_expr(p) == R.from_expr(q))
        except (ValueError, CoercionFailed):
            pass
    return bool(sympy.expand(p - q) == 0)


def _compare(got: Sequence[Tensor], want: Sequence[Tensor], what: str) -> tuple[int, str | None]:
    """(entries compared, first mismatch)."""
    n = 0
    if len(got) != len(want):
        return 0, f"{what}: {len(got)} values, expected {len(want)}"
    for j, (a, b) in enumerate(zip(got, want, strict=True)):
        if a.shape != b.shape:
            return n, f"{what} %{j}: shape {a.shape}, expected {b.shape}"
        for k, (p, q) in enumerate(zip(a.data, b.data, strict=True)):
            n += 1
            if not _same(p, q):
                return n, f"{what} %{j}[{k}]: {sympy.sstr(p)} != {sympy.sstr(q)}"
    return n, None


def _is_zero_array(a: Any) -> bool:
    return all(sympy.sympify(v) == 0 for v in np.asarray(a).reshape(-1))


class _Graph:
    """One graph with symbolic inputs and seeds; spec and runtime results computed once."""

    def __init__(self, gs: GraphSpec) -> None:
        self.g = g = gs.build()
        self.xs = [symbols(f"x{i}", s) for i, s in enumerate(g.inputs)]
        self.seed = TensorPack.of([symbols(f"s{j}", s) for j, s in enumerate(g.shapes)])
        self._all: TensorPack | None = None
        self._bp: TensorPack | None = None
        self._tape: Any = None

    @property
    def backprop_all(self) -> TensorPack:
        if self._all is None:
            self._all = backprop_all_ctx(S, self.g, self.xs, self.seed)
        return self._all

    @property
    def backprop(self) -> TensorPack:
        if self._bp is None:
            self._bp = backprop_ctx(S, self.g, self.xs, self.seed)
        return self._bp

    @property
    def tape(self) -> Any:
        if self._tape is None:
            self._tape = lower(
                self.g,
                [from_spec(x, "symbolic") for x in self.xs],
                (),
                dtype="symbolic",
                kernels="ordered",
            )
        return self._tape


def _link(G: _Graph) -> tuple[bool, int, str | None]:
    got = G.tape.backward_dense_from([from_spec(t, "symbolic") for t in G.seed.tensors])
    n, msg = _compare([to_spec(a, "symbolic") for a in got], G.backprop_all.tensors, "cotangent")
    return msg is None, n, msg


def _values(G: _Graph) -> tuple[bool, int, str | None]:
    want = eval_graph(S, G.g, G.xs).tensors
    n, msg = _compare([to_spec(nd.value, "symbolic") for nd in G.tape.nodes], want, "value")
    return msg is None, n, msg


def _adjoint(G: _Graph) -> tuple[bool, int, str | None]:
    dxs = TensorPack.of([symbols(f"d{i}", s) for i, s in enumerate(G.g.inputs)])
    lhs = sympy.sympify(dot_list(S, jvp_ctx(S, G.g, G.xs, dxs.tensors), G.seed))
    rhs = sympy.sympify(dot_list(S, dxs, G.backprop))
    if _same(lhs, rhs):
        return True, 1, None
    return False, 1, f"<jvp, seed> - <dx, backprop> = {sympy.sstr(sympy.expand(lhs - rhs))}"


def _zero(G: _Graph) -> tuple[bool, int, str | None]:
    tape, n = G.tape, 0
    for i, node in enumerate(tape.nodes):
        if node.backward is None:
            continue
        n += 1
        for pid, c in node.backward(tape.ctx.zeros(tuple(node.value.shape))):
            if pid == ZERO_REST:  # zeros for every other earlier id: zero by definition
                continue
            if not _is_zero_array(c):
                return (
                    False,
                    n,
                    (
                        f"node {i} ({node.name}) maps a zero cotangent to a nonzero "
                        f"contribution for %{pid}"
                    ),
                )
    return True, n, None


def _onehot(G: _Graph) -> tuple[bool, int, str | None]:
    tape, n = G.tape, 0
    seeds = [from_spec(t, "symbolic") for t in G.seed.tensors]
    zeros = [tape.ctx.zeros(tuple(nd.value.shape)) for nd in tape.nodes]
    for o in range(len(tape.nodes)):
        a = tape.backward_dense_all(o, seeds[o])
        b = tape.backward_dense_from([seeds[o] if j == o else z for j, z in enumerate(zeros)])
        k, msg = _compare(
            [to_spec(v, "symbolic") for v in a],
            [to_spec(v, "symbolic") for v in b],
            f"out %{o}: gradient",
        )
        n += k
        if msg:
            return False, n, msg
    return True, n, None


_PART_FNS = {
    "link": _link,
    "values": _values,
    "adjoint": _adjoint,
    "zero": _zero,
    "onehot": _onehot,
}


def check_graph(gs: GraphSpec, parts: frozenset[str]) -> dict[str, tuple[bool, int, str | None]]:
    """The requested parts for one graph: part -> (ok, entries compared, first mismatch)."""
    G = _Graph(gs)
    return {p: _PART_FNS[p](G) for p in PARTS if p in parts}


def _work(job: tuple[int, GraphSpec, frozenset[str]]) -> tuple[int, dict[str, Any]]:
    i, gs, parts = job
    try:
        return i, check_graph(gs, parts)
    except Exception as e:  # a crash on one graph fails every requested part for it
        msg = f"raised {type(e).__name__}: {e}"
        return i, dict.fromkeys(parts, (False, 0, msg))


# --------------------------------------------------------------------------- the sweep


@dataclass
class _Agg:
    graphs: int = 0
    passed: int = 0
    entries: int = 0
    failures: list[dict[str, Any]] | None = None

    def add(self, gs: GraphSpec, r: tuple[bool, int, str | None]) -> None:
        ok, n, msg = r
        self.graphs += 1
        self.passed += ok
        self.entries += n
        if not ok:
            self.failures = self.failures or []
            if len(self.failures) < _MAX_FAILURES:
                self.failures.append({"graph": format_graph(gs.build()), "mismatch": msg})


def _jobs(specs: Iterable[GraphSpec], parts: frozenset[str]) -> Iterable[Any]:
    for i, gs in enumerate(specs):
        yield i, gs, parts


def sweep(ctx: CheckContext, parts: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Run (or fetch from the run's cache) the sweep for the requested parts; returns per
    part the aggregate counts over every graph of every tier of the mode's grammar."""
    mode = "quick" if ctx.quick else "full"
    cache: dict[str, dict[str, Any]] = ctx.cache.setdefault(("graph_sweep", mode), {})
    # compute, in one pass, every part that this run's selected theorems will ask for
    wanted = frozenset(parts) | frozenset(_selected_parts(ctx.selected))
    todo = frozenset(p for p in wanted if p not in cache)
    if todo:
        tiers = GRAMMARS[mode]
        aggs = {p: _Agg() for p in todo}
        tier_counts: dict[str, dict[str, int]] = {}
        specs: list[GraphSpec] = []
        for t in tiers:
            ts = list(enumerate_tier(t))
            tier_counts[t.name] = {str(k): v for k, v in count_tier(t).items()}
            specs.extend(ts)
        results = _run(ctx, specs, todo)
        for gs, res in zip(specs, results, strict=True):
            for p in todo:
                aggs[p].add(gs, res[p])
        for p in todo:
            a = aggs[p]
            cache[p] = {
                "graphs": a.graphs,
                "passed": a.passed,
                "failed": a.graphs - a.passed,
                "entries": a.entries,
                "failures": a.failures or [],
                "tiers": [t.describe() for t in tiers],
                "graphs_per_tier_and_size": tier_counts,
            }
    return {p: cache[p] for p in parts}


def _run(ctx: CheckContext, specs: list[GraphSpec], parts: frozenset[str]) -> list[Any]:
    results: list[Any] = [None] * len(specs)
    if ctx.jobs <= 1 or len(specs) < 4 * _CHUNK:
        for i, gs in enumerate(specs):
            results[i] = _work((i, gs, parts))[1]
            if (i + 1) % 256 == 0:
                ctx.report("graphs", i + 1, len(specs))
        return results
    mp = multiprocessing.get_context("fork")
    with mp.Pool(ctx.jobs) as pool:
        for k, (i, r) in enumerate(
            pool.imap_unordered(_work, _jobs(specs, parts), chunksize=_CHUNK)
        ):
            results[i] = r
            if (k + 1) % 256 == 0:
                ctx.report("graphs", k + 1, len(specs))
    return results


# --------------------------------------------------------------------------- theorems


@dataclass(frozen=True)
class _GraphCheck:
    """A picklable check: passes when every graph passes every part in `parts`."""

    parts: tuple[str, ...]
    written_proof: bool = False
    opaque: bool = False

    def __call__(self, ctx: CheckContext) -> CheckResult:
        res = sweep(ctx, self.parts)
        first = res[self.parts[0]]
        counts = {"graphs": first["graphs"]}
        ok = True
        details: dict[str, Any] = {
            "grammar": first["tiers"],
            "graphs_per_tier_and_size": first["graphs_per_tier_and_size"],
            "max_nodes": max(t["max_nodes"] for t in first["tiers"]),
        }
        for p in self.parts:
            r = res[p]
            counts[f"{p}_passed"] = r["passed"]
            counts[f"{p}_failed"] = r["failed"]
            counts[f"{p}_entries"] = r["entries"]
            ok = ok and r["failed"] == 0 and r["graphs"] > 0
            if r["failures"]:
                details[f"{p}_failures"] = r["failures"]
        counts["passed"] = min(res[p]["passed"] for p in self.parts)
        counts["failed"] = max(res[p]["failed"] for p in self.parts)
        if self.opaque:
            op = sweep_opaque("quick" if ctx.quick else "full", ctx.jobs, ctx.report)
            counts["graphs"] += op["graphs"]
            counts["passed"] += op["passed"]
            counts["failed"] += op["failed"]
            counts.update({f"opaque_{k}": op[k] for k in ("graphs", "passed", "failed", "entries")})
            details["opaque_graphs_per_tier_and_values"] = op["tiers"]
            if op["failures"]:
                details["opaque_failures"] = op["failures"]
            ok = ok and op["failed"] == 0 and op["graphs"] > 0
        if self.written_proof:
            proof_ok, note = _written_proof_ok()
            details["written_proof"] = note
            ok = ok and proof_ok
        return CheckResult(ok, counts, details)


_PROOF_ANCHORS = (
    "Invariant",
    "compile_aux_data",
    "existing + new",
    "node_vjp_dense",
    "Assumptions",
    "backward_dense_from",
    "backprop_all_ctx",
)


def _written_proof_ok() -> tuple[bool, str]:
    try:
        with open(LINK_PROOF, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        return False, f"proofs/link_theorem.md unreadable: {e}"
    missing = [a for a in _PROOF_ANCHORS if a not in text]
    if missing:
        return False, f"proofs/link_theorem.md lacks sections/terms {missing}"
    return True, "proofs/link_theorem.md (hashed in the certificate's sources)"


@dataclass(frozen=True)
class _GraphTheorem:
    name: str
    parts: tuple[str, ...]
    proof: bool
    statement: str
    formula: str
    aliases: tuple[str, ...] = ()


TORCHLEAN_LINK_NAME = "backwardDenseFrom_compileAuxData_eq_backpropAllCtx"
"""The name TorchLean cites the link theorem under (an alias of
`link.backward_dense_from_lower_eq_backprop_all_ctx`)."""

_DEFS = (
    _GraphTheorem(
        "link.backward_dense_from_lower_eq_backprop_all_ctx",
        ("link",),
        True,
        "The link theorem: for a graph g over inputs x with environment d and any full seed "
        "over Γ ++ ss, the runtime's backward_dense_from(lower(g, x, d), seed) equals the "
        "spec's backprop_all_ctx(g, x, d, seed), one cotangent per value. Written induction "
        "proof in proofs/link_theorem.md, assuming each kernel's VJP equals its spec rule's "
        "VJP (K2). Machine evidence: (a) every graph shape of the opaque-op grammar with "
        "uninterpreted ops whose forward, JVP and VJP are opaque sympy functions shared by "
        "spec and runtime (an identity of the free term algebra, so it holds for every "
        "interpretation of the ops, in particular every op of the table where (K2) holds), "
        "and (b) every graph of the concrete grammar; both run the real runtime code "
        "(lower and backward_dense_from over symbolic object arrays, ordered kernels).",
        "backward_dense_from(lower(g, x, d), seed) = backprop_all_ctx(g, x, d, seed)",
        aliases=(TORCHLEAN_LINK_NAME,),
    ),
    _GraphTheorem(
        "link.lower_values_eq_eval_graph",
        ("values",),
        False,
        "The values recorded on the lowered tape equal the spec's eval_graph, value by value "
        "(inputs and intermediates).",
        "[node.value for node in lower(g, x, d).nodes] = eval_graph(g, x, d)",
    ),
    _GraphTheorem(
        "graph.backprop_correct",
        ("adjoint",),
        False,
        "Adjointness of reverse mode: for every graph of the grammar, symbolic inputs x, "
        "input tangents dx and a full seed over every value, dot_list(jvp_ctx(g, x, dx), "
        "seed) = dot_list(dx, backprop_ctx(g, x, seed)). (It follows from the per-op adjoint "
        "laws by the induction of proofs/link_theorem.md §5.)",
        "⟨jvp_ctx(g, x, dx), seed⟩ = ⟨dx, backprop_ctx(g, x, seed)⟩",
    ),
    _GraphTheorem(
        "tape.lowered_zero_preserving",
        ("zero",),
        False,
        "Every lowered tape of the grammar is zero-preserving: each node's backward maps a "
        "zero cotangent to zero contributions (checked symbolically for every node of every "
        "lowered graph of the grammar, at symbolic values). It holds because every kernel "
        "VJP of the grammar is linear in the cotangent; a kernel VJP with an affine term "
        "breaks it (the witness).",
        "∀ i. backward_i(0) = [(j, 0) ...]",
    ),
    _GraphTheorem(
        "tape.backward_dense_all_eq_from_one_hot",
        ("zero", "onehot"),
        True,
        "On a zero-preserving tape (every node's backward maps a zero cotangent to zero "
        "contributions), backward_dense_all(out, seed) = backward_dense_from(one_hot(out, "
        "seed)) for every id out. Written argument in proofs/link_theorem.md §6 (exact "
        "domains); checked for every id of every lowered graph of the grammar, together with "
        "the zero-preservation hypothesis.",
        "zero_preserving(tape) → backward_dense_all(out, s) = backward_dense_from(e_out ⊗ s)",
    ),
)
"""The graph-level theorems as data: name, the sweep parts it needs, whether a written proof
backs it, its statement and its formula."""

_THEOREM_PARTS = {d.name: d.parts for d in _DEFS}


def _selected_parts(names: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for n in names:
        out.update(_THEOREM_PARTS.get(n, ()))
    return out


def _scope(ops: Sequence[str], graphs: str) -> Scope:
    return Scope(
        tuple(ops),
        ("symbolic",),
        "Γ from the grammar: (), (2,), (2, 2) and the pairs [(), (2,)], [(2,), (2, 2)]",
        graphs,
    )


GRAPH_GROUP = "graph"
_TIME_LIMITS = (120.0, 900.0)
"""Per theorem (quick, full); the first graph theorem of a run computes the shared sweep."""


def theorems() -> list[Theorem]:
    """The graph-level theorems of `_DEFS`, with their bounds computed from the grammars."""
    ops = sorted({o.op for t in GRAMMARS["full"] for o in t.ops})
    grammar = f"full: {grammar_summary('full')}; quick: {grammar_summary('quick')}"
    counts = {m: sum(sum(count_tier(t).values()) for t in GRAMMARS[m]) for m in ("quick", "full")}
    bounds = (
        f"{counts['full']} graphs full, {counts['quick']} quick; N ≤ "
        f"{max(t.max_nodes for t in GRAMMARS['full'])} nodes, grammar ops {', '.join(ops)}"
    )
    opaque = {
        m: sum(sum(count_shapes(t).values()) for t in OPAQUE_TIERS[m]) for m in ("quick", "full")
    }
    link_bounds = (
        f"opaque ops: {opaque['full']} graphs full, {opaque['quick']} quick (full: "
        f"{tiers_summary('full')}); concrete ops: {bounds}"
    )
    graphs = f"every graph of the grammar ({grammar}); environment d = () (no env ops)"
    link_graphs = (
        "every op of the table, on every graph shape of the opaque-op grammar (full: "
        f"{tiers_summary('full')}; quick: {tiers_summary('quick')}) with uninterpreted ops of "
        "arity 1-3 (forward, JVP, VJP opaque sympy functions), given (K2) per op, checked by "
        f"link.kernels_eq_spec_rules on each op's law cases; plus {graphs}"
    )
    witnesses = graph_witnesses()
    all_ops = sorted(OPS)
    out = []
    for d in _DEFS:
        name, proof = d.name, d.proof
        link = name.startswith("link.backward_dense_from")
        evidence = ("written proof", "bounded enumeration") if proof else ("bounded enumeration",)
        out.append(
            Theorem(
                name=name,
                statement=d.statement,
                formula=d.formula,
                scope=_scope(all_ops if link else ops, link_graphs if link else graphs),
                evidence=evidence,
                check=_GraphCheck(d.parts, written_proof=proof, opaque=link),
                status="checked",
                sources=("spec", "runtime", "proofs"),
                references=("proofs/link_theorem.md",) if proof else (),
                bounds=link_bounds if link else bounds,
                group=GRAPH_GROUP,
                time_limit=_TIME_LIMITS,
                witness=witnesses[name],
                aliases=d.aliases,
            )
        )
    return out
