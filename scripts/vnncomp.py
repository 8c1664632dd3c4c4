"""Run a VNN-COMP benchmark folder and compare with the competition's published answers.

    PYTHONPATH=$PWD python scripts/vnncomp.py BENCH_DIR --out results.csv
        [--instances FILE] [--only SUBSTR ...] [--stride K] [--timeout-scale X]
        [--reference RESULTS_CSV_DIR] [--summary summary.md] [--check] [--cex-dir DIR]

- Instances: BENCH_DIR/*instances.csv (VNN-COMP's `onnx,vnnlib,timeout` rows, paths
  relative to BENCH_DIR), filtered by `--only` (substrings of "onnx,vnnlib") and `--stride`.
- Each instance runs `runtime.verification.vnn.verify_vnnlib` (a child process per
  instance, ended at the timeout); one CSV row per instance in VNN-COMP's results format:
  `benchmark,onnx,vnnlib,prepare_time,result,run_time` (result sat / unsat / unknown /
  timeout / error). Rows are written as they finish.
- `--check`: every `unsat` is audited here, independently of the search that produced it:
  each certificate re-validated by the checker of its format (what `python -m proofs
  check-cert` runs): a split-bounds certificate (one per conjunction, dense ReLU chains)
  by `proofs.split_certificate_check`, its box, rows, network and model hash compared with
  the instance's; an output-bounds certificate by `proofs.bounds_certificate_check`,
  the split tree's leaves rebuilt from the case's
  box and matched with the certificates' boxes, the certificate's network compared with the
  imported network followed by the rows of the conjunction, and some row's certified lower
  bound above its d at both levels (or the top-label margins positive). A failed audit
  turns the row's result into `error` and is printed.
- `--reference`: the published results CSVs of VNN-COMP (one per tool:
  `benchmark,onnx,vnnlib,prepare_time,result,run_time`); the reference answer of an
  instance is the majority of the tools' sat / unsat answers; the summary counts solved,
  wrong (our sat / unsat against the reference), unknown / timeout, and lists per instance
  our time next to the fastest tool's time with the reference answer.
"""

from __future__ import annotations

import argparse
import csv
import glob
import os
import sys
import time
from collections import Counter
from fractions import Fraction
from typing import Any

from proofs.bounds_certificate_check import canonical_sha, check_certificate, decode_bits
from proofs.split_certificate_check import FORMAT as SPLIT_FORMAT
from proofs.split_certificate_check import check_certificate as check_split
from runtime.interop import from_onnx
from runtime.verification.from_graph import network_from_imported
from runtime.verification.network import network_json
from runtime.verification.vnn import format_result, verify_vnnlib
from runtime.verification.vnnlib import read_vnnlib_cases
from spec.errors import TorchLeanError


def instances(bench: str, listing: str | None) -> list[tuple[str, str, float]]:
    files = [listing] if listing else sorted(glob.glob(os.path.join(bench, "*instances.csv")))
    out = []
    for f in files:
        with open(f, encoding="utf-8") as h:
            for row in csv.reader(h):
                if len(row) >= 3 and row[0].strip():
                    out.append((row[0].strip(), row[1].strip(), float(row[2])))
    return out


def _decode(h: str, dtype: str) -> Fraction:
    return decode_bits(h, dtype, "the objective layer")


def _leaves(lo: tuple, hi: tuple, tree: dict[str, Any]) -> list[tuple[int, tuple, tuple]]:
    if "leaf" in tree:
        return [(int(tree["leaf"]), lo, hi)]
    j = int(tree["split"])
    mid = (lo[j] + hi[j]) / 2
    a, b = tree["children"]
    return _leaves(lo, (*hi[:j], mid, *hi[j + 1 :]), a) + _leaves(
        (*lo[:j], mid, *lo[j + 1 :]), hi, b
    )


def _same_box(cert: dict[str, Any], lo: tuple, hi: tuple) -> bool:
    box = cert["box"]
    return [Fraction(v) for v in box["lower"]] == list(lo) and [
        Fraction(v) for v in box["upper"]
    ] == list(hi)


def _audit_leaf(cert: dict[str, Any], net_stages: list, conj: tuple, dtype: str) -> str | None:
    stages = cert["network"]["stages"]
    if stages[:-1] != net_stages or stages[-1]["op"] != "linear":
        return "the certificate's network is not the model followed by the rows"
    W = [[_decode(h, dtype) for h in r] for r in stages[-1]["weight"]]
    if W != [list(a) for a, _ in conj] or any(_decode(h, dtype) != 0 for h in stages[-1]["bias"]):
        return "the certificate's objective layer is not the conjunction's rows"
    lv = cert["levels"]
    for i, (_, d) in enumerate(conj):
        if all(Fraction(lv[k]["lower"][i]) > d for k in ("real", "runtime")):
            return None
    return "no row is certified above its bound at both levels"


CHECKERS = {SPLIT_FORMAT: check_split}


def _audit_split(cert: dict[str, Any], base: dict[str, Any], case: Any, conj: tuple) -> str | None:
    """A checked split certificate proves this case's conjunction: its box, rows, network
    and model hash are the instance's."""
    if cert.get("format") != SPLIT_FORMAT:
        return "a split proof without a split certificate"
    if cert["network"] != base or cert["model_hash"] != canonical_sha(base):
        return "a split certificate is of another network"
    if not _same_box(cert, case.lower, case.upper):
        return "a split certificate is of another box"
    rows = [([Fraction(v) for v in r["a"]], Fraction(r["d"])) for r in cert["rows"]]
    if rows != [(list(a), d) for a, d in conj]:
        return "a split certificate's rows are not the conjunction's"
    return None


