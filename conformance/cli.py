"""The parts of `python -m conformance`: parse the flags, choose the properties, run them,
report.

Invariants:
- Flags, defaults, help texts, printed lines and exit codes are those of the command:
  0 when every property passed, 1 when one failed (or a replayed reproducer fails), 2 when
  the backend, reference backend or dtypes cannot be used (`TorchLeanError` from `select`,
  printed as `python -m conformance: <message>` on stderr).
- Flags are checked by the parser (exit 2 with argparse's message on one line):
  `--dtype` names, non-empty `--backend` / `--against`, and counts: `--max-examples` >= 1,
  `--per-op` >= 0 and `--session-examples` >= 0 (0 skips that part); the `--report`
  prefix's directory must exist and be writable, and `--html DIR` be a directory or one
  that can be created, both checked by `select` before anything runs; a run that tested
  0 cases fails (exit 1, a `python -m conformance:` line on stderr).
- `--replay FILE` takes the backend from `--backend` (and the reference backend from
  `--against`) only; the file is validated by `conformance.reproducer` first, and a file
  naming other backends, or malformed in any way, is one `python -m conformance: <message>`
  line on stderr and exit 2; nothing the file names is imported.
- Output order: the stderr note (Session machine skipped off NumPy), the progress bar
  (stderr, only on a terminal), then on stdout the table, each failure with its graph and
  reproducer, and the summary line; the JSON and Markdown reports are written before the
  summary line is printed; with `--html DIR` the HTML report (`conformance.html`) is
  rendered from the JSON report just written, and its path joins the summary line.
- The JSON report's meta records the spec version, the machine and the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from runtime.backends import Backend, get_backend
from spec.errors import TorchLeanError
from spec.probe import check_float_environment
from spec.report_page import machine, page_dir_problem
from spec.version import __version__ as SPEC_VERSION

from .distributed import AUTO, add_cluster_arguments, run_sharded, sharded
from .html.suite_page import write_suite_html
from .reproducer import ReproducerError, read_json, validate, validate_session_machine
from .suite import (
    IEEE_DTYPES,
    Property,
    Row,
    default_properties,
    planned_cases,
    replay,
    run_properties,
    write_reports,
)

__all__ = [
    "DEFAULT_MAX_EXAMPLES",
    "DEFAULT_REPORT",
    "DESCRIPTION",
    "DTYPES",
    "OneLineParser",
    "add_engine_arguments",
    "add_html_arguments",
    "backend_name",
    "build_parser",
    "check_html_dir",
    "check_report_path",
    "count_arg",
    "dtype_list",
    "engine_mode",
    "parse_args",
    "replay_file",
    "report",
    "run",
    "run_rows",
    "select",
]

DEFAULT_MAX_EXAMPLES = 60
"""Cases per property over all ops when `--max-examples` is not given."""

DESCRIPTION = "`python -m conformance`: run the conformance suite and write its report."
DEFAULT_REPORT = "conformance-report"


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:  # run from a source tree on PYTHONPATH
        return "not installed"


def _progress_bar(total: int):  # type: ignore[no-untyped-def]
    from tqdm import tqdm

    return tqdm(
        total=total, file=sys.stderr, disable=not sys.stderr.isatty(), unit="case", leave=False
    )


def count_arg(low: int) -> Any:
    """An argparse type: an int >= `low`."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {v}")
        return v

    parse.__name__ = f"int >= {low}"
    return parse


DTYPES = ("exact", *IEEE_DTYPES)


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors as one line (`prog: error: message`) and exit 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def dtype_list(text: str) -> str:
    """An argparse type: `all` or a comma list of `DTYPES`."""
    if text == "all":
        return text
    bad = [d for d in text.split(",") if d not in DTYPES]
    if bad or not text:
        raise argparse.ArgumentTypeError(
            f"unknown dtype(s) {', '.join(map(repr, bad or [text]))}; expected all or a "
            f"comma list of {', '.join(DTYPES)}"
        )
    return text


def backend_name(text: str) -> str:
    """An argparse type: a non-empty backend name without spaces."""
    if not text.strip() or text != text.strip():
        raise argparse.ArgumentTypeError(
            f"expected a backend name (numpy, cupy, module or module:attr), got {text!r}"
        )
    return text


