"""The command line: `python -m proofs list|show|check|verify|check-cert|readme`.

Invariants:
- `list [NAME ...]` prints every (or every selected) theorem: name, evidence, status, scope;
  `show NAME ...` prints the selected theorems in full.
- `check [NAME ...] [--quick] [--certificate PATH] [--against PATH] [--jobs N]` re-runs
  the checks (names may be dotted prefixes such as `op.relu`), shows a progress bar on
  stderr (tqdm; disabled when stderr is not a TTY or with `--no-progress`), prints a result
  table on stdout, writes the certificate (default `proofs-certificate.json`) and, with
  `--against`, reports theorems whose result changed or that are stale. Exit status: 0 when
  every check passed, 1 when one failed, 2 on a usage error (e.g. an unknown name).
- `verify PATH` re-hashes the sources and checks a certificate's digest without running
  anything: exit 0 when the digest matches and no theorem is stale, 1 otherwise.
- `check-cert FILE` re-validates an output-bound certificate written by
  `runtime.verify` (`proofs.certcheck`, independent of the code that wrote it): exit 0 when
  it holds, 1 when it is rejected (the reason on stderr).
- `readme` prints the theorem table that `proofs/README.md` embeds.
- Only this module writes to the terminal.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from . import certificate
from .registry import CheckResult, ProofError, Theorem, select
from .runner import default_jobs, run_theorems

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
        rows.append(
            (t.name, " + ".join(t.evidence), t.status, scope if args.long else _short(scope, 90))
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
    against = certificate.load(args.against) if args.against else None
    enabled = sys.stderr.isatty() and not args.no_progress
    bar = _Progress(len(ths), enabled)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    try:
        results = run_theorems(
            ths,
            quick=args.quick,
            jobs=args.jobs,
            on_result=bar.result,
            on_start=bar.start,
            progress=bar.inner,
        )
    finally:
        bar.close()
    elapsed = time.perf_counter() - t0
    mode = "quick" if args.quick else "full"
    cert = certificate.build(
        mode, args.names, results, elapsed=elapsed, started=started, jobs=args.jobs
    )
    rows = [("theorem", "result", "evidence", "counts", "s")]
    for th, r in results:
        rows.append(
            (
                th.name,
                "pass" if r.passed else "FAIL",
                " + ".join(th.evidence),
                summarize_counts(r),
                f"{r.seconds:.1f}",
            )
        )
    _table(rows, sys.stdout)
    failed = [th.name for th, r in results if not r.passed]
    for th, r in results:
        if not r.passed:
            sys.stdout.write(f"\nFAILED {th.name}:\n")
            sys.stdout.write(_failure_text(r))
    sys.stdout.write(
        f"\n{len(results) - len(failed)}/{len(results)} theorems pass ({mode} mode, "
        f"{elapsed:.1f} s, {args.jobs} jobs)\n"
    )
    if args.certificate != "-":
        certificate.write(cert, args.certificate)
        sys.stdout.write(f"certificate: {args.certificate} ({cert['certificate_digest']})\n")
    if against is not None:
        sys.stdout.write(f"\ncompared with {args.against}:\n")
        if against.get("mode") != mode:
            sys.stdout.write(
                f"note: {args.against} was a {against.get('mode')} run, this is a {mode} run\n"
            )
        cmp = certificate.compare(against, cert)
        for line in cmp.lines():
            sys.stdout.write(f"  {line}\n")
    return 1 if failed else 0


def _failure_text(r: CheckResult) -> str:
    d = r.details
    lines = []
    if "error" in d:
        lines.append(f"  error: {d['error']}")
    for c in d.get("cases", []):
        if not c.get("ok", True):
            lines.append(f"  case {c['case']}: {'; '.join(c.get('failures', []))[:500]}")
    if d.get("known_failures"):
        lines.append("  known failures (reported bugs): " + ", ".join(d["known_failures"]))
    if d.get("unexplained_failures"):
        lines.append("  UNEXPLAINED failures: " + ", ".join(d["unexplained_failures"]))
    for name, row in d.get("ops", {}).items():
        for f in row.get("failures", [])[:1]:
            lines.append(f"  {name}: {f[:300]}")
    for k, v in d.items():
        if k.endswith("_failures") and isinstance(v, list):
            for f in v[:2]:
                if not isinstance(f, dict):
                    continue
                lines.append(
                    f"  {k[:-9]}: {f['mismatch']}\n"
                    + "\n".join("    " + s for s in f["graph"].splitlines())
                )
    for k, v in d.get("rows", {}).items():
        if v.get("failed"):
            lines.append(f"  {k}: {v.get('failure')}")
    if isinstance(d.get("written_proof"), str) and not r.passed:
        lines.append(f"  written proof: {d['written_proof']}")
    return "\n".join(lines[:20]) + "\n"


def _cmd_verify(args: argparse.Namespace) -> int:
    cert = certificate.load(args.path)
    cmp = certificate.stale_against_tree(cert)
    sys.stdout.write(
        f"{args.path}: {cert.get('mode')} run, {len(cert['theorems'])} theorems, "
        f"{cert['certificate_digest']}\n"
    )
    for line in cmp.lines():
        sys.stdout.write(f"  {line}\n")
    return 0 if cmp.clean else 1


def _cmd_show(args: argparse.Namespace) -> int:
    for t in select(args.names):
        sys.stdout.write(
            f"{t.name}\n  status:     {t.status}\n  evidence:   {' + '.join(t.evidence)}\n"
            f"  statement:  {t.statement}\n  formula:    {t.formula}\n"
            f"  scope:      {t.scope.summary()}\n  sources:    {', '.join(t.sources)}\n"
        )
        if t.references:
            sys.stdout.write(f"  references: {', '.join(t.references)}\n")
    return 0


def readme_table() -> str:
    """The Markdown table of every theorem (embedded in proofs/README.md)."""
    lines = ["| theorem | evidence | status | scope |", "|---|---|---|---|"]
    for t in select(()):
        scope = t.scope.shapes if t.name.startswith("op.") else t.scope.graphs
        scope = _short(scope.replace("|", "\\|"), 160)
        lines.append(f"| `{t.name}` | {' + '.join(t.evidence)} | {t.status} | {scope} |")
    return "\n".join(lines)


def _cmd_check_cert(args: argparse.Namespace) -> int:
    from .certcheck import CertificateError, check_file

    try:
        sys.stdout.write(check_file(args.path) + "\n")
    except CertificateError as e:
        sys.stderr.write(f"certificate rejected: {e}\n")
        return 1
    return 0


def _cmd_readme(args: argparse.Namespace) -> int:
    sys.stdout.write(readme_table() + "\n")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m proofs", description="torchlean's checked obligations"
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    pl = sub.add_parser("list", help="list the theorems")
    pl.add_argument("names", nargs="*", help="names or dotted prefixes (default: all)")
    pl.add_argument("--long", action="store_true", help="do not shorten the scope column")
    pl.set_defaults(fn=_cmd_list)
    ps = sub.add_parser("show", help="print theorems in full (statement, formula, scope)")
    ps.add_argument("names", nargs="+", help="names or dotted prefixes")
    ps.set_defaults(fn=_cmd_show)
    pc = sub.add_parser("check", help="re-run checks and write a certificate")
    pc.add_argument("names", nargs="*", help="names or dotted prefixes (default: all)")
    pc.add_argument("--quick", action="store_true", help="small bounds for CI")
    pc.add_argument(
        "--certificate",
        default=DEFAULT_CERTIFICATE,
        help=f"where to write the certificate (default {DEFAULT_CERTIFICATE}; '-' for none)",
    )
    pc.add_argument(
        "--against",
        metavar="PATH",
        help="compare with an earlier certificate: changed and stale theorems",
    )
    pc.add_argument(
        "--jobs",
        type=int,
        default=default_jobs(),
        help="worker processes (default: the CPUs available)",
    )
    pc.add_argument("--no-progress", action="store_true", help="no progress bar")
    pc.set_defaults(fn=_cmd_check)
    pv = sub.add_parser("verify", help="check a certificate's digest and staleness")
    pv.add_argument("path")
    pv.set_defaults(fn=_cmd_verify)
    pk = sub.add_parser("check-cert", help="re-validate an output-bound certificate")
    pk.add_argument("path")
    pk.set_defaults(fn=_cmd_check_cert)
    pr = sub.add_parser("readme", help="print the theorem table for proofs/README.md")
    pr.set_defaults(fn=_cmd_readme)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "jobs", 1) < 1:
        sys.stderr.write("error: --jobs must be at least 1\n")
        return 2
    try:
        return int(args.fn(args))
    except ProofError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
