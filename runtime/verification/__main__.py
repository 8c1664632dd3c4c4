"""`python -m runtime.verification MODEL.onnx PROPERTY.vnnlib [--timeout S] [--certificate F]`:
prints VNN-COMP's result (`sat` with the counterexample, `unsat`, `unknown`, `timeout`); exit
status 0 for any of them, 2 with a one-line error on stderr for a file or network it cannot handle.
With `--certificate F`, an `unsat` answer writes its certificates as F.0.json, F.1.json ...
(each checked by `python -m proofs check-cert`)."""

from __future__ import annotations

import argparse
import json
import sys

from spec.errors import TorchLeanError

from .vnn import format_result, verify_vnnlib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m runtime.verification", description=__doc__)
    ap.add_argument("model")
    ap.add_argument("property")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--certificate", default=None)
    a = ap.parse_args(argv)
    try:
        r = verify_vnnlib(a.model, a.property, timeout=a.timeout)
    except (TorchLeanError, OSError) as e:
        print(f"error: {type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    print(format_result(r))
    if a.certificate and r.status == "unsat":
        for i, cert in enumerate(r.certificates):
            with open(f"{a.certificate}.{i}.json", "w", encoding="utf-8") as f:
                json.dump(cert, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