def check_report_path(prefix: str) -> None:
    """`TorchLeanError` unless PREFIX.json and PREFIX.md can be written (the directory
    exists and is writable, neither name is a directory)."""
    d = os.path.dirname(prefix) or "."
    if not os.path.isdir(d):
        raise TorchLeanError(f"--report {prefix!r}: the directory {d!r} does not exist")
    if not os.access(d, os.W_OK | os.X_OK):
        raise TorchLeanError(f"--report {prefix!r}: the directory {d!r} is not writable")
    for ext in (".json", ".md"):
        if os.path.isdir(prefix + ext):
            raise TorchLeanError(f"--report {prefix!r}: {prefix + ext!r} is a directory")


def check_html_dir(path: str | None) -> None:
    """`TorchLeanError` unless `--html DIR` can be written (`spec.report_page`)."""
    problem = page_dir_problem(path) if path is not None else ""
    if problem:
        raise TorchLeanError(problem)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m conformance", description=DESCRIPTION)
    p.add_argument(
        "--backend",
        default="numpy",
        type=backend_name,
        help="array backend: numpy (default), cupy, or an array-API namespace by import "
        "path, module or module:attr (e.g. array_api_strict)",
    )
    p.add_argument(
        "--against",
        default=None,
        type=backend_name,
        metavar="BACKEND",
        help="also run every case of a differential property on this reference backend and "
        "compare per node (bitwise for ordered, per-node bounds for fast)",
    )
    p.add_argument(
        "--dtype",
        default="all",
        type=dtype_list,
        help="comma list of exact,float64,float32,bfloat16,float16 (default: all)",
    )
    p.add_argument("--kernels", default="all", choices=["all", "fast", "ordered"])
    p.add_argument(
        "--max-examples",
        type=count_arg(1),
        default=None,
        help=f"cases per property over all ops (>= 1; default {DEFAULT_MAX_EXAMPLES})",
    )
    p.add_argument(
        "--per-op",
        type=count_arg(0),
        default=2,
        help="further cases per property focused on each op in turn (>= 0; default 2)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="Hypothesis seed (default: derandomised, reproducible)",
    )
    p.add_argument(
        "--report",
        default=None,
        help=f"report path prefix (writes PREFIX.json and PREFIX.md; default {DEFAULT_REPORT}, "
        "with --engine NAME conformance-engine-NAME)",
    )
    p.add_argument(
        "--session-examples",
        type=count_arg(0),
        default=30,
        help="runs of the Session state machine (0 to skip; default 30)",
    )
    p.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop after the first failing property (same verdict, less time; used by "
        "python -m conformance.mutate)",
    )
    p.add_argument(
        "--replay",
        default=None,
        metavar="FILE",
        help="re-run the JSON reproducer of a failing case on --backend (and --against) and "
        "exit; a file naming another backend is refused",
    )
    add_model_arguments(p)
    add_cluster_arguments(p, seeds=True, workers=AUTO)
    add_engine_arguments(p)
    add_html_arguments(p)
    return p


def add_html_arguments(p: argparse.ArgumentParser) -> None:
    """`--html DIR` (the static HTML report, conformance.html) and `--compare A B`."""
    p.add_argument(
        "--html",
        default=None,
        metavar="DIR",
        help="also write a static HTML report into DIR (index.html, plus the reproducers "
        "of failures; created if missing, its parent must exist)",
    )
    p.add_argument(
        "--compare",
        nargs=2,
        default=None,
        metavar=("A.json", "B.json"),
        help="compare two JSON reports (two runs, or two engines) instead of running: print "
        "what changed (with --html DIR also as a page); exit 1 when B regresses on A",
    )


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of the model mode (`python -m conformance MODEL`, conformance.model_check)."""
    p.add_argument(
        "model",
        nargs="?",
        default=None,
        help="a model file (.onnx, or a .pt2 torch.export program): run the link check and "
        "the suite's properties on its imported graph instead (conformance.model_check)",
    )
    p.add_argument(
        "--inputs",
        default=None,
        metavar="FILE.npz",
        help="with MODEL: named arrays replacing its inputs / parameters (default: the "
        "model's own values, seeded random runtime inputs)",
    )
    p.add_argument(
        "--trust-pickle",
        action="store_true",
        help="with MODEL.pt2: allow full unpickling of the file (it can run arbitrary code "
        "from the file; default: torch's weights_only loader only, anything else refused)",
    )


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of the `--engine` mode (conformance.engines; docs/ENGINES.md)."""
    p.add_argument(
        "--engine",
        default=None,
        help="judge another autograd engine against the spec instead: torch, torch-cuda, "
        "torch-compile, torch-compile-cuda, jax, jax-jit, tinygrad, autograd, "
        "onnxruntime[@PROVIDER] (forward only), or module:attr (an Engine subclass)",
    )
    p.add_argument(
        "--ops", default=None, help="with --engine: comma list of ops to check (default all)"
    )
    p.add_argument(
        "--strict-conventions",
        action="store_true",
        help="with --engine: a convention difference (other than signed zeros) fails",
    )


