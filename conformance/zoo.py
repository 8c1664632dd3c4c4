"""`python -m conformance.zoo [NAME ...]`: torchvision's classification families, random
weights, small inputs, imported through `torch.export` and checked against PyTorch;
`--source timm|transformers` runs the held-out models of `conformance.zoo_sources` instead.

Invariants:
- Per model: import time, graph nodes, distinct table ops, the max relative error of the
  outputs and of every parameter's gradient against PyTorch float64 autograd (model in
  eval mode; loss = sum of the outputs), and `check_link` in float32 (bitwise) for the
  entries marked `link` (the tiny configurations of `LINK_ZOO`; the spec side is
  `spec.vector`, which also checks the full-size models: scripts/link_full_size.py). A model
  that does not build or import is a row with the reason, never a crash.
- PyTorch's float64 reference is PyTorch's own kernels, except where a kernel is known to
  round through float32 in float64 (`INEXACT_KERNELS`): the error is then also reported
  against `exact_reference(model)`, the same model with those modules replaced by torch
  compositions whose float64 backward is exact (both numbers are printed).
- torchvision is optional (`pip install -e '.[vision]'`); without it the command says so
  and exits 2. The PyPI wheel of torchvision is built against CUDA torch: with the CPU
  torch its C++ extension does not load, and torchvision 0.28 then fails to import on two
  op registrations (`torchvision::nms`, `qnms`) that it does not guard. `vision_models()`
  declares those two schemas (no kernels) so the pure-Python model definitions import;
  the classification models never call them.
"""

from __future__ import annotations

import copy
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from runtime.interop import from_torch
from spec.errors import TorchLeanError
from spec.report_page import markdown_page, page_dir_problem

from .zoo_sources import ExportFailed, first_lines, onnx_export, perturb, vision_models

__all__ = [
    "HEADER",
    "INEXACT_KERNELS",
    "LINK_ZOO",
    "ZOO",
    "Entry",
    "check_model",
    "exact_reference",
    "main",
    "perturb",
    "vision_models",
]


@dataclass(frozen=True)
class Entry:
    """A model: `build(torchvision.models)` returns it (num_classes=10), input 1x3xSxS."""

    build: Callable[[Any], Any]
    side: int
    link: bool = False


def _tv(name: str, side: int = 32, **kw: Any) -> Entry:
    return Entry(lambda M: getattr(M, name)(num_classes=10, **kw), side)


def _regnet_tiny(M: Any) -> Any:
    params = M.regnet.BlockParams.from_init_params(
        depth=2, w_0=8, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25
    )
    return M.RegNet(params, num_classes=10, stem_width=8)


def _convnext_tiny_cfg(M: Any) -> Any:
    cfg = M.convnext.CNBlockConfig
    return M.convnext.ConvNeXt([cfg(8, 16, 1), cfg(16, None, 1)], num_classes=10)


def _mobilenet_v3_tiny(M: Any) -> Any:
    cfg = M.mobilenetv3.InvertedResidualConfig  # (in, kernel, expanded, out, SE, act, stride,
    setting = [  # dilation, width): squeeze-excitation (hardsigmoid) and hardswish blocks
        cfg(8, 3, 8, 8, True, "RE", 2, 1, 1.0),
        cfg(8, 3, 24, 8, False, "RE", 1, 1, 1.0),
        cfg(8, 5, 24, 16, True, "HS", 2, 1, 1.0),
        cfg(16, 5, 32, 16, True, "HS", 1, 1, 1.0),
    ]
    return M.MobileNetV3(setting, last_channel=32, num_classes=10)


def _efficientnet_tiny(M: Any) -> Any:
    cfg = M.efficientnet.MBConvConfig  # (expand, kernel, stride, in, out, layers)
    setting = [cfg(1, 3, 1, 8, 8, 1), cfg(4, 3, 2, 8, 16, 1)]
    return M.EfficientNet(setting, dropout=0.2, num_classes=10)


