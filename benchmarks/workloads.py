"""The measured workloads: ours (the `runtime.Session`, and the bare `runtime.Tape` engine
for reference) and the same computations in each peer framework.

Every workload is a zero-argument callable that does the whole job once (for the MLP: one
training step, forward + backward + SGD, parameters updated in place of the old ones), so
the harness can time contenders interleaved. All contenders start from the same NumPy
arrays (`mlp_init`), use the same loss (mean squared error over every element) and the
same learning rate.

Peers are optional: `PEERS` lists them; `Peer.load()` raises ImportError when the package
is missing, and the caller reports the skip on stderr.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "PEERS",
    "MlpInit",
    "Peer",
    "chain_input",
    "mlp_init",
    "numpy_mlp",
    "our_chain",
    "our_mlp",
    "tape_chain",
    "torch_chain",
    "torch_mlp",
]

Step = Callable[[], Any]
LR = 0.01


def chain_input(dtype: str = "float32") -> np.ndarray:
    return np.linspace(-1, 1, 4).astype(dtype)


@dataclass
class MlpInit:
    sizes: tuple[int, ...]
    batch: int
    dtype: str
    params: list[tuple[np.ndarray, np.ndarray]]  # (W (out, in), b (out,)) per layer
    x: np.ndarray
    t: np.ndarray


def mlp_init(sizes: tuple[int, ...], batch: int, dtype: str, seed: int = 0) -> MlpInit:
    rng = np.random.default_rng(seed)
    params = []
    for i in range(len(sizes) - 1):
        w = rng.standard_normal((sizes[i + 1], sizes[i])) / np.sqrt(sizes[i])
        params.append((w.astype(dtype), np.zeros(sizes[i + 1], dtype=dtype)))
    x = rng.standard_normal((batch, sizes[0])).astype(dtype)
    t = rng.standard_normal((batch, sizes[-1])).astype(dtype)
    return MlpInit(tuple(sizes), batch, dtype, params, x, t)


# --------------------------------------------------------------------------- ours


def our_chain(n: int, dtype: str = "float32", mode: str = "eager", device: str = "cpu") -> Step:
    """n ops alternating neg and tanh on a (4,) tensor, then sum, then the gradient of
    every tape value (`backward_scalar_dense_all`), through the Session API."""
    from runtime import Session

    x0 = chain_input(dtype)
    s = Session(mode=mode, dtype=dtype, device=device)

    def run() -> Any:
        s.reset_tape()
        h = x = s.input(x0, requires_grad=True)
        for k in range(n):
            h = s.tanh(h) if k % 2 else s.neg(h)
        return s.backward_scalar_dense_all(s.sum(h))[x.id]

    return run


def tape_chain(n: int, dtype: str = "float32") -> Step:
    """The same chain on the bare engine (`runtime.Tape`), without the Session layer."""
    from runtime.engine.context import KernelContext
    from runtime.engine.tape import Tape

    x0 = chain_input(dtype)
    ctx = KernelContext(dtype)
    one = ctx.const(1)

    def run() -> Any:
        t = Tape(ctx)
        h = x = t.leaf(x0)
        for k in range(n):
            h = t.op("tanh" if k % 2 else "neg", [h])
        return t.backward_dense_all(t.op("sum", [h]), one)[x]

    return run


def our_mlp(
    init: MlpInit, mode: str = "eager", kernels: str = "fast", device: str = "cpu"
) -> tuple[Step, Any]:
    """One SGD step of the MLP through the Session: param/use, linear/relu/mse_loss,
    backward_scalar_dense_all, sgd_step_all. Returns (step, session)."""
    from runtime import Session

    s = Session(mode=mode, dtype=init.dtype, kernels=kernels, device=device)
    params = [(s.param(w), s.param(b)) for w, b in init.params]
    n = len(params)

    def run() -> Any:
        s.reset_tape()
        x, t = s.input(init.x, requires_grad=False), s.input(init.t, requires_grad=False)
        used = [(s.use(w), s.use(b)) for w, b in params]  # typed graph: leaves first
        h = x
        for i, (w, b) in enumerate(used):
            h = s.linear(h, w, b)
            if i < n - 1:
                h = s.relu(h)
        loss = s.mse_loss(h, t)
        s.sgd_step_all(LR, s.backward_scalar_dense_all(loss))
        return loss

    return run, s


def numpy_mlp(init: MlpInit) -> Step:
    """The same step with hand-written gradients in NumPy: the BLAS floor (no autodiff,
    no validation, no tape)."""
    ps = [(w.copy(), b.copy()) for w, b in init.params]
    x, t = init.x, init.t
    lr = np.asarray(LR, dtype=init.dtype)
    scale = np.asarray(2 / t.size, dtype=init.dtype)

    def run() -> Any:
        hs, pre = [x], []
        h = x
        for i, (w, b) in enumerate(ps):
            z = h @ w.T + b
            pre.append(z)
            h = np.maximum(z, 0) if i < len(ps) - 1 else z
            hs.append(h)
        g = (h - t) * scale
        for i in range(len(ps) - 1, -1, -1):
            w, b = ps[i]
            if i < len(ps) - 1:
                g = g * (pre[i] > 0)
            gw, gb = g.T @ hs[i], g.sum(axis=0)
            if i:  # no gradient for the data
                g = g @ w
            ps[i] = (w - lr * gw, b - lr * gb)
        return g

    return run


# --------------------------------------------------------------------------- peers


@dataclass
class Peer:
    """A peer framework. `module` is imported by `load`; `install` says how to get it."""

    key: str
    label: str
    module: str
    install: str
    chain_label: str = ""
    mlp_label: str = ""
    mlp_skip: str | None = None  # why the MLP is not meaningful for this peer
    version: str = ""

    def load(self) -> Any:
        mod = importlib.import_module(self.module)
        try:
            from importlib.metadata import version

            self.version = version(self.install.split()[-1].split("=")[0])
        except Exception:
            self.version = str(getattr(mod, "__version__", ""))
        return mod

    def chain(self, n: int) -> Step:
        return _CHAIN[self.key](n)

    def mlp(self, init: MlpInit) -> Step:
        return _MLP[self.key](init)


PEERS = [
    Peer(
        "torch",
        "PyTorch (CPU, eager autograd)",
        "torch",
        "pip install torch==2.13.0",
        "PyTorch eager",
        "PyTorch eager",
    ),
    Peer(
        "autograd",
        "HIPS autograd",
        "autograd",
        "pip install autograd",
        "HIPS autograd",
        "HIPS autograd",
    ),
    Peer(
        "jax",
        "JAX (CPU)",
        "jax",
        "pip install jax",
        "JAX eager (jax.grad, no jit)",
        "JAX (jax.jit of the step)",
    ),
    Peer(
        "micrograd",
        "micrograd",
        "micrograd.engine",
        "pip install micrograd",
        "micrograd (4 scalar chains; relu for tanh)",
        "",
        mlp_skip="micrograd is a scalar engine (one Python object per scalar operation): this "
        "step would build about {scalar_ops} Value nodes, so it is not measured",
    ),
]


def torch_chain(n: int, device: str = "cpu") -> Step:
    import torch

    x0 = torch.from_numpy(chain_input()).to(device)

    def run() -> Any:
        x = x0.detach().requires_grad_(True)
        h = x
        for k in range(n):
            h = torch.tanh(h) if k % 2 else torch.neg(h)
        (g,) = torch.autograd.grad(h.sum(), x)
        return g

    return run


def torch_mlp(init: MlpInit, device: str = "cpu") -> Step:
    import torch
    import torch.nn.functional as F

    ps = [
        torch.tensor(a, requires_grad=True, device=device) for w, b in init.params for a in (w, b)
    ]
    x, t = torch.from_numpy(init.x).to(device), torch.from_numpy(init.t).to(device)
    n = len(init.params)

    def run() -> Any:
        h = x
        for i in range(n):
            h = F.linear(h, ps[2 * i], ps[2 * i + 1])
            if i < n - 1:
                h = torch.relu(h)
        loss = F.mse_loss(h, t)
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            for p, g in zip(ps, grads, strict=True):
                p.sub_(g, alpha=LR)
        return loss

    return run


def _array_chain(xp: Any, n: int) -> Callable[[Any], Any]:
    """The chain as a function of x in a NumPy-like module `xp` (autograd.numpy, jax.numpy):
    n ops alternating neg and tanh, then sum."""

    def f(x: Any) -> Any:
        h = x
        for k in range(n):
            h = xp.tanh(h) if k % 2 else -h
        return xp.sum(h)

    return f


def _autograd_chain(n: int) -> Step:
    import autograd.numpy as anp
    from autograd import grad

    gf, x0 = grad(_array_chain(anp, n)), chain_input()
    return lambda: gf(x0)


def _autograd_mlp(init: MlpInit) -> Step:
    import autograd.numpy as anp
    from autograd import grad

    n = len(init.params)

    def loss(params: Any, x: Any, t: Any) -> Any:
        h = x
        for i, (w, b) in enumerate(params):
            h = anp.dot(h, w.T) + b
            if i < n - 1:
                h = anp.maximum(h, 0)
        return anp.mean((h - t) ** 2)

    g = grad(loss)
    state = [[(w.copy(), b.copy()) for w, b in init.params]]

    def run() -> Any:
        ps = state[0]
        gs = g(ps, init.x, init.t)
        state[0] = [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(ps, gs, strict=True)]
        return gs

    return run


def _jax_chain(n: int) -> Step:
    import jax
    import jax.numpy as jnp

    gf, x0 = jax.grad(_array_chain(jnp, n)), jnp.asarray(chain_input())
    return lambda: gf(x0).block_until_ready()


def _jax_mlp(init: MlpInit) -> Step:
    import jax
    import jax.numpy as jnp

    n = len(init.params)

    def loss(params: Any, x: Any, t: Any) -> Any:
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w.T + b
            if i < n - 1:
                h = jnp.maximum(h, 0)
        return jnp.mean((h - t) ** 2)

    @jax.jit
    def step(params: Any, x: Any, t: Any) -> Any:
        gs = jax.grad(loss)(params, x, t)
        return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, gs)

    state = [[(jnp.asarray(w), jnp.asarray(b)) for w, b in init.params]]
    x, t = jnp.asarray(init.x), jnp.asarray(init.t)

    def run() -> Any:
        state[0] = jax.block_until_ready(step(state[0], x, t))
        return state[0]

    return run


def _micrograd_chain(n: int) -> Step:
    from micrograd.engine import Value

    x0 = [float(v) for v in chain_input()]

    def run() -> Any:
        xs = [Value(v) for v in x0]
        hs = xs
        for k in range(n):
            hs = [h.relu() if k % 2 else -h for h in hs]
        total = hs[0]
        for h in hs[1:]:
            total = total + h
        total.backward()
        return [x.grad for x in xs]

    return run


_CHAIN: dict[str, Callable[[int], Step]] = {
    "torch": torch_chain,
    "autograd": _autograd_chain,
    "jax": _jax_chain,
    "micrograd": _micrograd_chain,
}
_MLP: dict[str, Callable[[MlpInit], Step]] = {
    "torch": torch_mlp,
    "autograd": _autograd_mlp,
    "jax": _jax_mlp,
}