def engine_mode(a: argparse.Namespace) -> int:
    """Run the `--engine` mode; its exit code (conformance.engines.cli)."""
    from .engines.cli import engine_main

    return engine_main(a)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags; without `--report` the prefix is `DEFAULT_REPORT`, or the engine's own
    (`conformance.engines.report.report_prefix`) with `--engine`."""
    args = list(sys.argv[1:] if argv is None else argv)
    a = build_parser().parse_args(args)
    a.command = shlex.join(["python", "-m", "conformance", *args])
    a.explicit_examples = a.max_examples is not None
    if a.max_examples is None:
        a.max_examples = DEFAULT_MAX_EXAMPLES
    if a.report is None:
        if a.engine:
            from .engines.report import report_prefix

            a.report = report_prefix(a.engine)
        else:
            a.report = DEFAULT_REPORT
    return a


def replay_file(path: str, backend: str = "numpy", against: str | None = None) -> int:
    """Re-run the JSON reproducer in `path` on `backend` (see the module docstring); print
    ok or the failure; 0, 1, or 2 with one stderr line when it cannot be replayed."""
    try:
        obj = read_json(path)
        if isinstance(obj, dict) and obj.get("property") == "session_state_machine":
            return _replay_session_machine(validate_session_machine(obj, path, backend), path)
        try:
            r = validate(obj, path)
        except ReproducerError as e:
            raise ReproducerError(f"{path}: {e}") from None
        out = replay(r, backend, against)
    except TorchLeanError as e:
        print(f"python -m conformance: {e}", file=sys.stderr)
        return 2
    print("ok" if out.ok else f"FAILED: {out.message}")
    return 0 if out.ok else 1


def _replay_session_machine(repro: dict[str, Any], path: str) -> int:
    from .session_machine import replay_session_machine

    try:
        ok, msg = replay_session_machine(repro)
    except (ValueError, SyntaxError, TypeError) as e:  # a blob Hypothesis cannot decode
        raise ReproducerError(f"{path}: cannot replay the state machine ({e})") from None
    print("ok" if ok else f"FAILED: {msg}")
    return 0 if ok else 1


def select(a: argparse.Namespace) -> tuple[Backend, list[Property]]:
    """The backend and the properties the flags ask for (raises `TorchLeanError`, and
    `FloatEnvironmentError` if the process flushes subnormals now)."""
    check_float_environment()
    check_report_path(a.report)
    check_html_dir(a.html)
    backend = _backend(a.backend)
    if a.against:
        _backend(a.against)
    if a.dtype == "all":
        dtypes = [d for d in ["exact", *IEEE_DTYPES] if d in backend.dtypes]
    else:
        dtypes = a.dtype.split(",")
    kernels = ["fast", "ordered"] if a.kernels == "all" else [a.kernels]
    props = default_properties(dtypes, kernels, a.backend, a.against)
    return backend, props


def _backend(name: str) -> Backend:
    try:
        return get_backend(name)
    except (ImportError, ValueError, TypeError) as e:  # e.g. a module name importlib rejects
        raise TorchLeanError(
            f"backend {name!r} is not available ({type(e).__name__}: {e})"
        ) from None


def _stop_early(a: argparse.Namespace, rows: Sequence[Row]) -> bool:
    return bool(getattr(a, "fail_fast", False) and any(r.failed for r in rows))


def run(a: argparse.Namespace, backend: Backend, props: Sequence[Property]) -> list[Row]:
    """Run every property (and the Session state machine on NumPy); one row each."""
    if not backend.is_numpy and a.session_examples:
        print(
            f"note: the Session state machine runs on NumPy only; skipped for {a.backend!r}",
            file=sys.stderr,
        )
        a.session_examples = 0
    rows: list[Row] = []
    total = planned_cases(props, a.max_examples, a.per_op) + a.session_examples
    bar = _progress_bar(total)
    try:
        rows = run_properties(
            props,
            a.max_examples,
            a.seed,
            progress=lambda: bar.update(),
            per_op=a.per_op,
            stop=lambda done: _stop_early(a, done),
        )
        if _stop_early(a, rows):
            return rows
        if a.session_examples > 0:
            from .session_machine import run_session_machine

            bar.set_description("session_state_machine")
            rows.append(run_session_machine(a.session_examples, a.seed))
            bar.update(a.session_examples)
    finally:
        bar.close()
    return rows


def run_rows(a: argparse.Namespace, backend: Backend, props: Sequence[Property]) -> list[Row]:
    """`run`, or the same rows as shards when the flags ask for a cluster, a pool
    (`--workers auto`, the default) or several seeds (`conformance.distributed`; raises its
    `DistributedError`). `--fail-fast` with `--workers auto` runs in this process: it stops
    at the first failing property, which a pool running every shard at once would not."""
    if getattr(a, "fail_fast", False) and a.workers == AUTO and a.scheduler is None:
        return run(a, backend, props)
    return run_sharded(a, backend, props) if sharded(a) else run(a, backend, props)


def _print_failure(r: Row) -> None:
    f = r.failure or {}
    print(f"\nFAILED {r.property}/{r.dtype}/{r.kernels}: {f.get('message')}")
    if f.get("op"):
        print(f"where: {f['op']}")
    print(f.get("graph_text", ""))
    print("reproducer (save as FILE, then python -m conformance --replay FILE):")
    print(json.dumps(f.get("repro")))


def report(a: argparse.Namespace, backend: Backend, rows: Sequence[Row]) -> int:
    """Print the table and the failures, write the reports; 1 if a property failed."""
    print(
        f"{'property':<22}{'dtype':<15}{'kernels':<9}{'cases':>6}{'passed':>8}{'failed':>8}"
        f"{'ops':>5}{'max ulp':>10}{'bound ratio':>13}"
    )
    for r in rows:
        print(
            f"{r.property:<22}{r.dtype:<15}{r.kernels:<9}{r.cases:>6}{r.passed:>8}"
            f"{r.failed:>8}{r.ops_covered:>5}{r.max_ulp:>10.3g}{r.worst_bound_ratio:>13.3g}"
        )
    failed = [r for r in rows if r.failed]
    for r in failed:
        _print_failure(r)
    meta: dict[str, Any] = {
        "backend": a.backend,
        "against": a.against,
        "backend_info": backend.info,
        "max_examples": a.max_examples,
        "per_op": a.per_op,
        "seed": a.seed,
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "torchlean": _version("torchlean"),
        "spec_version": SPEC_VERSION,
        "machine": machine(),
        "command": getattr(a, "command", None),
    }
    try:
        jpath, mpath = write_reports(rows, a.report, meta)
    except TorchLeanError as e:  # spec.safe_files.FileWriteError: a full disk, a link
        print(f"python -m conformance: {e}", file=sys.stderr)
        return 2
    paths = f"{jpath}, {mpath}"
    if getattr(a, "html", None):
        with open(jpath) as f:
            paths += ", " + write_suite_html(json.load(f), a.html)
    total = sum(r.cases for r in rows)
    print(f"\n{total} cases, {len(failed)} failing properties; reports: {paths}")
    if total == 0:
        print("python -m conformance: the run tested 0 cases; nothing passed", file=sys.stderr)
        return 1
    return 1 if failed else 0