ZOO: dict[str, Entry] = {
    "alexnet": _tv("alexnet", 64),
    "alexnet_224": _tv("alexnet", 224),
    "resnet18": _tv("resnet18"),
    "resnet50": _tv("resnet50"),
    "mobilenet_v2": _tv("mobilenet_v2"),
    "mobilenet_v3_small": _tv("mobilenet_v3_small"),
    "efficientnet_b0": _tv("efficientnet_b0"),
    "regnet_y_400mf": _tv("regnet_y_400mf"),
    "shufflenet_v2_x0_5": _tv("shufflenet_v2_x0_5"),
    "squeezenet1_1": _tv("squeezenet1_1"),
    "mnasnet0_5": _tv("mnasnet0_5"),
    "densenet121": _tv("densenet121"),
    "vgg11": _tv("vgg11"),
    "googlenet": _tv("googlenet", aux_logits=False, init_weights=True),
    "inception_v3": _tv("inception_v3", 75, aux_logits=False, init_weights=True),
    "convnext_tiny": _tv("convnext_tiny"),
    "vit_tiny": Entry(
        lambda M: M.VisionTransformer(
            image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32,
            num_classes=10,
        ),
        32,
    ),
    "swin_tiny": Entry(
        lambda M: M.SwinTransformer(
            patch_size=[4, 4], embed_dim=8, depths=[1, 1], num_heads=[1, 2],
            window_size=[4, 4], num_classes=10,
        ),
        32,
    ),
}  # fmt: skip
"""The campaign: torchvision's builders at `num_classes=10` (ViT and Swin in small
configurations: the builders fix their widths)."""

LINK_ZOO: dict[str, Entry] = {
    "resnet_1111_8": Entry(
        lambda M: M.resnet.ResNet(M.resnet.BasicBlock, [1, 1, 1, 1], num_classes=10), 8, True
    ),
    "shufflenet_tiny": Entry(
        lambda M: M.ShuffleNetV2([1, 1, 1], [8, 8, 16, 32, 32], num_classes=10), 16, True
    ),
    "mobilenet_v2_w01": Entry(lambda M: M.MobileNetV2(num_classes=10, width_mult=0.1), 16, True),
    "densenet_tiny": Entry(lambda M: M.DenseNet(4, (1, 1), 8, 2, num_classes=10), 16, True),
    "regnet_tiny": Entry(_regnet_tiny, 16, True),
    "mobilenet_v3_tiny": Entry(_mobilenet_v3_tiny, 16, True),
    "efficientnet_tiny": Entry(_efficientnet_tiny, 16, True),
    "mnasnet_a01": Entry(lambda M: M.MNASNet(0.1, num_classes=10), 16, True),
    "squeezenet1_1_32": Entry(lambda M: M.squeezenet1_1(num_classes=10), 32, True),
    "convnext_tiny_cfg": Entry(_convnext_tiny_cfg, 16, True),
}
"""Tiny configurations of the same families where the float32 link check (pure-Python
spec) completes in reasonable time; they are also checked against PyTorch."""


INEXACT_KERNELS: dict[str, str] = {
    "Hardsigmoid": "PyTorch's CPU hardsigmoid_backward multiplies by one_sixth = "
    "scalar_t(1.0f / 6.0f), 1/6 rounded to float32 (relative error 3.0e-8) even in float64",
    "BatchNorm": "PyTorch 2.13's CPU eval-mode batch_norm backward gives wrong weight, bias "
    "and input gradients for a batch of one when the incoming gradient is strided like "
    "channels-last (after flatten(2).transpose(1, 2)): S*S times too large at S x S; "
    "conformance.zoo_sources.exact_reference_mode writes it as elementwise ops",
}
"""torch.nn modules whose float64 CPU kernel rounds a constant through float32; the
exact reference replaces them by torch compositions (clamp(x + 3, 0, 6) / 6)."""


def exact_reference(model: Any) -> tuple[Any, list[str]]:
    """A deep copy of `model` with every module of `INEXACT_KERNELS` replaced by a torch
    composition with an exact float64 backward, and the replaced module paths."""
    import torch

    class ExactHardsigmoid(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.clamp(x + 3, 0, 6) / 6

    ref = copy.deepcopy(model)
    swapped = []
    for path, parent in ref.named_modules():
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Hardsigmoid):  # INEXACT_KERNELS
                setattr(parent, name, ExactHardsigmoid())
                swapped.append(f"{path}.{name}".lstrip("."))
    return ref, swapped


