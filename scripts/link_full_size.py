"""The float32 link check on a full-size torchvision model, timed phase by phase beside the
`ordered` run of the same graph (docs/BENCHMARKS.md, "The link check at full size").

    python scripts/link_full_size.py resnet18 224
    python scripts/link_full_size.py --zoo regnet_tiny mobilenet_v2_w01   # LINK_ZOO entries

Each phase prints wall and CPU (process) seconds: on a shared machine the wall time grows
with the load, the CPU time much less. The model is torchvision's builder with its default
widths (1000 classes), random weights perturbed as `conformance.zoo.perturb`, one input of
1x3xSxS; the `ordered` run is `Imported.run("float32", "ordered")` (forward and reverse;
the second call is the one compared, the first one compiles and caches kernels),
the link check is `Imported.check_link`'s work split into its phases: the seed pack, the
spec side (`spec.vector.link_sides`), the runtime side (`array_sides`: forward, reverse,
tangents) and the bitwise comparison.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> str:
    w, c = _clock()
    return f"{w - t[0]:.2f} s wall / {c - t[1]:.2f} s cpu"


def _full_size(name: str, side: int) -> None:
    import torch

    from conformance.zoo import perturb, vision_models
    from runtime.interop import from_torch
    from runtime.session import link as L
    from spec import vector
    from spec.domains import BINARY32

    torch.manual_seed(0)
    m = perturb(getattr(vision_models(), name)().double().eval(), 0)
    x = torch.randn(1, 3, side, side, dtype=torch.float64)
    t = _clock()
    imp = from_torch(m, (x,))
    print(f"{name}@{side}: import {_since(t)}; {len(imp.graph.nodes)} nodes", flush=True)
    t = _clock()
    imp.run("float32", "ordered")
    print(f"ordered run, first (compiles and caches kernels) {_since(t)}", flush=True)
    t = _clock()
    imp.run("float32", "ordered")
    print(f"ordered run {_since(t)}", flush=True)
    g, F = imp.graph, vector.format_of(BINARY32)
    xs = [np.asarray(a, dtype=np.float64) for a in imp.arrays("float32")]
    t = _clock()
    seeds = vector.seed_arrays(g, F, 0)
    print(f"seed pack {_since(t)}", flush=True)
    st = vector.Stats()
    t = _clock()
    want = vector.link_sides(BINARY32, g, xs, (), seeds, st)
    print(f"spec side (spec.vector) {_since(t)}; {L.spec_stats_text(st)}", flush=True)
    t = _clock()
    got = L.array_sides(g, xs, (), seeds, "float32")
    print(f"runtime side {_since(t)}", flush=True)
    t = _clock()
    diffs = [vector.first_difference(a, b) for a, b in zip(got, want, strict=True)]
    print(f"comparison {_since(t)}: values, cotangents, tangents differ at {diffs}", flush=True)


def _zoo(names: list[str]) -> None:
    import torch

    from conformance.zoo import LINK_ZOO, perturb, vision_models
    from runtime.interop import from_torch

    for name in names:
        e = LINK_ZOO[name]
        torch.manual_seed(0)
        m: Any = perturb(e.build(vision_models()).double().eval(), 0)
        x = torch.randn(1, 3, e.side, e.side, dtype=torch.float64)
        imp = from_torch(m, (x,))
        imp.run("float32", "ordered")
        t = _clock()
        imp.run("float32", "ordered")
        run = _since(t)
        t = _clock()
        r = imp.check_link("float32")
        print(f"{name}: ordered run {run}; check_link {_since(t)}; {r.text}", flush=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--zoo"]:
        _zoo(argv[1:])
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    _full_size(argv[0], int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