def audit(model: str, prop: str, res: Any) -> str | None:
    """None when every certificate of an unsat answer holds and they cover the property."""
    net = network_from_imported(from_onnx(model))
    dtype = net.result.dtype
    base = network_json(net.result, net.in_shape)
    cases = read_vnnlib_cases(prop)
    need = {(c, k) for c, p in enumerate(cases) for k in range(len(p.disjuncts))}
    for cert in res.certificates:
        CHECKERS.get(cert.get("format"), check_certificate)(cert)
    for pr in res.proofs:
        case = cases[pr.get("case", 0)]
        if pr.get("split"):
            conj = case.disjuncts[pr["conjunction"]]
            bad = _audit_split(res.certificates[pr["first"]], base, case, conj)
            if bad:
                return bad
            need.discard((pr.get("case", 0), pr["conjunction"]))
            continue
        if "top_label" in pr:
            cert = res.certificates[pr["first"]]
            ok = cert["property"] == ["top_label", pr["top_label"]] and all(
                cert["levels"][k]["holds"] for k in ("real", "runtime"))  # fmt: skip
            if not ok or not _same_box(cert, case.lower, case.upper):
                return "a top-label certificate does not prove the case"
            if cert["network"]["stages"] != base["stages"]:
                return "a top-label certificate is of another network"
            need -= {(pr.get("case", 0), k) for k in range(len(case.disjuncts))}
            continue
        conj = case.disjuncts[pr["conjunction"]]
        for idx, lo, hi in _leaves(case.lower, case.upper, pr["tree"]):
            cert = res.certificates[pr["first"] + idx]
            if not _same_box(cert, lo, hi):
                return "a leaf's certificate is of another box"
            bad = _audit_leaf(cert, base["stages"], conj, dtype)
            if bad:
                return bad
        need.discard((pr.get("case", 0), pr["conjunction"]))
    return None if not need else f"conjunctions without a proof: {sorted(need)}"


def reference(folder: str | None) -> dict[tuple[str, str], tuple[str, float | None]]:
    """(onnx basename, vnnlib basename) -> (majority answer, fastest time with it)."""
    votes: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for f in sorted(glob.glob(os.path.join(folder, "*.csv"))) if folder else []:
        with open(f, encoding="utf-8") as h:
            for row in csv.reader(h):
                if len(row) >= 6 and row[4].strip().upper() in ("SAT", "UNSAT"):
                    key = (os.path.basename(row[1]), os.path.basename(row[2]))
                    votes.setdefault(key, []).append((row[4].strip().lower(), float(row[5])))
    out = {}
    for key, vs in votes.items():
        ans = Counter(a for a, _ in vs).most_common(1)[0][0]
        out[key] = (ans, min(t for a, t in vs if a == ans))
    return out


def run_one(bench: str, onnx: str, prop: str, timeout: float, args: Any) -> tuple[str, float]:
    model, spec = os.path.join(bench, onnx), os.path.join(bench, prop)
    t0 = time.monotonic()
    try:
        res = verify_vnnlib(model, spec, timeout=timeout)
    except TorchLeanError as e:
        print(f"  error: {e}", file=sys.stderr)
        return "error", time.monotonic() - t0
    took = time.monotonic() - t0
    if res.status == "unsat" and args.check:
        bad = audit(model, spec, res)
        if bad:
            print(f"  audit failed: {bad}", file=sys.stderr)
            return "error", took
    if res.status == "sat" and args.cex_dir:
        name = f"{os.path.basename(onnx)}_{os.path.basename(prop)}.cex"
        with open(os.path.join(args.cex_dir, name), "w", encoding="utf-8") as f:
            f.write(format_result(res) + "\n")
    return res.status, took


def summary(rows: list[tuple[str, str, str, float]], ref: dict) -> str:
    lines = ["| instance | ours | time (s) | reference | best tool time (s) |",
             "|---|---|---:|---|---:|"]  # fmt: skip
    count: Counter[str] = Counter()
    for onnx, prop, got, took in rows:
        ans, best = ref.get((os.path.basename(onnx), os.path.basename(prop)), ("?", None))
        solved = got in ("sat", "unsat")
        count["solved"] += solved
        count["wrong"] += solved and ans in ("sat", "unsat") and got != ans
        count[got if not solved else "ok"] += 0 if solved else 1
        bt = "" if best is None else f"{best:.1f}"
        lines.append(f"| {os.path.basename(onnx)} {os.path.basename(prop)} | {got} | "
                     f"{took:.1f} | {ans} | {bt} |")  # fmt: skip
    head = (f"{len(rows)} instances: {count['solved']} solved, {count['wrong']} wrong, "
            f"{count['unknown']} unknown, {count['timeout']} timeout, "
            f"{count['error']} error")  # fmt: skip
    return head + "\n\n" + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench")
    ap.add_argument("--out", required=True)
    ap.add_argument("--instances", default=None)
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--timeout-scale", type=float, default=1.0)
    ap.add_argument("--reference", default=None)
    ap.add_argument("--summary", default=None)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--cex-dir", default=None)
    a = ap.parse_args(argv)
    todo = [x for x in instances(a.bench, a.instances)
            if not a.only or any(s in f"{x[0]},{x[1]}" for s in a.only)][:: a.stride]  # fmt: skip
    name = os.path.basename(os.path.normpath(a.bench))
    rows = []
    with open(a.out, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        for onnx, prop, t in todo:
            got, took = run_one(a.bench, onnx, prop, t * a.timeout_scale, a)
            w.writerow([name, onnx, prop, "0", got, f"{took:.3f}"])
            f.flush()
            print(f"{onnx} {prop}: {got} {took:.1f} s", flush=True)
            rows.append((onnx, prop, got, took))
    text = summary(rows, reference(a.reference))
    print(text.split("\n")[0])
    if a.summary:
        with open(a.summary, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
