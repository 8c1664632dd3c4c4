"""`python -m benchmarks`: our runtime against its peers, in one run.

Figures (see docs/BENCHMARKS.md for the targets and the discussion):
1. per-op overhead of the eager Session on tiny tensors (a 100-op chain on shape (4,),
   forward + backward), against PyTorch, HIPS autograd, JAX and micrograd;
2. one training step (forward + backward + SGD) of an MLP 784-512-512-10 at batch 128,
   float32 and float64, eager and typed-graph Session modes, against the peers;
3. the `ordered`/`fast` slowdown on the same MLP step;
4. conformance throughput (cases checked per second, per dtype and property);
5. the bytes the tape holds in the MLP step against the forward values its backward needs;
6. model-scale ops: a conv layer and an attention block, forward + backward, against
   PyTorch CPU (`benchmarks.model_ops`).

Peers are optional: a missing one is skipped with a message on stderr. Results go to stdout
(a summary), to the Markdown report (between the markers in docs/BENCHMARKS.md, or a new
file), to a PNG plot (matplotlib; skipped with a message when it is missing) and, on
request, to JSON. Nothing here asserts on time.

Invariants:
- This module parses the flags and runs the figures; the figures are measured in
  `benchmarks.figures` (and `benchmarks.model_ops`), judged in `benchmarks.targets`, and
  written by `benchmarks.report` (Markdown, summary) and `benchmarks.plot` (PNG).
- Thread counts are set in the environment before anything imports NumPy or a peer, and
  limited again once the peers are loaded (they bring their own thread pools).
- Every bad flag is one line on stderr and exit 2 before anything runs: counts >= 1,
  `--only` and `--peers` names checked by the parser, the `--out`/`--png`/`--json`/`--html`
  directories checked by `check_outputs`. `--html DIR` writes the Markdown report as a
  page with the plot beside it (`spec.report_page`).
- A run's measurement record holds the figures in a fixed order (chain, mlp, ordered,
  conformance, memory, model), each present only when selected with `--only` (all by
  default), then the targets and the seconds taken.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .figures import fig_chain, fig_conformance, fig_memory, fig_mlp, fig_ordered
from .harness import environment, limit_threads, log, set_thread_env
from .plot import plot
from .report import markdown, summary, write_markdown
from .targets import targets

__all__ = [
    "DEFAULT_OUT",
    "DEFAULT_PNG",
    "PEER_KEYS",
    "ROOT",
    "check_outputs",
    "config",
    "load_peers",
    "main",
    "parser",
    "run",
    "write_html",
    "write_outputs",
]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "BENCHMARKS.md"
DEFAULT_PNG = ROOT / "docs" / "benchmarks.png"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(argv)
    a.argv = argv
    bad = check_outputs(a)
    if bad:
        print(f"python -m benchmarks: {bad}", file=sys.stderr)
        return 2
    set_thread_env(a.threads)
    res = run(a)
    write_outputs(res, a)
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (`prog: error: message`) and exit 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def _count(low: int) -> Callable[[str], int]:
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


def _choices(known: tuple[str, ...], none_ok: bool) -> Callable[[str], str]:
    """A comma list of names from `known` ('' for all; 'none' when `none_ok`)."""

    def parse(text: str) -> str:
        if text == "" or (none_ok and text == "none"):
            return text
        bad = [x for x in text.split(",") if x not in known]
        if bad:
            raise argparse.ArgumentTypeError(
                f"unknown name(s) {', '.join(map(repr, bad))}; expected a comma list of "
                + ", ".join(known)
                + (" or none" if none_ok else "")
            )
        return text

    parse.__name__ = "name list"
    return parse


def check_outputs(a: argparse.Namespace) -> str:
    """Why the output files cannot be written ('' when they can): checked before the run."""
    html = getattr(a, "html", None)
    parent = Path(html).resolve().parent if html else None
    if html and Path(html).exists() and not Path(html).is_dir():
        return f"--html {html!r} is not a directory"
    if parent is not None and not Path(html).is_dir() and not parent.is_dir():
        return f"--html {html!r}: the directory {str(parent)!r} does not exist"
    for flag in ("out", "png", "json"):
        path = getattr(a, flag)
        if not path:
            continue
        d = Path(path).resolve().parent
        if Path(path).is_dir():
            return f"--{flag} {path!r} is a directory"
        if not d.is_dir():
            return f"--{flag} {path!r}: the directory {str(d)!r} does not exist"
        if not os.access(d, os.W_OK | os.X_OK):
            return f"--{flag} {path!r}: the directory {str(d)!r} is not writable"
    return ""


PEER_KEYS = ("torch", "autograd", "jax", "micrograd")
"""The keys of `benchmarks.workloads.PEERS` (not imported here: it loads NumPy before the
thread counts are set)."""


def parser() -> argparse.ArgumentParser:
    """The command line of `python -m benchmarks` (errors: one line, exit 2)."""
    p = _Parser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of everything")
    p.add_argument(
        "--repeat",
        type=_count(1),
        default=7,
        help="rounds scale: chain 6x, MLP 3x, ordered 1x this (default 7)",
    )
    p.add_argument(
        "--threads",
        type=_count(1),
        default=1,
        help="BLAS/OpenMP/XLA threads for us and every peer (default 1)",
    )
    p.add_argument(
        "--peers",
        default="torch,autograd,jax,micrograd",
        type=_choices(PEER_KEYS, none_ok=True),
        help="comma list of peers to measure, or 'none'",
    )
    p.add_argument(
        "--only",
        default="",
        type=_choices(tuple(key for key, _ in _FIGURES), none_ok=False),
        help="comma list of figures: chain,mlp,ordered,conformance,memory,model",
    )
    p.add_argument(
        "--conf-examples",
        type=_count(1),
        default=50,
        help="conformance examples per property (default 50)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="Markdown report (default docs/BENCHMARKS.md; none with --quick)",
    )
    p.add_argument(
        "--png", default=None, help="plot (default docs/benchmarks.png; none with --quick)"
    )
    p.add_argument("--json", default=None, help="also write the raw results as JSON")
    p.add_argument(
        "--html",
        default=None,
        metavar="DIR",
        help="also write the report as a static page DIR/index.html (with the plot beside it)",
    )
    return p


def write_outputs(res: dict[str, Any], a: argparse.Namespace) -> None:
    """The report on stdout and in `--out`, the plot in `--png`, the record in `--json`,
    the targets' summary on stderr."""
    out = a.out or (None if a.quick else str(DEFAULT_OUT))
    png = a.png or (None if a.quick else str(DEFAULT_PNG))
    md = markdown(res)
    print(md)
    if out:
        write_markdown(Path(out), md)
        log(f"benchmarks: report written to {out}")
    if png and plot(res, Path(png)):
        log(f"benchmarks: plot written to {png}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str))
    if a.html:
        log(f"benchmarks: page written to {write_html(res, md, a)}")
    log(summary(res))


def write_html(res: dict[str, Any], md: str, a: argparse.Namespace) -> str:
    """`DIR/index.html`: the Markdown report as a page, the plot beside it when matplotlib
    draws one (`spec.report_page.markdown_page`; imported here, after the thread counts)."""
    from spec.report_page import markdown_page

    d = Path(a.html)
    d.mkdir(parents=True, exist_ok=True)
    images = {}
    if plot(res, d / "benchmarks.png"):
        images["benchmarks.png"] = (d / "benchmarks.png").read_bytes()
    cmd = shlex.join(["python", "-m", "benchmarks", *getattr(a, "argv", [])])
    return markdown_page(str(d), "Benchmarks", md, {"command": cmd}, images)


def config(a: argparse.Namespace) -> dict[str, Any]:
    """The sizes and round counts of the run: tiny with `--quick`, else scaled by `--repeat`."""
    if a.quick:
        return {
            "chain_n": 20,
            "chain_rounds": 5,
            "sizes": (64, 32, 32, 10),
            "batch": 16,
            "mlp_rounds": 3,
            "ordered_rounds": 2,
            "conf_dtypes": ("exact", "float32"),
            "conf_examples": 3,
            "dtypes": ("float32", "float64"),
            "conv": (2, 3, 8, 4),
            "attn": (2, 8, 8, 2),
            "model_rounds": 2,
        }
    r = a.repeat
    return {
        "chain_n": 100,
        "chain_rounds": 6 * r,
        "sizes": (784, 512, 512, 10),
        "batch": 128,
        "mlp_rounds": 3 * r,
        "ordered_rounds": r,
        "conf_dtypes": ("exact", "float64", "float32", "bfloat16", "float16"),
        "conf_examples": a.conf_examples,
        "dtypes": ("float32", "float64"),
        "conv": (8, 16, 32, 32),
        "attn": (8, 64, 64, 4),
        "model_rounds": r,
    }


def load_peers(wanted: list[str]) -> tuple[list[Any], dict[str, str]]:
    """The peers in `wanted` that import, and why each other peer is skipped."""
    from .workloads import PEERS

    loaded, skipped = [], {}
    for p in PEERS:
        if p.key not in wanted:
            skipped[p.key] = "not requested (--peers)"
            continue
        try:
            mod = p.load()
        except ImportError as e:
            skipped[p.key] = f"not installed ({e}); install with `{p.install}`"
            log(f"benchmarks: peer {p.label} skipped: not installed ({p.install})")
            continue
        if p.key == "jax":
            mod.config.update("jax_enable_x64", True)  # float64 arrays stay float64
        loaded.append(p)
    return loaded, skipped


# --------------------------------------------------------------------------- run


def run(a: argparse.Namespace) -> dict[str, Any]:
    """Measure the selected figures; the run's measurement record."""
    cfg = config(a)
    limit_threads(a.threads)
    res: dict[str, Any] = {
        "command": "python -m benchmarks " + " ".join(a.argv),
        "quick": a.quick,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "environment": environment(),
    }
    wanted = [p for p in a.peers.split(",") if p] if a.peers != "none" else []
    peers, skipped = load_peers(wanted)
    threads = limit_threads(a.threads)  # again: the peers brought their own pools
    res["threads"] = threads
    res["peers"] = {p.key: {"label": p.label, "version": p.version} for p in peers}
    res["peers_skipped"] = skipped
    only = set(a.only.split(",")) if a.only else {key for key, _ in _FIGURES}
    t0 = time.perf_counter()
    for key, measure in _FIGURES:
        if key in only:
            res[key] = measure(cfg, peers)
    res["targets"] = targets(res)
    res["seconds"] = time.perf_counter() - t0
    return res


def _have_torch(peers: list[Any]) -> bool:
    return any(p.key == "torch" for p in peers)


def _chain(cfg: dict[str, Any], peers: list[Any]) -> Any:
    log("benchmarks: per-op overhead (chain) ...")
    return fig_chain(cfg, peers)


def _mlp(cfg: dict[str, Any], peers: list[Any]) -> Any:
    out = {}
    for dt in cfg["dtypes"]:
        log(f"benchmarks: MLP step {dt} ...")
        out[dt] = fig_mlp(cfg, peers, dt)
    return out


def _ordered(cfg: dict[str, Any], peers: list[Any]) -> Any:
    out = {}
    for dt in cfg["dtypes"]:
        log(f"benchmarks: ordered/fast {dt} ...")
        out[dt] = fig_ordered(cfg, dt)
    return out


def _conformance(cfg: dict[str, Any], peers: list[Any]) -> Any:
    log("benchmarks: conformance throughput ...")
    return fig_conformance(cfg)


def _memory(cfg: dict[str, Any], peers: list[Any]) -> Any:
    log("benchmarks: tape memory ...")
    return fig_memory(cfg, _have_torch(peers))


def _model(cfg: dict[str, Any], peers: list[Any]) -> Any:
    from .model_ops import fig_model

    log("benchmarks: model-scale ops (conv layer, attention block) ...")
    have_torch = _have_torch(peers)
    if not have_torch:
        log("benchmarks: PyTorch absent: model-scale figure without a reference column")
    return fig_model(cfg, have_torch)


# the figures, in measuring (and record) order: (name for --only, runner)
_FIGURES: tuple[tuple[str, Callable[[dict[str, Any], list[Any]], Any]], ...] = (
    ("chain", _chain),
    ("mlp", _mlp),
    ("ordered", _ordered),
    ("conformance", _conformance),
    ("memory", _memory),
    ("model", _model),
)
