"""The command line: `python -m proofs list|show|check|verify|check-cert|readme`.

Invariants:
- `list [NAME ...]` prints every (or every selected) theorem: name, evidence, status, scope;
  `show NAME ...` prints the selected theorems in full (a NAME may be an alias, also under
  its fully qualified TorchLean name, `TORCHLEAN_QUALIFIED`).
- `check [NAME ...] [--quick] [--certificate PATH] [--against PATH] [--jobs N]
  [--witnesses] [--time-scale X]` re-runs the checks, each in a worker under its time limit
  (a theorem past it is "undecided (time limit)" and fails the run; `--witnesses` also runs
  every theorem on its witness defect, which it must fail; names may be dotted prefixes
  such as `op.relu`), shows a progress bar on stderr (tqdm; disabled when stderr is not a
  TTY or with `--no-progress`), prints a result
  table on stdout, writes the certificate (default `proofs-certificate.json`) and, with
  `--against`, reports theorems whose result changed or that are stale. Exit status: 0 when
  every check passed, 1 when one failed, 2 on a usage error (e.g. an unknown name).
- `verify PATH` re-hashes the sources and checks a certificate's digest without running
  anything: exit 0 when the digest matches and no theorem is stale, 1 otherwise.
- `check-cert FILE [--max-width N] [--max-work N]` re-validates a certificate written by
  `runtime.verification`, independently of the code that wrote it, dispatching on its
  "format": output bounds (`proofs.bounds_certificate_check`) or split bounds
  (`torchlean_split_bounds_v1`, `proofs.split_certificate_check`): exit 0 when it holds,
  1 when an output-bound certificate is rejected (the reason on stderr; a split
  certificate: 2 with that one line, as its format specifies), 2 with one line when the
  file is not a regular file of at most the checker's MAX_BYTES of UTF-8
  (`spec.safe_files.read_text`: a FIFO never blocks) or when `proofs.cert_work`
  estimates more work than its caps, before any check starts.
- `readme` writes every generated part of the docs (`proofs.generated`: docs/OPS.md, the
  theorem table of proofs/README.md, README.md's op count, docs/ARCHITECTURE.md's family
  table); `--check` writes nothing and exits 1 when one is stale; `--print` prints the
  theorem table only.
- Only this module writes to the terminal.
- Each `_cmd_*` command is a thin sequence of parse / run / report helpers; the parser is
  built from one table of subcommands (`_COMMANDS`).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from conformance.distributed.flags import add_cluster_arguments, count_type, uses_cluster
from spec.errors import TorchLeanError
from spec.safe_files import check_destination, read_text

from . import run_certificate
from .catalogue import CheckResult, ProofError, Theorem, select
from .cert_work import ENV_OPS, ENV_WIDTH, MAX_OPS, MAX_WIDTH, CertificateWorkError, check_work
from .generated import readme_table, stale, write_all
from .graph_laws import TORCHLEAN_LINK_NAME
from .runner import default_jobs, run_theorems
from .theorem_shards import run_theorems_sharded

__all__ = ["main", "readme_table", "summarize_counts"]

DEFAULT_CERTIFICATE = "proofs-certificate.json"


def summarize_counts(r: CheckResult) -> str:
    """A short human summary of a result's counts."""
    c = r.counts
    if "graphs" in c:
        return f"{c.get('passed', 0)}/{c['graphs']} graphs"
    if "identities" in c:
        return f"{c.get('cases_passed', 0)}/{c.get('cases', 0)} cases, {c['identities']} ids"
    if "cases" in c:
        return f"{c.get('cases_passed', c.get('passed', 0))}/{c['cases']} cases"
    return ", ".join(f"{k}={v}" for k, v in c.items())


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for k, r in enumerate(rows):
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
        if k == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def _short(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _cmd_list(args: argparse.Namespace) -> int:
    ths = select(args.names)
    rows = [("name", "evidence", "status", "scope")]
    for t in ths:
        scope = t.scope.summary()
        ev = t.evidence_label()
        rows.append(
            (
                t.name,
                ev if args.long else _short(ev, 60),
                t.status,
                scope if args.long else _short(scope, 90),
            )
        )
    _table(rows, sys.stdout)
    sys.stdout.write(f"\n{len(ths)} theorems\n")
    return 0


class _Progress:
    """tqdm bars on stderr: one over theorems, one for the current long check."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.enabled = enabled
        if not enabled:
            return
        from tqdm import tqdm

        self._tqdm = tqdm
        self.bar = tqdm(
            total=total, desc="theorems", unit="thm", file=sys.stderr, dynamic_ncols=True
        )
        self.sub: Any = None

    def start(self, th: Theorem) -> None:
        if self.enabled:
            self.bar.set_postfix_str(_short(th.name, 40))

    def result(self, th: Theorem, r: CheckResult) -> None:
        if self.enabled:
            self.bar.update(1)

    def inner(self, desc: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.sub is None or self.sub.total != total or self.sub.desc != desc:
            if self.sub is not None:
                self.sub.close()
            self.sub = self._tqdm(
                total=total, desc=desc, file=sys.stderr, leave=False, position=1, dynamic_ncols=True
            )
        self.sub.n = done
        self.sub.refresh()

    def close(self) -> None:
        if self.enabled:
            if self.sub is not None:
                self.sub.close()
            self.bar.close()


def _cmd_check(args: argparse.Namespace) -> int:
    ths = select(args.names)
    if args.certificate != "-":  # the destination, before any theorem runs
        check_destination(args.certificate, error=ProofError)
    against = run_certificate.load(args.against) if args.against else None
    run = _run_check(ths, args)
    mode = "quick" if args.quick else "full"
    wit = _run_check(ths, args, witness=True) if args.witnesses else None
    cert = run_certificate.build(
        mode,
        args.names,
        run.results,
        elapsed=run.elapsed,
        started=run.started,
        jobs=args.jobs,
        witnesses=wit.results if wit else None,
    )
    failed = _report_results(run.results, sys.stdout)
    sys.stdout.write(
        f"\n{len(run.results) - len(failed)}/{len(run.results)} theorems pass ({mode} mode, "
        f"{run.elapsed:.1f} s, {args.jobs} jobs)\n"
    )
    if wit is not None:
        failed += _report_witnesses(wit, sys.stdout)
    if args.certificate != "-":
        run_certificate.write(cert, args.certificate)
        sys.stdout.write(f"certificate: {args.certificate} ({cert['certificate_digest']})\n")
    if against is not None:
        _report_against(args.against, against, cert, mode, sys.stdout)
    return 1 if failed else 0


@dataclass
class _CheckRun:
    """The results of one `check` run, with its wall-clock start and elapsed time."""

    results: list[tuple[Theorem, CheckResult]]
    started: str
    elapsed: float


def _report_witnesses(wit: _CheckRun, out: TextIO) -> list[str]:
    """Each theorem's result on its witness; the names whose witness was not caught."""
    missed = []
    for th, r in wit.results:
        if r.result != "fail":
            missed.append(th.name)
            what = th.witness.defect if th.witness else "no witness"
            out.write(f"WITNESS NOT CAUGHT {th.name}: {what} ({r.result})\n")
    out.write(
        f"witnesses: {len(wit.results) - len(missed)}/{len(wit.results)} theorems fail on their "
        f"defect ({wit.elapsed:.1f} s, quick bounds)\n"
    )
    return missed


def _run_check(
    ths: Sequence[Theorem], args: argparse.Namespace, *, witness: bool = False
) -> _CheckRun:
    """Run the selected theorems with a progress bar (see `_Progress`); with `witness`,
    each on its witness, in quick mode."""
    enabled = sys.stderr.isatty() and not args.no_progress
    bar = _Progress(len(ths), enabled)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    try:
        results = _dispatch(ths, args, bar) or run_theorems(
            ths,
            quick=args.quick or witness,
            jobs=args.jobs,
            time_scale=args.time_scale,
            witness=witness,
            on_result=bar.result,
            on_start=bar.start,
            progress=bar.inner,
        )
    finally:
        bar.close()
    return _CheckRun(list(results), started, time.perf_counter() - t0)


def _dispatch(ths: Sequence[Theorem], args: argparse.Namespace, bar: _Progress) -> list[Any]:
    """The theorems as shards on Dask with --workers N / --scheduler (conformance.distributed);
    [] when neither is given."""
    if not uses_cluster(args):
        return []
    if getattr(args, "witnesses", False):
        raise ProofError("--witnesses runs on this machine only; drop --workers/--scheduler")
    return run_theorems_sharded(ths, quick=args.quick, args=args, on_result=bar.result)


def _report_results(results: Sequence[tuple[Theorem, CheckResult]], out: TextIO) -> list[str]:
    """The result table, then each failure in detail; the names of the failed theorems."""
    rows = [("theorem", "result", "evidence", "counts", "s")]
    for th, r in results:
        rows.append(
            (
                th.name,
                {"pass": "pass", "fail": "FAIL"}.get(r.result, "UNDECIDED (time limit)"),
                " + ".join(th.evidence),
                summarize_counts(r),
                f"{r.seconds:.1f}",
            )
        )
    _table(rows, out)
    failed = [th.name for th, r in results if not r.passed]
    for th, r in results:
        if not r.passed:
            out.write(f"\nFAILED {th.name}:\n")
            out.write(_failure_text(r))
    return failed


def _report_against(
    path: str, against: dict[str, Any], cert: dict[str, Any], mode: str, out: TextIO
) -> None:
    """Changed and stale theorems of the earlier certificate `against` (from `path`)."""
    out.write(f"\ncompared with {path}:\n")
    if against.get("mode") != mode:
        out.write(f"note: {path} was a {against.get('mode')} run, this is a {mode} run\n")
    cmp = run_certificate.compare(against, cert)
    for line in cmp.lines():
        out.write(f"  {line}\n")


def _error_lines(d: dict[str, Any]) -> list[str]:
    return [f"  error: {d['error']}"] if "error" in d else []


def _case_lines(d: dict[str, Any]) -> list[str]:
    return [
        f"  case {c['case']}: {'; '.join(c.get('failures', []))[:500]}"
        for c in d.get("cases", [])
        if not c.get("ok", True)
    ]


def _known_failure_lines(d: dict[str, Any]) -> list[str]:
    lines = []
    if d.get("known_failures"):
        lines.append("  known failures (reported bugs): " + ", ".join(d["known_failures"]))
    if d.get("unexplained_failures"):
        lines.append("  UNEXPLAINED failures: " + ", ".join(d["unexplained_failures"]))
    return lines


def _op_lines(d: dict[str, Any]) -> list[str]:
    return [
        f"  {name}: {f[:300]}"
        for name, row in d.get("ops", {}).items()
        for f in row.get("failures", [])[:1]
    ]


def _graph_lines(d: dict[str, Any]) -> list[str]:
    lines = []
    for k, v in d.items():
        if k.endswith("_failures") and isinstance(v, list):
            for f in v[:2]:
                if not isinstance(f, dict):
                    continue
                lines.append(
                    f"  {k[:-9]}: {f['mismatch']}\n"
                    + "\n".join("    " + s for s in f["graph"].splitlines())
                )
    return lines


def _row_lines(d: dict[str, Any]) -> list[str]:
    return [f"  {k}: {v.get('failure')}" for k, v in d.get("rows", {}).items() if v.get("failed")]


_FAILURE_SECTIONS: tuple[Callable[[dict[str, Any]], list[str]], ...] = (
    _error_lines,
    _case_lines,
    _known_failure_lines,
    _op_lines,
    _graph_lines,
    _row_lines,
)
"""The parts of a failed result's report, in order (`_failure_text`)."""


def _failure_text(r: CheckResult) -> str:
    d = r.details
    lines = [line for section in _FAILURE_SECTIONS for line in section(d)]
    if isinstance(d.get("written_proof"), str) and not r.passed:
        lines.append(f"  written proof: {d['written_proof']}")
    return "\n".join(lines[:20]) + "\n"


def _cmd_verify(args: argparse.Namespace) -> int:
    cert = run_certificate.load(args.path)
    cmp = run_certificate.stale_against_tree(cert)
    sys.stdout.write(
        f"{args.path}: {cert.get('mode')} run, {len(cert['theorems'])} theorems, "
        f"{cert['certificate_digest']}\n"
    )
    for line in cmp.lines():
        sys.stdout.write(f"  {line}\n")
    return 0 if cmp.clean else 1


TORCHLEAN_QUALIFIED = {
    TORCHLEAN_LINK_NAME: f"Runtime.Autograd.Torch.{TORCHLEAN_LINK_NAME}",
}
"""TorchLean's fully qualified name of each alias the catalogue cites by its short name:
`show` accepts either and prints both under `aliases`."""


def _unqualified(name: str) -> str:
    """A TorchLean fully qualified name as its short alias (any other name unchanged)."""
    short = {q: a for a, q in TORCHLEAN_QUALIFIED.items()}
    return short.get(name, name)


def _qualified_aliases(aliases: Sequence[str]) -> list[str]:
    return [*aliases, *(TORCHLEAN_QUALIFIED[a] for a in aliases if a in TORCHLEAN_QUALIFIED)]


def _cmd_show(args: argparse.Namespace) -> int:
    for t in select([_unqualified(n) for n in args.names]):
        sys.stdout.write(
            f"{t.name}\n  status:     {t.status}\n  evidence:   {' + '.join(t.evidence)}\n"
            f"  statement:  {t.statement}\n  formula:    {t.formula}\n"
            f"  scope:      {t.scope.summary()}\n  sources:    {', '.join(t.sources)}\n"
        )
        if t.references:
            sys.stdout.write(f"  references: {', '.join(t.references)}\n")
        if t.aliases:
            sys.stdout.write(f"  aliases:    {', '.join(_qualified_aliases(t.aliases))}\n")
    return 0


def _cmd_check_cert(args: argparse.Namespace) -> int:
    """0 and the summary when the certificate holds; 1 when it is rejected (a split
    certificate: 2); 2 (one line) when the file cannot be read or demands more work than
    the caps allow. The checker is chosen by the certificate's "format"."""
    from . import bounds_certificate_check as bounds
    from . import split_certificate_check as split

    try:
        text = read_text(args.path, bounds.MAX_BYTES)
    except TorchLeanError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    is_split = split.FORMAT in text
    try:
        # a split certificate's tree nests deeper than the output-bound format allows
        cert = split.parse(text) if is_split else None
        is_split = isinstance(cert, dict) and cert.get("format") == split.FORMAT
        if not is_split:
            cert = bounds.parse(text)  # the output-bound format's own limits
        check_work(cert, args.max_width, args.max_work)
        checker = split.check_certificate if is_split else bounds.check_certificate
        sys.stdout.write(checker(cert) + "\n")
    except bounds.CertificateError as e:
        sys.stderr.write(f"certificate rejected: {args.path}: {e}\n")
        return 2 if is_split else 1
    except CertificateWorkError as e:
        sys.stderr.write(f"error: {args.path}: {e}\n")
        return 2
    return 0


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return v


def _add_check_cert(p: argparse.ArgumentParser) -> None:
    p.add_argument("path")
    p.add_argument(
        "--max-width",
        type=_positive,
        default=None,
        help=f"widest value a certificate may declare (default {MAX_WIDTH}, or {ENV_WIDTH})",
    )
    p.add_argument(
        "--max-work",
        type=_positive,
        default=None,
        help=f"most rational operations a check may take (default {MAX_OPS:.0e}, or {ENV_OPS})",
    )


def _cmd_readme(args: argparse.Namespace) -> int:
    if args.print:
        sys.stdout.write(readme_table() + "\n")
        return 0
    if args.check:
        old = stale()
        for path in old:
            sys.stderr.write(f"{path}: its generated part differs from the code\n")
        return 1 if old else 0
    for path in write_all():
        sys.stdout.write(f"wrote {path}\n")
    return 0


def _add_readme(p: argparse.ArgumentParser) -> None:
    how = p.add_mutually_exclusive_group()
    how.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    how.add_argument("--print", action="store_true", help="print the theorem table only")


def _add_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", help="names or dotted prefixes (default: all)")
    p.add_argument("--long", action="store_true", help="do not shorten the scope column")


def _add_show(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="+", help="names or dotted prefixes")


def _add_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", help="names or dotted prefixes (default: all)")
    p.add_argument("--quick", action="store_true", help="small bounds for CI")
    p.add_argument(
        "--certificate",
        default=DEFAULT_CERTIFICATE,
        help=f"where to write the certificate (default {DEFAULT_CERTIFICATE}; '-' for none)",
    )
    p.add_argument(
        "--against",
        metavar="PATH",
        help="compare with an earlier certificate: changed and stale theorems",
    )
    p.add_argument(
        "--jobs",
        type=count_type("--jobs"),
        default=default_jobs(),
        help="worker processes (default: the CPUs available)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--witnesses",
        action="store_true",
        help="also run every theorem on its witness (a defect it must catch; quick bounds)",
    )
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply every per-theorem time limit (default 1; for slow machines)",
    )
    add_cluster_arguments(p)  # --workers, --scheduler (Dask)


