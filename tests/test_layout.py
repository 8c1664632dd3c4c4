"""The layout's invariants, checked on the source tree.

- Layering: `spec` imports nothing from `runtime`, `conformance`, `proofs` or `benchmarks`;
  `runtime` nothing from `conformance`, `proofs` or `benchmarks`; `conformance` nothing from
  `proofs` or `benchmarks` (`proofs` may import `conformance`, never the reverse) — at any
  nesting level (a function-local import counts too).
- No import cycle between modules, counting every import at any nesting level (module
  level, under `if TYPE_CHECKING:`, `if`, `try:`, and inside functions and classes) and the
  family modules each per-family package loads (`spec.ops.load_families`).
- No source module (packages and tests) is over 800 lines.
- No module imports another module's private (`_name`) attribute, and no module of one
  package reaches a private attribute of another package's object by attribute access
  (`IEEEDomain._round`, `module._helper`) or by `setattr`/`getattr` with its name. A test
  (`tests/test_<words>.py`) reaches private names only of the module it tests (one named
  by one of its words), or of one listed in `TEST_PRIVATE_EXCEPTIONS` with its reason.
- One module per op family in every layer, and every op's entry in each layer is
  registered from the module named after the op's family (`OpDef.family`).
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("spec", "runtime", "conformance", "proofs", "benchmarks")
FORBIDDEN = {
    "spec": {"runtime", "conformance", "proofs", "benchmarks"},
    "runtime": {"conformance", "proofs", "benchmarks"},
    "conformance": {"proofs", "benchmarks"},
}
MAX_LINES = 800
# The per-family packages of each layer: (package, module holding the table, table name, the
# op kinds whose families need a module there). The families come from the op table
# (`spec.ops.families_holding`), never from a list written here.
LAYERS = (
    ("spec.ops", "table", "OPS", ("primitive", "composite")),
    ("runtime.kernels", "table", "KERNELS", ("primitive",)),
    ("conformance.bounds", "core", "BOUNDS", ("primitive",)),
    ("conformance.graphs", "core", "BUILDERS", ("primitive", "composite")),
    ("proofs.laws", "core", "LAWS", ("primitive", "composite")),
)
CORE_MODULES = {
    "spec.ops": {"builders", "table", "windows"},
    "runtime.kernels": {"builders", "table"},
    "conformance.bounds": {"balls", "check", "core", "derivatives"},
    "conformance.graphs": {"core", "hard", "values"},
    "proofs.laws": {"checks", "closed_form", "core", "derived"},
}
"""The modules of each per-family package that are not family modules."""


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = p.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            mods[name] = p
    return mods


MODULES = _modules()


def _imports(name: str, tree: ast.AST, *, top_level_only: bool) -> list[tuple[str, str]]:
    """(imported module, imported attribute or '') for each import in the tree."""
    if top_level_only:  # module level, including `if TYPE_CHECKING:` and `try:` blocks
        nodes = [
            n
            for stmt in tree.body  # type: ignore[attr-defined]
            for n in (ast.walk(stmt) if isinstance(stmt, (ast.If, ast.Try)) else [stmt])
        ]
    else:
        nodes = list(ast.walk(tree))
    is_pkg = MODULES[name].name == "__init__.py"
    out: list[tuple[str, str]] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(a.name, "") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out += [(mod, a.name) for a in node.names]
    return out


def _resolve(mod: str, attr: str) -> str | None:
    """The project module an import binds to (a submodule if `attr` names one)."""
    if attr and f"{mod}.{attr}" in MODULES:
        return f"{mod}.{attr}"
    while mod and mod not in MODULES:
        mod = mod.rpartition(".")[0]
    return mod or None


def _trees() -> dict[str, ast.AST]:
    return {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


TREES = _trees()


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layering_is_one_way(layer: str) -> None:
    bad = []
    for name, tree in TREES.items():
        if name.split(".")[0] != layer:
            continue
        for mod, _ in _imports(name, tree, top_level_only=False):
            if mod.split(".")[0] in FORBIDDEN[layer]:
                bad.append(f"{name} imports {mod}")
    assert not bad, "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports, at any nesting level, plus each per-family
    package -> the family modules it loads through `load_families`."""
    from spec.ops import families_holding

    graph: dict[str, set[str]] = defaultdict(set)
    for name, tree in TREES.items():
        graph[name]
        for mod, attr in _imports(name, tree, top_level_only=False):
            target = _resolve(mod, attr)
            if target and target != name:
                graph[name].add(target)
    for package, _, _, kinds in LAYERS:
        graph[package] |= {f"{package}.{f}" for f in families_holding(kinds)}
    return graph


