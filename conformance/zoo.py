"""`python -m conformance.zoo [NAME ...]`: torchvision's classification families, random
weights, small inputs, imported through `torch.export` and checked against PyTorch.

Invariants:
- Per model: import time, graph nodes, distinct table ops, the max relative error of the
  outputs and of every parameter's gradient against PyTorch float64 autograd (model in
  eval mode; loss = sum of the outputs), and `check_link` in float32 (bitwise) up to
  `LINK_MAX_VALUES` graph input values (the spec side is pure Python). A model that does
  not import is a row with the refusal, never a crash.
- torchvision is optional (`pip install -e '.[vision]'`); without it the command says so
  and exits 2. The PyPI wheel of torchvision is built against CUDA torch: with the CPU
  torch its C++ extension does not load, and torchvision 0.28 then fails to import on two
  op registrations (`torchvision::nms`, `qnms`) that it does not guard. `vision_models()`
  declares those two schemas (no kernels) so the pure-Python model definitions import;
  the classification models never call them.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from runtime.interop import from_torch
from spec.errors import TorchLeanError

__all__ = ["LINK_MAX_VALUES", "ZOO", "check_model", "main", "vision_models"]

# name -> (constructor keyword arguments, input side)
ZOO: dict[str, tuple[dict[str, Any], int]] = {
    "alexnet": ({}, 64),
    "resnet18": ({}, 32),
    "resnet50": ({}, 32),
    "mobilenet_v2": ({}, 32),
    "mobilenet_v3_small": ({}, 32),
    "efficientnet_b0": ({}, 32),
    "regnet_y_400mf": ({}, 32),
    "shufflenet_v2_x0_5": ({}, 32),
    "squeezenet1_1": ({}, 32),
    "mnasnet0_5": ({}, 32),
    "densenet121": ({}, 32),
    "vgg11": ({}, 32),
    "googlenet": ({"aux_logits": False, "init_weights": True}, 32),
    "convnext_tiny": ({}, 32),
    "vit_b_16": ({"image_size": 32, "patch_size": 16, "num_layers": 1}, 32),
    "swin_t": ({}, 32),
}


LINK_MAX_VALUES = 50_000
"""`check_link` evaluates the spec in pure Python: run only up to this many graph input
values (parameters and inputs); larger models get "not run" in the link column."""


def vision_models() -> Any:
    """`torchvision.models` (see the module docstring for the two declared schemas)."""
    import torch

    for op in ("nms", "qnms"):
        try:
            torch.library.define(
                f"torchvision::{op}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"
            )
        except RuntimeError:  # already declared (the extension loaded, or a second call)
            pass
    import torchvision.models as models

    return models


def _rel(got: Any, want: Any) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-300)
    return float(np.max(np.abs(got - want))) / scale if want.size else 0.0


def check_model(name: str, seed: int = 0) -> dict[str, Any]:
    """One row: import, compare with PyTorch (float64), link check (float32)."""
    import torch

    kw, side = ZOO[name]
    torch.manual_seed(seed)
    m = getattr(vision_models(), name)(num_classes=10, **kw).double().eval()
    x = torch.randn(1, 3, side, side, dtype=torch.float64)
    row: dict[str, Any] = {"model": name, "input": f"1x3x{side}x{side}"}
    t0 = time.perf_counter()
    try:
        imp = from_torch(m, (x,))
    except TorchLeanError as e:
        row["import"] = "refused: " + "; ".join(str(e).splitlines()[1:4] or [str(e)])
        return row
    row["import_s"] = time.perf_counter() - t0
    row["nodes"] = len(imp.graph.nodes)
    row["ops"] = len({n.op for n in imp.graph.nodes})
    want = m(x)
    want.sum().backward()
    out, grads = imp.run()
    err = _rel(out[0], want.detach().numpy())
    for n, p in m.named_parameters():
        err = max(err, _rel(grads[n], p.grad.numpy()))
    row["max_rel_err"] = err
    size = sum(int(np.prod(v.shape)) for v in imp.values.values())
    if size <= LINK_MAX_VALUES:
        row["link_f32"] = imp.check_link("float32").ok
    else:
        row["link_f32"] = f"not run ({size} input values > {LINK_MAX_VALUES})"
    return row


def main(argv: list[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or list(ZOO)
    bad = [n for n in names if n not in ZOO]
    if bad:
        print(
            f"python -m conformance.zoo: unknown model(s) {bad}; known: {list(ZOO)}",
            file=sys.stderr,
        )
        return 2
    try:
        vision_models()
    except ImportError as e:
        print(f"python -m conformance.zoo: needs torchvision ({e})", file=sys.stderr)
        return 2
    print("| model | input | import s | nodes | ops | max rel err | link f32 | note |")
    print("|---|---|---|---|---|---|---|---|")
    for n in names:
        r = check_model(n)
        print(
            f"| {n} | {r['input']} | {r.get('import_s', float('nan')):.2f} | {r.get('nodes', '')} "
            f"| {r.get('ops', '')} | {r.get('max_rel_err', float('nan')):.2g} "
            f"| {r.get('link_f32', '')} | {r.get('import', '')} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