def _diff(got: Any, want: Any) -> tuple[float, float]:
    """(max |got - want|, that / max |want|) of one array."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if not want.size:
        return 0.0, 0.0
    if got.shape != want.shape:
        return float("inf"), float("inf")
    err = float(np.max(np.abs(got - want)))
    return err, err / max(float(np.max(np.abs(want))), 1e-300)


def _max2(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return max((a for a, _ in pairs), default=0.0), max((r for _, r in pairs), default=0.0)


def _errors(model: Any, x: Any, out: Any, grads: dict[str, Any]) -> dict[str, Any]:
    """Max abs / rel differences of the output and of every parameter gradient found in
    `grads` (by name) against `model`'s float64 autograd (loss = sum of the output)."""
    model.zero_grad(set_to_none=True)
    want = model(x)
    want.sum().backward()
    params = dict(model.named_parameters())
    found = [n for n in params if n in grads]
    v = _diff(out[0], want.detach().numpy())
    g = _max2([_diff(grads[n], params[n].grad.numpy()) for n in found])
    return {"val": v, "grad": g, "grads_compared": (len(found), len(params))}


def _import(route: str, m: Any, x: Any) -> Any:
    if route == "torch":
        return from_torch(m, (x,))
    from runtime.interop import from_onnx

    try:
        proto = onnx_export(m, x)
    except Exception as e:  # torch's exporter refuses the model: a row, not a crash
        raise ExportFailed(f"torch.onnx.export: {type(e).__name__}: {first_lines(e)}") from e
    t0 = time.perf_counter()
    imp = from_onnx(proto, inputs={proto.graph.input[0].name: x.numpy()})
    return imp, time.perf_counter() - t0


def check_model(
    name: str, seed: int = 0, route: str = "torch", link: bool | None = None
) -> dict[str, Any]:
    """One row: import by `route` ("torch": torch.export; "onnx": torch's ONNX exporter
    then `from_onnx`), compare with PyTorch (float64), link check (float32) when `link`
    (default: the entry's mark). Parameters are perturbed (`perturb`) on both routes."""
    import torch

    entry = {**ZOO, **LINK_ZOO}[name]
    torch.manual_seed(seed)
    row: dict[str, Any] = {"model": name, "route": route, "input": f"{entry.side}x{entry.side}"}
    try:
        m = perturb(entry.build(vision_models()).double().eval(), seed)
    except Exception as e:  # torchvision refuses this configuration
        row["note"] = f"not built: {type(e).__name__}: {first_lines(e)}"
        return row
    x = torch.randn(1, 3, entry.side, entry.side, dtype=torch.float64)
    t0 = time.perf_counter()
    try:
        imp = _import(route, m, x)
    except ExportFailed as e:
        row["note"] = "not exported: " + str(e)[:300]
        return row
    except TorchLeanError as e:
        row["note"] = "refused: " + first_lines(e)
        return row
    row["import_s"] = time.perf_counter() - t0
    if isinstance(imp, tuple):  # the ONNX route: export time apart
        imp, row["import_s"] = imp
    row["nodes"] = len(imp.graph.nodes)
    row["ops"] = len({n.op for n in imp.graph.nodes})
    out, grads = imp.run()
    row.update(_errors(m, x, out, grads))
    ref, swapped = exact_reference(m)
    if swapped:
        row["exact"] = _errors(ref, x, out, grads)["grad"]
    if entry.link if link is None else link:
        t0 = time.perf_counter()
        row["link_f32"] = "holds" if imp.check_link("float32").ok else "FAILS"
        row["link_s"] = time.perf_counter() - t0
    return row