def test_no_import_cycle() -> None:
    assert _cycles(import_graph()) == []


def test_a_function_level_import_counts_in_a_cycle() -> None:
    """`_imports` sees an import inside a function body and inside `if`/`try` blocks."""
    tree = ast.parse(
        "import spec.shape\n"
        "def f():\n    from spec import graph\n"
        "if True:\n    import spec.inline\n"
        "try:\n    import spec.serialize\nexcept ImportError:\n    pass\n"
    )
    got = {_resolve(m, a) for m, a in _imports("spec.tensor", tree, top_level_only=False)}
    assert got == {"spec.shape", "spec.graph", "spec.inline", "spec.serialize"}


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph: dict[str, set[str]] = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_module_over_800_lines() -> None:
    files = [*MODULES.values(), *sorted((ROOT / "tests").rglob("*.py"))]
    long = {
        str(p.relative_to(ROOT)): n
        for p in files
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


MAX_FUNCTION_LINES = 80


def _long_functions(path: Path, root: Path = ROOT) -> list[str]:
    """Each function of the file over `MAX_FUNCTION_LINES` lines (from `def` to its last line,
    nested functions included)."""
    tree = ast.parse(path.read_text())
    return [
        f"{path.relative_to(root)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and n.end_lineno is not None
        and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_no_function_over_80_lines() -> None:
    bad = []
    for pkg in ("spec", "runtime", "conformance", "proofs"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            bad += _long_functions(path)
    assert bad == []


def test_the_long_function_check_counts_lines(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    (tmp_path / "m.py").write_text(f"def short():\n{body[: body.rfind(chr(10))]}\n")
    nested = body.replace("\n", "\n    ")
    (tmp_path / "n.py").write_text(f"class C:\n    def long(self):\n    {nested}\n")
    assert _long_functions(tmp_path / "m.py", tmp_path) == []
    assert _long_functions(tmp_path / "n.py", tmp_path) == ["n.py:2 long (81 lines)"]


def _private_imports(name: str, tree: ast.AST) -> list[str]:
    bad = []
    for mod, attr in _imports(name, tree, top_level_only=False):
        target = _resolve(mod, attr)
        if target and attr.startswith("_") and not attr.startswith("__") and target != name:
            bad.append(f"{name}: from {mod} import {attr}")
    return bad


def test_no_private_name_imported_across_modules() -> None:
    bad = [line for name, tree in TREES.items() for line in _private_imports(name, tree)]
    for path in sorted((ROOT / "tests").glob("*.py")):
        MODULES.setdefault(f"tests.{path.stem}", path)
        bad += _private_imports(f"tests.{path.stem}", ast.parse(path.read_text()))
    assert not bad, "\n".join(bad)


def _bound_names(name: str, tree: ast.AST) -> dict[str, tuple[str, str]]:
    """Each name an import binds, at any nesting level -> (module, attribute or '')."""
    out: dict[str, tuple[str, str]] = {}
    for mod, attr, alias in _import_bindings(name, tree):
        out[alias] = (mod, attr)
    return out


def _import_bindings(name: str, tree: ast.AST) -> list[tuple[str, str, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out.append((a.name, "", a.asname))
                else:
                    out.append((a.name.split(".")[0], "", a.name.split(".")[0]))
        elif isinstance(node, ast.ImportFrom):
            mod = _imports(name, ast.Module([node], []), top_level_only=False)[0][0]
            out += [(mod, a.name, a.asname or a.name) for a in node.names]
    return out


def _owner(obj: object, attr: str) -> str:
    """The module that defines `attr` as seen on `obj` (a module, a class or an instance)."""
    if isinstance(obj, type(sys)):
        return obj.__name__
    cls = obj if isinstance(obj, type) else type(obj)
    for c in cls.__mro__:
        if attr in vars(c):
            return c.__module__
    return cls.__module__


def _attr_targets(tree: ast.AST) -> list[tuple[int, str, ast.AST, str]]:
    """(line, text, object expression, private name) of each `X._name` attribute access and
    each `setattr`/`getattr`/`delattr(X, "_name", ...)` call (`monkeypatch.setattr` too)."""
    out: list[tuple[int, str, ast.AST, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            out.append((node.lineno, ast.unparse(node), node.value, node.attr))
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            f = node.func
            fname = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
            key = node.args[1]
            if fname in ("setattr", "getattr", "delattr") and isinstance(key, ast.Constant):
                if isinstance(key.value, str):
                    text = f"{ast.unparse(node.args[0])}.{key.value}"
                    out.append((node.lineno, text, node.args[0], key.value))
    return [t for t in out if t[3].startswith("_") and not t[3].startswith("__")]


def _private_uses(name: str, tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, text, owner module) of each private name reached on an imported project
    object: `X._private`, `X.y._private` or `setattr(X, "_private", ...)`, where X is an
    imported name (possibly an instance of a project class: `HP._round`, HP an
    `IEEEDomain`); the owner is the project module that defines `_private`."""
    bound = _bound_names(name, tree)
    out = []
    for lineno, text, value, attr in _attr_targets(tree):
        chain = []
        root = value
        while isinstance(root, ast.Attribute):
            chain.append(root.attr)
            root = root.value
        if not (isinstance(root, ast.Name) and root.id in bound):
            continue
        mod, imported = bound[root.id]
        if mod.split(".")[0] not in PACKAGES:
            continue
        try:
            obj: object = importlib.import_module(mod)
            if imported:
                obj = getattr(obj, imported)
            for part in reversed(chain):
                obj = getattr(obj, part)
            owner = _owner(obj, attr)
        except (ImportError, AttributeError):  # an optional peer missing: judge by the import
            owner = mod
        if owner.split(".")[0] in PACKAGES:
            out.append((lineno, text, owner))
    return out


def _private_attributes(name: str, tree: ast.AST) -> list[str]:
    """The private names `name` reaches that another project package defines."""
    package = name.split(".")[0]
    return [
        f"{name}:{lineno}: {text} (from {owner})"
        for lineno, text, owner in _private_uses(name, tree)
        if owner.split(".")[0] != package
    ]


def test_no_private_attribute_reached_across_packages() -> None:
    bad = [line for name, tree in TREES.items() for line in _private_attributes(name, tree)]
    assert not bad, "\n".join(bad)


def test_the_private_attribute_check_sees_attribute_access() -> None:
    tree = ast.parse(
        "from spec.domains import IEEEDomain\nimport runtime.engine as eng\n"
        "from conformance.bounds.core import HP\n"
        "def f(x, mp):\n    mp.setattr(eng.tape, '_first', 1)\n"
        "    return IEEEDomain._round(x) + eng.tape._first + x._fine + HP._round\n"
    )
    got = _private_attributes("conformance.bounds.check", tree)
    assert sorted(g.split(": ", 1)[1] for g in got) == [
        "HP._round (from spec.domains)",
        "IEEEDomain._round (from spec.domains)",
        "eng.tape._first (from runtime.engine.tape)",
        "eng.tape._first (from runtime.engine.tape)",
    ]


TEST_PRIVATE_EXCEPTIONS = {
    ("tests.test_conformance_suite", "lowering._jvp"): "the test plants a JVP bug on the "
    "Session's path only and patches the lowering's per-node JVP rule back to the right one "
    "(`runtime.engine.lower` has no public seam for it)",
    ("tests.test_failure_reports", "rs.Session._rollback"): "the test plants a Session bug "
    "(a failed call no longer rolled back) to show the state machine reports and replays "
    "it; a public switch to disable rollback would be a switch to break the Session",
    **{
        ("tests.test_conformance_throughput", name): "the test bypasses every memo of the "
        "case strategies to show they draw exactly what freshly built ones draw; a public "
        "switch would be a switch to turn the caches off in production"
        for name in (
            "hard._memo",
            "core._sampled",
            "core._const_values",
            "values._TENSOR_LISTS",
            "values._SEEDS",
        )
    },
    ("tests.test_conformance_throughput", "suite_shards._property"): "the test plants "
    "properties with a failing check and points the shard runner's name-to-property "
    "resolver at them, to show merged shards equal the serial run on a failure",
}
"""Private names a test reaches in a module it is not named after, each with its reason."""


def _tested(test: str, owner: str) -> bool:
    """The rule for tests: `tests/test_<w1>_<w2>...py` may reach the private names of a
    module one of whose dotted parts below its top package is one of its words
    (test_cuda_glue -> runtime.cuda, test_proofs_catalogue -> proofs.catalogue)."""
    words = set(test.rpartition(".")[2].removeprefix("test_").split("_"))
    return bool(words & set(owner.split(".")[1:] or owner.split(".")))


def _test_private_uses() -> tuple[list[str], set[tuple[str, str]]]:
    """(the private names tests reach against the rule, the exceptions that were used)."""
    bad, used = [], set()
    for path in sorted((ROOT / "tests").glob("*.py")):
        name = f"tests.{path.stem}"
        MODULES.setdefault(name, path)
        for lineno, text, owner in _private_uses(name, ast.parse(path.read_text())):
            if (name, text) in TEST_PRIVATE_EXCEPTIONS:
                used.add((name, text))
            elif not _tested(name, owner):
                bad.append(f"{name}:{lineno}: {text} (from {owner})")
    return bad, used


def test_tests_reach_private_names_only_of_the_module_they_test() -> None:
    bad, used = _test_private_uses()
    assert bad == []
    assert used == set(TEST_PRIVATE_EXCEPTIONS), "an exception no test needs any more"


def test_the_rule_for_tests_names_the_module_tested() -> None:
    assert _tested("tests.test_probe", "spec.probe")
    assert _tested("tests.test_cuda_glue", "runtime.cuda")
    assert not _tested("tests.test_crmath", "conformance.sweep")
    assert not _tested("tests.test_conformance_suite", "runtime.engine.lower")


@pytest.mark.parametrize(("package", "kinds"), [(p, k) for p, _, _, k in LAYERS])
def test_every_layer_has_one_module_per_family_that_needs_one(
    package: str, kinds: tuple[str, ...]
) -> None:
    """A layer's family modules are exactly those of the families the op table says need
    one there (no dead module of a family that needs none, none missing)."""
    from spec.ops import families_holding

    present = {p.stem for p in (ROOT / package.replace(".", "/")).glob("*.py")}
    present -= {"__init__"} | CORE_MODULES[package]
    assert present == set(families_holding(kinds))


def test_op_families_are_the_documented_ones() -> None:
    from spec.ops import FAMILIES, OPS

    assert {op.family for op in OPS.values()} == set(FAMILIES)
    for name, op in OPS.items():
        assert op.forward.__module__ in (f"spec.ops.{op.family}", "spec.ops.builders"), name


def _derived_entries(package: str) -> set[str]:
    """The entries of a layer's table derived from the op table (no family module writes
    them): the composites' kernels, the math primitives' bounds, the graph builders of
    `DERIVED_ORDER` and the laws of `proofs.laws.DERIVED`."""
    from spec.ops import OPS

    if package == "runtime.kernels":
        return {n for n, op in OPS.items() if op.kind == "composite"}
    if package == "conformance.bounds":
        return {n for n, op in OPS.items() if op.math is not None and op.kind == "primitive"}
    if package == "conformance.graphs":
        from conformance.graphs import DERIVED_ORDER

        return set(DERIVED_ORDER)
    if package == "proofs.laws":
        from proofs.laws import DERIVED

        return set(DERIVED)
    return set()


_PROBE = """
import importlib, json, sys
package, core_name, table = sys.argv[1:4]
core = importlib.import_module(f"{package}.{core_name}")
full = dict(getattr(core, table))
by_module = {}
for family in sys.argv[4:]:
    setattr(core, table, {})
    importlib.reload(importlib.import_module(f"{package}.{family}"))
    by_module[family] = sorted(getattr(core, table))
setattr(core, table, full)
print(json.dumps({"full": sorted(full), "by_module": by_module}))
"""


@pytest.mark.parametrize(("package", "core", "table", "kinds"), LAYERS)
def test_each_op_is_registered_by_its_family_module(
    package: str, core: str, table: str, kinds: tuple[str, ...]
) -> None:
    """Re-running each family module of a layer against an empty table (in a separate
    process) shows exactly which ops it registers: each op of the layer's table of a kind
    the layer writes by hand comes from the module named after its `OpDef.family`, and from
    no other; the other entries (the composites' kernels) are derived from the op table."""
    import json
    import subprocess

    from spec.ops import OPS, families_holding

    out = subprocess.run(
        [sys.executable, "-c", _PROBE, package, core, table, *families_holding(kinds)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    got = json.loads(out.stdout)
    owner: dict[str, list[str]] = defaultdict(list)
    for family, names in got["by_module"].items():
        for name in names:
            owner[name].append(family)
    by_hand = {n for n in got["full"] if OPS[n].kind in kinds}
    unowned = by_hand - set(owner)
    underived = sorted(n for n in unowned if n not in _derived_entries(package))
    assert underived == [], (
        f"{package}: entries neither registered by a family module nor derived from the op "
        f"table: {underived}"
    )
    assert set(owner) <= by_hand, f"{package}: family modules register {set(owner) - by_hand}"
    wrong = {n: fams for n, fams in owner.items() if fams != [OPS[n].family]}
    assert wrong == {}, f"{package}: ops registered outside their family module: {wrong}"


def test_composite_kernels_are_derived_from_the_table() -> None:
    from runtime.kernels import KERNELS
    from spec.ops import OPS

    assert list(KERNELS) == list(OPS)
    for name, op in OPS.items():
        assert KERNELS[name].family == op.family, name
        if op.kind == "composite":
            assert KERNELS[name].saves == "the body's saved values", name
