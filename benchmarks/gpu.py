"""`python -m benchmarks.gpu`: the CUDA backend against peers measured in the same run.

Figures (each a median of interleaved rounds, every GPU call synchronised before the clock
stops; ratios are paired per round):
- the MLP 784-512-512-10 SGD step (float32, batch 256): torchlean on CUDA (`fast` and
  `ordered`), torchlean on the CPU, and PyTorch on CUDA where installed;
- the per-op eager overhead: a chain of 64 small ops with its backward, torchlean CUDA
  against PyTorch CUDA.
Writes a JSON file and prints a table. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from .harness import environment, interleaved, paired_ratio, table
from .workloads import mlp_init, our_chain, our_mlp, torch_chain, torch_mlp

__all__ = ["main"]


def _sync_cupy() -> Callable[[], None]:
    import cupy

    return cupy.cuda.Device().synchronize


def _timed(fn: Callable[[], Any], sync: Callable[[], None]) -> Callable[[], Any]:
    def run() -> Any:
        out = fn()
        sync()
        return out

    return run


def _torch_cuda() -> Any:
    """PyTorch with a CUDA device and TF32 off, or None."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--out", default="gpu-benchmarks.json")
    a = p.parse_args(argv)
    from runtime.backends import get_backend

    backend = get_backend("cupy")  # raises without a GPU: nothing to measure then
    sync = _sync_cupy()
    init = mlp_init((784, 512, 512, 10), 256, "float32")
    mlp, torch = _mlp_contenders(init, sync)
    res: dict[str, Any] = {"env": environment(), "backend": backend.info}
    res["mlp"] = _mlp_figure(mlp, a.rounds)
    res["chain64"] = _chain_figure(sync, torch, a.rounds)
    _print_results(res)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1, default=str)
    return 0


def _mlp_contenders(
    init: Any, sync: Callable[[], None]
) -> tuple[dict[str, Callable[[], Any]], Any]:
    """The MLP steps (ours on CUDA, fast and ordered, and on the CPU; PyTorch CUDA where
    present) and PyTorch with CUDA, or None."""
    mlp: dict[str, Callable[[], Any]] = {
        "torchlean cuda fast": _timed(our_mlp(init, device="cuda")[0], sync),
        "torchlean cuda ordered": _timed(our_mlp(init, kernels="ordered", device="cuda")[0], sync),
        "torchlean cpu fast": our_mlp(init)[0],
    }
    torch = _torch_cuda()
    tmlp = None if torch is None else _timed(torch_mlp(init, "cuda"), torch.cuda.synchronize)
    if tmlp is not None:
        mlp["pytorch cuda"] = tmlp
    return mlp, torch


def _mlp_figure(mlp: dict[str, Callable[[], Any]], rounds: int) -> dict[str, Any]:
    print("timing the MLP step ...", file=sys.stderr)
    t = interleaved(mlp, rounds)
    out: dict[str, Any] = {"median_s": t.medians()}
    if "pytorch cuda" in mlp:
        out["ratio_fast_vs_pytorch_cuda"] = paired_ratio(t, "torchlean cuda fast", "pytorch cuda")
    out["ratio_ordered_vs_fast"] = paired_ratio(t, "torchlean cuda ordered", "torchlean cuda fast")
    out["ratio_cuda_fast_vs_cpu_fast"] = paired_ratio(
        t, "torchlean cuda fast", "torchlean cpu fast"
    )
    return out


def _chain_figure(sync: Callable[[], None], torch: Any, rounds: int) -> dict[str, Any]:
    chain: dict[str, Callable[[], Any]] = {
        "torchlean cuda": _timed(our_chain(64, device="cuda"), sync)
    }
    tch = None if torch is None else _timed(torch_chain(64, "cuda"), torch.cuda.synchronize)
    if tch is not None:
        chain["pytorch cuda"] = tch
    print("timing the op chain ...", file=sys.stderr)
    tc = interleaved(chain, rounds)
    out: dict[str, Any] = {"median_s": tc.medians()}
    if tch is not None:
        out["ratio_vs_pytorch_cuda"] = paired_ratio(tc, "torchlean cuda", "pytorch cuda")
    return out


def _print_results(res: dict[str, Any]) -> None:
    rows = [["mlp step", k, f"{v * 1e3:.2f} ms"] for k, v in res["mlp"]["median_s"].items()]
    rows += [["chain 64", k, f"{v * 1e3:.2f} ms"] for k, v in res["chain64"]["median_s"].items()]
    print(table(["figure", "contender", "median"], rows))
    for fig in ("mlp", "chain64"):
        for k, v in res[fig].items():
            if k.startswith("ratio"):
                print(f"{fig} {k}: {v:.2f}")


if __name__ == "__main__":
    sys.exit(main())
