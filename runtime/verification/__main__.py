"""`python -m runtime.verification MODEL.onnx PROPERTY.vnnlib [--timeout S] [--certificate F]`:
prints VNN-COMP's result (`sat` with the counterexample, `unsat`, `unknown`, `timeout`); exit
status 0 for any of them, 2 with a one-line error on stderr for a file or network it cannot handle.
With `--certificate F`, an `unsat` answer writes its certificates as F.0.json, F.1.json ...
(each checked by `python -m proofs check-cert`): the destination is checked before any
work starts, each file is written atomically (never through a symbolic link), and the
answer is printed only once every certificate is on disk (a full disk is exit 2, one
line, and no answer). With `--html DIR` the result is also written as a page
(`spec.report_page.markdown_page`)."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from typing import Any

from spec.errors import TorchLeanError
from spec.report_page import markdown_page, page_dir_problem
from spec.safe_files import check_destination, write_atomic

from .vnn import VnnResult, format_result, verify_vnnlib


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds >= 0, got {text!r}")
    return v


class _OneLineParser(argparse.ArgumentParser):
    """argparse with its errors as one line (`prog: error: message`) and exit 2."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def _parser() -> argparse.ArgumentParser:
    ap = _OneLineParser(prog="python -m runtime.verification", description=__doc__)
    ap.add_argument("model")
    ap.add_argument("property")
    ap.add_argument("--timeout", type=_seconds, default=60.0)
    ap.add_argument("--certificate", default=None)
    ap.add_argument("--html", default=None, metavar="DIR", help="also write the result as a page")
    return ap


def _write_certificates(prefix: str, r: VnnResult) -> None:
    """Every destination checked first, then each file written atomically."""
    paths = [f"{prefix}.{i}.json" for i in range(len(r.certificates))]
    for path in paths:
        check_destination(path)
    for path, cert in zip(paths, r.certificates, strict=True):
        write_atomic(path, json.dumps(cert, indent=1, sort_keys=True) + "\n")


def _run(a: Any) -> VnnResult:
    if a.html and (why := page_dir_problem(a.html)):
        raise TorchLeanError(why)
    if a.certificate:
        check_destination(f"{a.certificate}.0.json")
    r = verify_vnnlib(a.model, a.property, timeout=a.timeout)
    if a.certificate and r.status == "unsat":
        _write_certificates(a.certificate, r)
    return r


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    try:
        r = _run(a)
    except (TorchLeanError, OSError, MemoryError) as e:
        print(f"error: {type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    print(format_result(r))
    if a.html:
        md = f"`{a.model}` against `{a.property}`:\n\n```\n{format_result(r)}\n```\n"
        args = sys.argv[1:] if argv is None else argv
        cmd = shlex.join(["python", "-m", "runtime.verification", *args])
        markdown_page(a.html, "Verification result", md, {"command": cmd})
    return 0


if __name__ == "__main__":
    sys.exit(main())
