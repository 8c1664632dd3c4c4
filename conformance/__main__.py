"""`python -m conformance`: run the conformance suite and write its report."""

from __future__ import annotations

import argparse
import platform
import sys
from importlib.metadata import version

from .suite import IEEE_DTYPES, default_properties, run_property, write_reports


def _progress_bar(total: int):  # type: ignore[no-untyped-def]
    from tqdm import tqdm

    return tqdm(total=total, file=sys.stderr, disable=not sys.stderr.isatty(),
                unit="case", leave=False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m conformance", description=__doc__)
    p.add_argument("--backend", default="numpy", help="array backend (default: numpy)")
    p.add_argument("--dtype", default="all",
                   help="comma list of exact,float64,float32,bfloat16,float16 (default: all)")
    p.add_argument("--kernels", default="all", choices=["all", "fast", "ordered"])
    p.add_argument("--max-examples", type=int, default=150, help="cases per property")
    p.add_argument("--seed", type=int, default=None,
                   help="Hypothesis seed (default: derandomised, reproducible)")
    p.add_argument("--report", default="conformance-report",
                   help="report path prefix (writes PREFIX.json and PREFIX.md)")
    a = p.parse_args(argv)
    if a.backend != "numpy":
        print(f"backend {a.backend!r} is not available yet (only 'numpy')", file=sys.stderr)
        return 2
    dtypes = ["exact", *IEEE_DTYPES] if a.dtype == "all" else a.dtype.split(",")
    kernels = ["fast", "ordered"] if a.kernels == "all" else [a.kernels]
    props = default_properties(dtypes, kernels)
    rows = []
    bar = _progress_bar(len(props) * a.max_examples)
    try:
        for prop in props:
            bar.set_description(f"{prop.name}/{prop.dtype}/{prop.kernels}")
            rows.append(run_property(prop, a.max_examples, a.seed, progress=lambda: bar.update()))
    finally:
        bar.close()
    print(f"{'property':<22}{'dtype':<10}{'kernels':<9}{'cases':>6}{'passed':>8}{'failed':>8}"
          f"{'max ulp':>10}{'bound ratio':>13}")
    for r in rows:
        print(f"{r.property:<22}{r.dtype:<10}{r.kernels:<9}{r.cases:>6}{r.passed:>8}"
              f"{r.failed:>8}{r.max_ulp:>10.3g}{r.worst_bound_ratio:>13.3g}")
    failed = [r for r in rows if r.failed]
    for r in failed:
        print(f"\nFAILED {r.property}/{r.dtype}/{r.kernels}: {r.failure['message']}")
        print(r.failure["graph_text"])
    meta = {"backend": a.backend, "max_examples": a.max_examples, "seed": a.seed,
            "python": platform.python_version(), "numpy": version("numpy"),
            "torchlean": version("torchlean")}
    jpath, mpath = write_reports(rows, a.report, meta)
    total = sum(r.cases for r in rows)
    print(f"\n{total} cases, {len(failed)} failing properties; reports: {jpath}, {mpath}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