def _add_path(p: argparse.ArgumentParser) -> None:
    p.add_argument("path")


def _add_nothing(p: argparse.ArgumentParser) -> None:
    pass


_Command = tuple[
    str, str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]
]
_COMMANDS: tuple[_Command, ...] = (
    ("list", "list the theorems", _add_list, _cmd_list),
    ("show", "print theorems in full (statement, formula, scope)", _add_show, _cmd_show),
    ("check", "re-run checks and write a certificate", _add_check, _cmd_check),
    ("verify", "check a certificate's digest and staleness", _add_path, _cmd_verify),
    ("check-cert", "re-validate an output-bound certificate", _add_check_cert, _cmd_check_cert),
    (
        "readme",
        "write the generated docs (docs/OPS.md, the theorem table of proofs/README.md, "
        "README.md's op count, docs/ARCHITECTURE.md's family table)",
        _add_readme,
        _cmd_readme,
    ),
)
"""The subcommands: name, help, argument adder, command function (in `--help` order)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m proofs", description="torchlean's checked obligations"
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, help_text, add_arguments, fn in _COMMANDS:
        sp = sub.add_parser(name, help=help_text)
        add_arguments(sp)
        sp.set_defaults(fn=fn)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "jobs", 1) < 1:
        sys.stderr.write("error: --jobs must be at least 1\n")
        return 2
    scale = getattr(args, "time_scale", 1.0)
    if not (scale > 0 and scale < float("inf")):
        sys.stderr.write("error: --time-scale must be a positive finite number\n")
        return 2
    try:
        return int(args.fn(args))
    except ProofError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
