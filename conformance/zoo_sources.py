"""Held-out model sources for `python -m conformance.zoo --source timm|transformers`:
timm image models and Hugging Face decoder-only language models, random weights, small
configurations, imported by either route and checked against PyTorch float64.

Invariants:
- Models are built from configurations with random weights (seed 0; `zoo.perturb` moves
  every parameter so that no two are equal); nothing is ever downloaded
  (`HF_HUB_OFFLINE=1` is set before transformers is imported).
- The PyTorch reference is float64 autograd run under `exact_reference_mode()`: a cast
  of a float64 tensor to another float dtype (`.float()`, `.to(torch.float32)`, an op's
  `dtype=float32` on a float64 input) is the identity, and an op with a float64 operand
  reads its other float operands exactly in float64 (the import reads casts between
  float dtypes as identities and a float32 value known at import time as the exact
  rational of its float32 value, so a model that computes a part in float32 on purpose,
  such as Llama's RMSNorm, rotary angles and attention softmax, is compared with the
  same arithmetic in float64); values computed from no float64 tensor (XCiT's float32
  Fourier position encoding) are left as they are (the import evaluates them with torch
  too). `F.hardsigmoid` is torch's
  composition clamp(x + 3, 0, 6) / 6 (PyTorch's float64 hardsigmoid backward rounds 1/6
  through float32: `zoo.INEXACT_KERNELS`), and eval-mode `F.batch_norm` is the same
  normalisation written as torch elementwise ops (PyTorch 2.13's CPU eval batch-norm
  backward sums the weight and bias gradients wrongly for a batch of one when the
  incoming gradient is strided like channels-last, e.g. after `flatten(2).transpose(1,
  2)`: XCiT's patch embedding; see docs/INTEROP.md).
- The loss is the sum of the model's outputs (an image model's logits; a language
  model's own float64 causal cross entropy over the vocabulary, computed from its
  logits); the gradient of every parameter name (tied aliases included, as
  `named_parameters(remove_duplicate=False)` lists them) is compared.
- The error of a gradient array is cancellation-aware (`scaled_error`): max |got - want|
  / max(max |want|, FLOOR * G), G the largest |gradient| of the whole model. An array
  whose gradient is exactly zero in real arithmetic holds rounding noise on both sides;
  it is judged against the model's gradient scale instead of its own noise.
- On the ONNX route the reference's float `eps` attributes are rounded to float32
  (`float32_attributes`): an ONNX file holds float attributes in float32.
- A row passes when the output's and every gradient's error is <= TOL; an imported model
  above it is WRONG; a refusal is a row naming the construct (the importer's message).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.interop import from_onnx, from_torch
from spec.errors import TorchLeanError

__all__ = [
    "FLOOR",
    "LM_ZOO",
    "SOURCES",
    "TIMM_ZOO",
    "TOL",
    "ExportFailed",
    "SourceEntry",
    "check_source_model",
    "exact_reference_mode",
    "first_lines",
    "onnx_export",
    "perturb",
    "scaled_error",
    "tied_names",
    "vision_models",
]

TOL = 1e-9
FLOOR = 1e-6


@dataclass(frozen=True)
class SourceEntry:
    """`build(lib)` returns the module (lib: the `timm` or `transformers` module);
    `inputs(torch)` its example arguments; `family` the architecture family."""

    build: Callable[[Any], Any]
    inputs: Callable[[Any], tuple[Any, ...]]
    family: str
    kwargs: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def exact_reference_mode() -> Iterator[None]:
    """PyTorch with every float cast made a float64 cast and `F.hardsigmoid` exact
    (see the module docstring)."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    floats = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    short = (torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16)

    def wide(a: Any) -> bool:
        return isinstance(a, torch.Tensor) and a.dtype == torch.float64

    def up(a: Any) -> Any:
        if isinstance(a, list | tuple):
            return type(a)(up(v) for v in a)
        narrow = isinstance(a, torch.Tensor) and a.is_floating_point() and not wide(a)
        return a.double() if narrow else a

    def has_wide(args: Any) -> bool:
        return any(wide(a) or (isinstance(a, list | tuple) and has_wide(a)) for a in args)

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = dict(kwargs or {})
            x = args[0] if args else None
            if func is F.hardsigmoid:
                return torch.clamp(x + 3, 0, 6) / 6
            if func is F.batch_norm and _eval_bn(args, kwargs):
                return _bn_composition(*args, **kwargs)
            if func in short and wide(x):
                return x
            if func is torch.Tensor.to and wide(x):
                args = (x, *(torch.float64 if a in floats else a for a in args[1:]))
                if kwargs.get("dtype") in floats:
                    kwargs["dtype"] = torch.float64
            elif func is not torch.Tensor.to and has_wide(args):
                args = up(args)
                if kwargs.get("dtype") in floats:
                    kwargs["dtype"] = torch.float64
            return func(*args, **kwargs)

    with Mode():
        yield