def _cells(r: dict[str, Any]) -> str:
    def f(k: str, fmt: str) -> str:
        return format(r[k], fmt) if k in r else "—"

    def ar(k: str) -> str:
        return f"{r[k][0]:.1e} / {r[k][1]:.1e}" if k in r else "—"

    link = f"{r['link_f32']} ({r['link_s']:.0f} s)" if "link_f32" in r else "not run"
    found = "{}/{}".format(*r["grads_compared"]) if "grads_compared" in r else "—"
    return (
        f"| {r['model']} | {r['route']} | {r['input']} | {f('import_s', '.1f')} "
        f"| {f('nodes', ',')} | {f('ops', 'd')} | {ar('val')} | {ar('grad')} | {found} "
        f"| {ar('exact')} | {link} | {r.get('note', '')} |"
    )


HEADER = (
    "| model | route | input | import s | nodes | ops | values max abs / rel "
    "| grads max abs / rel | grads compared | grads vs exact ref | link f32 | note |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _take(args: list[str], flag: str, default: str) -> str:
    """The value after `flag` in `args` (both removed), or `default` ("" if it dangles)."""
    if flag not in args:
        return default
    k = args.index(flag)
    value = args[k + 1] if k + 1 < len(args) else ""
    del args[k : k + 2]
    return value


def _emit(lines: list[str], line: str) -> None:
    lines.append(line)
    print(line, flush=True)


def _torchvision_rows(
    names: list[str], routes: list[str], link: bool | None, lines: list[str]
) -> int:
    try:
        vision_models()
    except ImportError as e:
        print(f"python -m conformance.zoo: needs torchvision ({e})", file=sys.stderr)
        return 2
    _emit(lines, HEADER)
    for n in names or list(ZOO):
        for route in routes:
            _emit(lines, _cells(check_model(n, route=route, link=link)))
    return 0


def _source_rows(
    source: str, names: list[str], routes: list[str], link: bool | None, lines: list[str]
) -> int:
    from .zoo_sources import SOURCE_HEADER, check_source_model, library, source_cells

    try:
        library(source)
    except ImportError as e:
        print(f"python -m conformance.zoo: needs {source} ({e})", file=sys.stderr)
        return 2
    _emit(lines, SOURCE_HEADER)
    for n in names or list(_known(source)):
        for route in routes:
            row = check_source_model(source, n, route=route, link=bool(link))
            _emit(lines, source_cells(row))
    return 0


def _known(source: str) -> dict[str, Any]:
    from .zoo_sources import SOURCES

    return {**ZOO, **LINK_ZOO} if source == "torchvision" else dict(SOURCES.get(source, {}))


def main(argv: list[str] | None = None) -> int:
    """`[--source torchvision|timm|transformers] [--route torch|onnx|both] [--link]
    [--html DIR] NAME ...` (default: every model of the source, torch route); `--html DIR`
    also writes the table as a page (`spec.report_page`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    link = True if "--link" in args else None
    args = [a for a in args if a != "--link"]
    want = _take(args, "--route", "torch")
    routes = {"torch": ["torch"], "onnx": ["onnx"], "both": ["torch", "onnx"]}.get(want, [])
    source = _take(args, "--source", "torchvision")
    html = _take(args, "--html", "-")
    known = _known(source) if source in ("torchvision", "timm", "transformers") else {}
    bad = [n for n in args if n not in known]
    if bad or not routes or not known or not html:
        print(f"python -m conformance.zoo: unknown model(s) {bad}, route or source; models: "
              f"{list(known)}; --route torch|onnx|both; --source torchvision|timm|"
              "transformers; --html DIR", file=sys.stderr)  # fmt: skip
        return 2
    if html != "-" and (why := page_dir_problem(html)):
        print(f"python -m conformance.zoo: {why}", file=sys.stderr)
        return 2
    run = _torchvision_rows if source == "torchvision" else partial(_source_rows, source)
    lines: list[str] = []
    rc = run(args, routes, link, lines)
    if rc == 0 and html != "-":
        cmd = shlex.join(
            ["python", "-m", "conformance.zoo", *(sys.argv[1:] if argv is None else argv)]
        )
        markdown_page(html, "Model zoo", "\n".join(lines) + "\n", {"command": cmd})
    return rc


if __name__ == "__main__":
    sys.exit(main())