def _eval_bn(args: Any, kwargs: dict[str, Any]) -> bool:
    """An eval-mode `F.batch_norm` call with running statistics."""
    training = kwargs.get("training", args[5] if len(args) > 5 else False)
    mean = kwargs.get("running_mean", args[1] if len(args) > 1 else None)
    return not training and mean is not None


def _bn_composition(
    x: Any,
    mean: Any,
    var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Any:
    """Eval-mode batch norm as torch elementwise ops (`INEXACT_KERNELS["BatchNorm"]`)."""
    shape = (-1, *([1] * (x.dim() - 2)))
    y = (x - mean.reshape(shape)) / (var.reshape(shape) + eps).sqrt()
    if weight is not None:
        y = y * weight.reshape(shape)
    return y + bias.reshape(shape) if bias is not None else y


def scaled_error(got: Any, want: Any, scale: float) -> float:
    """max |got - want| / max(max |want|, FLOOR * scale) (0 for empty arrays)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if not want.size:
        return 0.0
    if got.shape != want.shape:
        return float("inf")
    err = float(np.max(np.abs(got - want)))
    return err / max(float(np.max(np.abs(want))), FLOOR * scale, 1e-300)


def tied_names(model: Any) -> dict[str, str]:
    """alias -> first name, for every parameter or buffer reachable under several names."""
    first: dict[int, str] = {}
    out = {}
    named = [*model.named_parameters(remove_duplicate=False)]
    named += [*model.named_buffers(remove_duplicate=False)]
    for n, t in named:
        if id(t) in first:
            out[n] = first[id(t)]
        else:
            first[id(t)] = n
    return out


# ---------------------------------------------------------------------- language models
class CausalLM:
    """A transformers causal LM as a module returning its float64 causal cross entropy
    (the next-token loss over the vocabulary, every position but the last)."""

    @staticmethod
    def wrap(model: Any) -> Any:
        import torch

        class Loss(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.m = model

            def forward(self, ids: Any) -> Any:
                lg = self.m(input_ids=ids, use_cache=False).logits
                v = lg.shape[-1]
                return torch.nn.functional.cross_entropy(
                    lg[:, :-1].reshape(-1, v), ids[:, 1:].reshape(-1)
                )

        return Loss()


def _ids(torch: Any) -> tuple[Any, ...]:
    return (torch.randint(0, 31, (1, 6), generator=torch.Generator().manual_seed(0)),)


def _gpt2(T: Any) -> Any:
    cfg = T.GPT2Config(
        vocab_size=31, n_positions=16, n_embd=8, n_layer=2, n_head=2,
        bos_token_id=0, eos_token_id=0, attn_implementation="eager",
    )  # fmt: skip
    return CausalLM.wrap(T.GPT2LMHeadModel(cfg))


def _llama(T: Any) -> Any:
    cfg = T.LlamaConfig(
        vocab_size=31, hidden_size=8, intermediate_size=12, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16,
        tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, attn_implementation="eager",
    )  # fmt: skip
    return CausalLM.wrap(T.LlamaForCausalLM(cfg))


def _bert(T: Any) -> Any:
    import torch

    cfg = T.BertConfig(
        vocab_size=31, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=12, max_position_embeddings=16, attn_implementation="eager",
    )  # fmt: skip
    model = T.BertModel(cfg)

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, ids: Any) -> Any:
            return self.m(input_ids=ids).last_hidden_state

    return Hidden()


LM_ZOO: dict[str, SourceEntry] = {
    "bert_tiny": SourceEntry(_bert, _ids, "BERT encoder (erf GELU, layer norm, token types)"),
    "gpt2_tiny": SourceEntry(_gpt2, _ids, "GPT-2 (tied embeddings, causal mask, GELU tanh)"),
    "llama_tiny": SourceEntry(
        _llama, _ids, "Llama (tied embeddings, rotary, RMSNorm, SiLU, grouped-query attention)"
    ),
}
"""Language models in small configurations (vocabulary 31, width 8, two layers, 6 tokens):
two decoder-only models (loss: their causal cross entropy) and a BERT encoder (loss: the
sum of its last hidden state)."""


# ---------------------------------------------------------------------- timm
def _image(side: int) -> Callable[[Any], tuple[Any, ...]]:
    def make(torch: Any) -> tuple[Any, ...]:
        g = torch.Generator().manual_seed(0)
        return (torch.randn(1, 3, side, side, dtype=torch.float64, generator=g),)

    return make


def _timm(name: str, side: int, family: str, **kw: Any) -> SourceEntry:
    return SourceEntry(
        lambda timm: timm.create_model(name, pretrained=False, num_classes=10, **kw),
        _image(side),
        family,
    )


TIMM_ZOO: dict[str, SourceEntry] = {
    "resnet18d": _timm("resnet18d", 32, "ResNet-D (avg-pool downsampling)"),
    "efficientformer_l1": _timm("efficientformer_l1", 224, "EfficientFormer"),
    "levit_128s": _timm("levit_128s", 64, "LeViT", img_size=64),
    "edgenext_xx_small": _timm("edgenext_xx_small", 64, "EdgeNeXt"),
    "xcit_nano_12_p16_224": _timm("xcit_nano_12_p16_224", 32, "XCiT", img_size=32),
    "coat_lite_tiny": _timm("coat_lite_tiny", 32, "CoaT", img_size=32),
    "poolformer_s12": _timm("poolformer_s12", 32, "PoolFormer (MetaFormer)"),
    "nf_resnet26": _timm("nf_resnet26", 32, "NF-ResNet (weight standardisation)"),
    "hrnet_w18_small": _timm("hrnet_w18_small", 64, "HRNet"),
    "cspresnet50": _timm("cspresnet50", 32, "CSPNet"),
    "dla34": _timm("dla34", 32, "DLA"),
    "dpn68": _timm("dpn68", 32, "DPN"),
    "ghostnet_100": _timm("ghostnet_100", 32, "GhostNet"),
    "mixnet_s": _timm("mixnet_s", 32, "MixNet"),
    "mobilevit_xxs": _timm("mobilevit_xxs", 64, "MobileViT"),
    "pit_ti_224": _timm("pit_ti_224", 64, "PiT", img_size=64),
    "pvt_v2_b0": _timm("pvt_v2_b0", 32, "PVT v2"),
    "rexnet_100": _timm("rexnet_100", 32, "ReXNet"),
    "ese_vovnet19b_dw": _timm("ese_vovnet19b_dw", 32, "VoVNet"),
    "selecsls42b": _timm("selecsls42b", 32, "SelecSLS"),
    "res2net50_14w_8s": _timm("res2net50_14w_8s", 32, "Res2Net"),
    "resnest14d": _timm("resnest14d", 32, "ResNeSt (split attention)"),
    "skresnet18": _timm("skresnet18", 32, "SKNet (selective kernel)"),
    "gernet_s": _timm("gernet_s", 32, "GENet (ByobNet)"),
    "repvgg_a0": _timm("repvgg_a0", 32, "RepVGG"),
    "mixer_s16_224": _timm("mixer_s16_224", 32, "MLP-Mixer", img_size=32),
    "resmlp_12_224": _timm("resmlp_12_224", 32, "ResMLP", img_size=32),
    "gmlp_ti16_224": _timm("gmlp_ti16_224", 32, "gMLP", img_size=32),
    "visformer_tiny": _timm("visformer_tiny", 64, "Visformer", img_size=64),
    "fastvit_t8": _timm("fastvit_t8", 64, "FastViT"),
    "efficientvit_m0": _timm("efficientvit_m0", 64, "EfficientViT (MIT/MSRA)", img_size=64),
    "inception_next_tiny": _timm("inception_next_tiny", 32, "InceptionNeXt"),
    "hgnetv2_b0": _timm("hgnetv2_b0", 32, "HGNetV2"),
    "twins_svt_small": _timm("twins_svt_small", 32, "Twins", img_size=32),
    "convit_tiny": _timm("convit_tiny", 32, "ConViT", img_size=32),
    "cait_xxs24_224": _timm("cait_xxs24_224", 32, "CaiT", img_size=32),
    "starnet_s1": _timm("starnet_s1", 32, "StarNet"),
    "fasternet_t0": _timm("fasternet_t0", 32, "FasterNet"),
    "lcnet_050": _timm("lcnet_050", 32, "LCNet"),
    "xception41": _timm("xception41", 32, "Xception (aligned)"),
}
"""Distinct timm families (none of torchvision's), smallest variants, small inputs."""

SOURCES: dict[str, dict[str, SourceEntry]] = {"timm": TIMM_ZOO, "transformers": LM_ZOO}


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


def perturb(model: Any, seed: int) -> Any:
    """Every parameter and batch-norm statistic moved by a seeded random amount, so no two
    are equal (the ONNX exporter merges equal initializers, e.g. batch norm's default
    weights of ones, which would sum their gradients) and the statistics are not 0 / 1."""
    import torch

    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
        for n, b in model.named_buffers():
            if n.endswith("running_mean"):
                b.add_(0.1 * torch.randn(b.shape, generator=gen, dtype=b.dtype))
            elif n.endswith("running_var"):
                b.mul_(1 + 0.2 * torch.rand(b.shape, generator=gen, dtype=b.dtype))
    return model


def onnx_export(model: Any, x: Any) -> Any:
    """`model` exported by torch's TorchScript-based ONNX exporter (float64, parameters
    as initializers named by their PyTorch names, no constant folding)."""
    import io
    import warnings

    import onnx
    import torch

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), buf, dynamo=False, do_constant_folding=False)
    return onnx.load_from_string(buf.getvalue())


class ExportFailed(TorchLeanError):
    """torch's ONNX exporter failed on the model (PyTorch's limitation, not the importer's)."""


def first_lines(e: BaseException) -> str:
    return "; ".join(str(e).splitlines()[:4]) or type(e).__name__


def library(source: str) -> Any:
    """The model library of `source` (ImportError when it is not installed)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    vision_models()  # timm and transformers import torchvision (see zoo's docstring)
    if source == "timm":
        import timm

        return timm
    import transformers

    return transformers


def _onnx_import(m: Any, args: tuple[Any, ...]) -> Any:
    try:
        proto = onnx_export(m, args[0])
    except Exception as e:  # torch's exporter refuses the model: a row, not a crash
        raise ExportFailed(f"torch.onnx.export: {type(e).__name__}: {first_lines(e)}") from e
    imp = from_onnx(proto, inputs={proto.graph.input[0].name: args[0].numpy()})
    return imp.with_aliases(
        {a: t for a, t in tied_names(m).items() if t in imp.values and a not in imp.values}
    )


def _export(m: Any, args: tuple[Any, ...]) -> Any:
    import torch

    try:
        return torch.export.export(m, args)
    except Exception as e:  # torch.export refuses the model (or the configuration)
        raise ExportFailed(f"torch.export: {type(e).__name__}: {first_lines(e)}") from e


def _reference(m: Any, args: tuple[Any, ...]) -> tuple[Any, dict[str, Any]]:
    """PyTorch float64 output and gradient of every parameter name (aliases included)."""
    m.zero_grad(set_to_none=True)
    with exact_reference_mode():
        out = m(*args)
        out.sum().backward()
    grads = {n: p.grad for n, p in m.named_parameters(remove_duplicate=False)}
    return out.detach().numpy(), {n: g.numpy() for n, g in grads.items() if g is not None}


def float32_attributes(model: Any) -> Any:
    """A copy of `model` whose float `eps` attributes (norm layers) are rounded to float32:
    the reference of the ONNX route, whose files hold float attributes in float32."""
    import copy

    ref = copy.deepcopy(model)
    for mod in ref.modules():
        eps = getattr(mod, "eps", None)
        if isinstance(eps, float):
            mod.eps = float(np.float32(eps))
    return ref


def _compare(row: dict[str, Any], m: Any, args: tuple[Any, ...], imp: Any) -> None:
    out, grads = imp.run()
    if row["route"] == "onnx":
        m = float32_attributes(m)
    want_out, want = _reference(m, args)
    scale = max((float(np.max(np.abs(g))) for g in want.values() if g.size), default=0.0)
    row["val"] = scaled_error(out[0], want_out, 0.0)
    found = [n for n in want if n in grads]
    row["grad"] = max((scaled_error(grads[n], want[n], scale) for n in found), default=0.0)
    row["grads_compared"] = (len(found), len(want))
    ok = row["val"] <= TOL and row["grad"] <= TOL and len(found) == len(want)
    row["result"] = "pass" if ok else "WRONG"


def check_source_model(
    source: str, name: str, route: str = "torch", link: bool = False
) -> dict[str, Any]:
    """One row (see the module docstring): build, import by `route`, compare, and the
    float32 link check when `link`."""
    import torch

    entry = SOURCES[source][name]
    row: dict[str, Any] = {"model": name, "family": entry.family, "route": route}
    torch.manual_seed(0)
    try:
        m = perturb(entry.build(library(source)).double().eval(), 0)
    except Exception as e:  # the library refuses this configuration
        row.update(result="not built", note=f"{type(e).__name__}: {first_lines(e)}"[:300])
        return row
    args = entry.inputs(torch)
    t0 = time.perf_counter()
    try:
        imp = from_torch(_export(m, args), args) if route == "torch" else _onnx_import(m, args)
    except ExportFailed as e:
        row.update(result="not exported", note=str(e)[:300])
        return row
    except TorchLeanError as e:
        row.update(result="refused", note=first_lines(e)[:400])
        return row
    row["import_s"] = time.perf_counter() - t0
    row["nodes"] = len(imp.graph.nodes)
    row["tied"] = len(imp.aliases)
    _compare(row, m, args, imp)
    if link:
        t0 = time.perf_counter()
        row["link_f32"] = "holds" if imp.check_link("float32").ok else "FAILS"
        row["link_s"] = time.perf_counter() - t0
    return row


SOURCE_HEADER = (
    "| model | family | route | result | import s | nodes | tied names | values err "
    "| grads err | grads compared | link f32 | note |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def source_cells(r: dict[str, Any]) -> str:
    def f(k: str, fmt: str) -> str:
        return format(r[k], fmt) if k in r else "—"

    link = f"{r['link_f32']} ({r['link_s']:.0f} s)" if "link_f32" in r else "not run"
    found = "{}/{}".format(*r["grads_compared"]) if "grads_compared" in r else "—"
    return (
        f"| {r['model']} | {r['family']} | {r['route']} | {r['result']} | {f('import_s', '.1f')} "
        f"| {f('nodes', ',')} | {f('tied', 'd')} | {f('val', '.1e')} | {f('grad', '.1e')} "
        f"| {found} | {link} | {r.get('note', '').replace('|', '/')} |"
    )
