"""The kernel context: dtype, array namespace and the profile-dependent primitives.

Invariants:
- Kernels are written once against this context; only the methods below differ between
  the `fast` and `ordered` profiles: the reductions (`fold0`, `sum_axis`, `sum_all`,
  `unbroadcast`), `matmul` and the transcendental functions (`unary`, `pow`).
- `ordered`: every reduction is a left fold in index order with one rounding per step;
  matmul is the k-loop C = C + A[..., :, p] * B[..., p, :] (no FMA); transcendentals are
  correctly rounded (`runtime.engine.crmath`). This profile is bit-identical to `spec`.
- `fast`: NumPy reductions (pairwise), BLAS matmul, vendor libm; checked against per-node
  error bounds instead of bits.
- + - * / sqrt and comparisons are the same in both profiles: NumPy's are correctly rounded
  for float64/float32/float16 and ml_dtypes' for bfloat16 (computed in float32, which has
  more than 2p+2 bits, then rounded once).
- `ordered` on NumPy float64/float32: the folds and the matmul run as compiled loops
  (`runtime.engine.compiled`, numba, no fastmath) that equal the NumPy paths below bit
  for bit; those stay the reference (`compiled=False` or TORCHLEAN_COMPILED=0 force them)
  and serve problems under `compiled.MIN_WORK` operations unless TORCHLEAN_COMPILED=force.
- Constants are built in the operand's dtype (`const`), never as float64 scalars.
- "exact" runs the same code on object arrays of Fractions; transcendental functions and
  division by zero raise `DomainError`.
- Floating-point state: IEEE overflow, invalid and division by zero are values here, never
  errors or warnings. The entry points (`Tape.op`, `lower`, the reverse passes and forward
  tangents) run kernels under `fp_quiet()`; kernels and the methods below do not set it
  again (an `np.errstate` costs about 2 µs, more than a small op). Called outside those
  entry points they compute the same values but NumPy may warn.
- Speed: on the NumPy backend the IEEE paths call NumPy directly (the array-api-compat
  wrappers add a Python call per operation); the results are the same arrays.
  `numpy_libm` (NumPy backend, IEEE dtype, `fast` profile) says that `unary(fn, x)` and
  `sqrt` are NumPy's own function of that name, so a kernel may call it itself. `const`
  of an int is looked up in a table of ints (the same arrays as the Fraction's entries).
- Other backends (CuPy, array-API namespaces): arrays are the backend's (`atype`);
  constants are rounded on the host (MPFR) and moved over once per context; the `ordered`
  fold and matmul use the backend's device kernels when it has them, else the generic
  loops below; `ordered` transcendentals are computed on the host by `runtime.engine.crmath`
  (correct rounding needs MPFR for the hard cases) and moved back.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from fractions import Fraction
from typing import Any

import numpy as np

from spec.errors import DomainError, TorchLeanError

from ..backends.base import (
    DTYPE_DOMAIN,
    NUMPY,
    OBJECT_DTYPES,
    Backend,
    from_spec,
    np_dtype,
    round_f64,
)
from . import compiled as _compiled_mod
from .crmath import cr_apply, cr_pow, host64, libm_ufunc, record

__all__ = ["PROFILES", "KernelContext", "fp_enter", "fp_exit", "fp_quiet"]

PROFILES = ("fast", "ordered")
_INT_OF_SIZE = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}

# `np.errstate(all="ignore")` builds a new error-state object on every entry. NumPy >= 2
# keeps that state in a context variable; `fp_quiet` sets the variable to a cached "ignore
# all" state derived from the current one (so buffer size and the error callback are kept,
# exactly as errstate would), which costs a fraction of a microsecond.
try:
    from numpy._core import _ufunc_config

    _FP_VAR: Any = getattr(_ufunc_config, "_extobj_contextvar", None)  # NumPy >= 2
except ImportError:  # pragma: no cover - NumPy 1.x: plain errstate
    _FP_VAR = None
_FP_IGNORE: dict[Any, Any] = {}


def fp_enter() -> Any:
    """Enter the quiet floating-point state (`fp_quiet` without the context-manager object,
    for the per-op entry points); returns the token to give `fp_exit`. Already quiet: no
    change, token None."""
    if _FP_VAR is None:  # pragma: no cover - NumPy 1.x
        cm = np.errstate(all="ignore")
        cm.__enter__()
        return cm
    cur = _FP_VAR.get()
    ign = _FP_IGNORE.get(cur)
    if ign is None:
        with np.errstate(all="ignore"):
            ign = _FP_VAR.get()
        if len(_FP_IGNORE) > 64:
            _FP_IGNORE.clear()
        _FP_IGNORE[cur] = ign
        _FP_IGNORE[ign] = ign  # quiet again from a quiet state: the same state
    if ign is cur:
        return None
    return _FP_VAR.set(ign)


def fp_exit(token: Any) -> None:
    """Leave the state `fp_enter` entered (restores the state before it)."""
    if token is None:
        return
    if _FP_VAR is None:  # pragma: no cover - NumPy 1.x
        token.__exit__(None, None, None)
        return
    _FP_VAR.reset(token)


class _Quiet:
    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = fp_enter()

    def __exit__(self, *exc: object) -> None:
        fp_exit(self._token)


def fp_quiet() -> AbstractContextManager[Any]:
    """`np.errstate(all="ignore")`, cheaper: IEEE exceptions give their IEEE values."""
    return _Quiet()


class KernelContext:
    """Everything a kernel needs to know about where and how it computes."""

    def __init__(
        self,
        dtype: str = "float32",
        profile: str = "fast",
        backend: Backend = NUMPY,
        compiled: bool | None = None,
    ) -> None:
        if profile not in PROFILES:
            raise TorchLeanError(f"unknown kernel profile {profile!r}; choose one of {PROFILES}")
        self.backend = backend
        self.xp = backend.xp
        self.dtype = dtype
        self.dt = backend.dtype(dtype)
        self.profile = profile
        self.ordered = profile == "ordered"
        self.exact = dtype in OBJECT_DTYPES  # object arrays: Fractions or sympy expressions
        self.domain = DTYPE_DOMAIN[dtype]
        self.atype = backend.array_type
        if backend.guard is not None:
            backend.guard(profile)
        self._consts: dict[Any, Any] = {}
        self._int_consts: dict[int, Any] = {}
        self.const_arrays: dict[Any, Any] = {}  # `const` op values, see kernels
        # NumPy fast paths: IEEE dtypes on the NumPy backend call NumPy directly.
        self.numpy_fast = backend.is_numpy and not self.exact
        # ... and in the `fast` profile, where `unary`/`sqrt` are NumPy's own functions: a
        # kernel may call the NumPy function itself (`kernels.builders.unary_kernel`'s `ufunc`).
        self.numpy_libm = self.numpy_fast and not self.ordered
        # `ordered` folds and matmul through the compiled kernels (float64/float32 NumPy
        # arrays; `runtime.engine.compiled`): compiled=False forces the NumPy reference
        # path, True the compiled one for every size; None follows the environment switch
        # TORCHLEAN_COMPILED (default: compiled from `compiled.MIN_WORK` operations on).
        self.compiled = (
            self.ordered
            and self.numpy_fast
            and compiled is not False
            and _compiled_mod.enabled(self.dt)
        )
        forced = compiled is True or (compiled is None and _compiled_mod.mode() == "force")
        self.compiled_min_work = 0 if forced else _compiled_mod.MIN_WORK

    def __repr__(self) -> str:
        return f"KernelContext({self.dtype!r}, {self.profile!r}, backend={self.backend.name!r})"

    # ------------------------------------------------------------------ construction
    def arr(self, x: Any) -> Any:
        """Make sure x is an array of the dtype (NumPy turns 0-d results into scalars)."""
        if type(x) is self.atype:
            return x
        if not self.backend.is_numpy:
            if isinstance(x, self.backend.array_type):
                return x  # a subclass or view type of the backend's arrays
            # host values go through the backend's upload (CuPy: by bit pattern, so -0
            # survives); a Python number is rounded once on the host, as on NumPy
            return self.backend.from_host(np.asarray(x, dtype=np_dtype(self.dtype)))
        if isinstance(x, np.ndarray):
            return x
        if self.exact:
            if isinstance(x, (list, tuple)):
                return np.array(x, dtype=object)
            out = np.empty((), dtype=object)
            out[()] = x
            return out
        return np.asarray(x, dtype=self.dt)

    def const(self, q: Fraction | int) -> Any:
        """The exact rational q rounded once into the dtype, as a 0-d array."""
        # An int (the kernels' 0, 1, 2) has its own table: found without the Python-level
        # `Fraction.__eq__` that an int key meeting a Fraction key in one dict runs.
        if type(q) is int:
            c = self._int_consts.get(q)
            if c is None:
                c = self._int_consts[q] = self.const(Fraction(q))
            return c
        # Python's numeric hash and equality agree across int, float and Fraction, so the
        # value given finds the entry stored under its exact rational without converting.
        try:
            c = self._consts.get(q)
        except TypeError:
            c = None
        if c is None:
            q = Fraction(q)
            c = self._consts.get(q)
            if c is None:
                from spec.tensor import Tensor

                c = from_spec(Tensor((), (self.domain.from_rational(q),)), self.dtype)
                if not self.backend.is_numpy:
                    c = self.backend.from_host(c)
                self._consts[q] = c
        return c

    def zeros(self, shape: tuple[int, ...]) -> Any:
        if self.exact:
            return np.full(shape, self.domain.zero(), dtype=object)
        if self.numpy_fast:
            return np.zeros(shape, dtype=self.dt)
        return self.xp.zeros(shape, dtype=self.dt)

    def maskable(self, cond: Any, v: Any) -> bool:
        """Whether `select_or_zero(cond, v)` takes its bit-mask path: NumPy IEEE arrays of
        the context's dtype, equal shapes, both C-contiguous (so the result has the layout
        `np.where` would give, and a later pairwise reduction sums in the same order)."""
        return (
            self.numpy_fast
            and type(cond) is np.ndarray
            and type(v) is np.ndarray
            and cond.ndim > 0
            and cond.shape == v.shape
            and v.dtype == self.dt
            and cond.flags.c_contiguous
            and v.flags.c_contiguous
        )

    def select_or_zero(self, cond: Any, v: Any, keep: bool = True) -> Any:
        """`where(cond, v, +0)` (or `where(cond, +0, v)` with keep=False), bit for bit.

        When `maskable`, this masks the bits of v with an integer all-ones/all-zeros mask
        instead of running NumPy's select loop (about 8x faster on float32): a kept element
        is v's exact bit pattern (NaN payloads and -0 included), a dropped one is all zero
        bits, i.e. +0."""
        if self.maskable(cond, v):
            it = _INT_OF_SIZE[self.dt.itemsize]
            k = cond.astype(it)  # 1 where cond
            if keep:
                np.negative(k, out=k)  # cond -> all ones, else 0
            else:
                np.subtract(k, 1, out=k)  # cond -> 0, else all ones
            np.bitwise_and(k, v.view(it), out=k)
            return k.view(self.dt)
        z = self.zeros(tuple(np.broadcast_shapes(tuple(cond.shape), tuple(v.shape))))
        return self.xp.where(cond, v, z) if keep else self.xp.where(cond, z, v)

    def isnan(self, x: Any) -> Any:
        if self.exact:
            return np.zeros(np.shape(x), dtype=bool)
        if self.numpy_fast:
            return np.isnan(x)
        return self.xp.isnan(x)

    def div(self, a: Any, b: Any) -> Any:
        if self.exact:
            try:
                return self.arr(np.divide(a, b))
            except ZeroDivisionError:
                raise DomainError("exact: division by zero") from None
        if self.numpy_fast:
            y = np.divide(a, b)
            return y if type(y) is np.ndarray else self.arr(y)
        return self.arr(self.xp.divide(a, b))

    # ------------------------------------------------------------------ profile-dependent
    def fold0(self, x: Any) -> Any:
        """Sum over axis 0: a left fold in index order (ordered) or NumPy's sum (fast)."""
        k = x.shape[0]
        if k == 0:
            return self.zeros(x.shape[1:])
        if not self.ordered:
            if self.numpy_fast:
                return self.arr(np.sum(x, axis=0, dtype=self.dt))
            return self.arr(self.xp.sum(x, axis=0, dtype=self.dt))
        if self.compiled:
            y = _compiled_mod.fold_axis(x, 0, self.compiled_min_work)
            if y is not None:
                return y
        if self.backend.is_numpy:
            # add.accumulate is sequential by definition: out[i] = out[i-1] + x[i].
            return self.arr(np.add.accumulate(x, axis=0, dtype=self.dt)[-1])
        if self.backend.ordered_fold is not None:
            y = self.backend.ordered_fold(x)
            if y is not None:  # None: no device kernel for this dtype
                return y
        acc = x[0, ...]
        for i in range(1, k):
            acc = acc + x[i, ...]
        return self.arr(acc)

    def sum_axis(self, x: Any, axis: int) -> Any:
        axis = axis % x.ndim
        if self.compiled and x.shape[axis]:
            y = _compiled_mod.fold_axis(x, axis, self.compiled_min_work)
            if y is not None:
                return y
        if axis == 0:
            return self.fold0(x)
        perm = (axis, *[i for i in range(x.ndim) if i != axis])
        return self.fold0(self.xp.permute_dims(x, perm))

    def sum_all(self, x: Any) -> Any:
        return self.fold0(self.xp.reshape(x, (-1,)))

    def unbroadcast(self, g: Any, shape: tuple[int, ...]) -> Any:
        """Reduce g back to `shape`, folding each element's positions in row-major order."""
        if tuple(g.shape) == tuple(shape):
            return g
        off = g.ndim - len(shape)
        red = list(range(off)) + [
            off + i for i, d in enumerate(shape) if d == 1 and g.shape[off + i] != 1
        ]
        keep = [a for a in range(g.ndim) if a not in red]
        k = 1
        for a in red:
            k *= g.shape[a]
        t = self.xp.permute_dims(g, (*red, *keep))
        t = self.xp.reshape(t, (k, *[g.shape[a] for a in keep]))
        return self.xp.reshape(self.fold0(t), shape)

    def matmul(self, a: Any, b: Any) -> Any:
        """a (..., m, k) @ b (..., k, n) with equal batch prefixes."""
        if not self.ordered:
            y = self.arr(np.matmul(a, b) if self.numpy_fast else self.xp.matmul(a, b))
            # ml_dtypes' bfloat16 matmul accumulates and returns float32: round once.
            return y if y.dtype == self.dt else y.astype(self.dt)
        k = a.shape[-1]
        if k == 0:
            return self.zeros((*a.shape[:-1], b.shape[-1]))
        if self.backend.ordered_matmul is not None:
            y = self.backend.ordered_matmul(a, b)
            if y is not None:  # None: no device kernel for this dtype
                return y
        if self.compiled:
            y = _compiled_mod.matmul(a, b, self.compiled_min_work)
            if y is not None:
                return y
        acc = a[..., :, 0:1] * b[..., 0:1, :]
        if self.numpy_fast:
            # The same k-loop, C = C + A[..., :, p] * B[..., p, :] (a product rounded, then
            # a sum rounded: no FMA, same operand order), into preallocated buffers instead
            # of two new arrays per step.
            acc = np.array(acc, copy=True) if not acc.flags.writeable else acc
            tmp = np.empty_like(acc)
            mul, add = np.multiply, np.add
            for p in range(1, k):
                mul(a[..., :, p : p + 1], b[..., p : p + 1, :], out=tmp)
                add(acc, tmp, out=acc)
            return acc
        for p in range(1, k):
            acc = acc + a[..., :, p : p + 1] * b[..., p : p + 1, :]
        return self.arr(acc)

    def unary(self, fn: str, x: Any) -> Any:
        """A math function of `spec.mathfns` (exp, log, tanh, ...): correctly rounded
        (ordered) or libm (fast: the NumPy ufunc its record names; on another backend the
        namespace's function of the first of the record's NumPy and array-API names it
        has). A function NumPy lacks (erf) takes, in `fast`, the C library's binary64
        function on the host, rounded once into the dtype."""
        if self.exact:
            return self._exact_map(fn, x)
        if self.ordered:
            if not self.backend.is_numpy:
                h = cr_apply(fn, self.backend.to_host(x), self.dtype)
                return self.backend.from_host(np.asarray(h))
            return self.arr(cr_apply(fn, x, self.dtype))
        ufunc = libm_ufunc(fn)
        if ufunc is None:
            h = self.backend.to_host(x) if not self.backend.is_numpy else x
            y64 = host64(fn, h)
            y = round_f64(y64, self.dtype) if self.dtype != "float64" else y64
            return self.arr(y) if self.backend.is_numpy else self.backend.from_host(y)
        if self.numpy_fast:
            y = ufunc(x)
        else:  # the backend's spelling: NumPy's names first, then the array API's
            rec = record(fn)
            y = getattr(
                self.xp, next(n for n in (*rec.numpy, rec.array_api) if hasattr(self.xp, n))
            )(x)
        return y if type(y) is self.atype else self.arr(y)

    def pow(self, a: Any, b: Any) -> Any:
        """a**b elementwise (broadcast; C99 pow's special values): correctly rounded
        (ordered, `crmath.cr_pow`) or the vendor's pow (fast: NumPy's power, which for
        bfloat16/float16 computes in float32 and rounds once)."""
        if self.exact:
            a, b = np.broadcast_arrays(self.arr(a), self.arr(b))
            out = np.empty(a.shape, dtype=object)
            for idx, v in np.ndenumerate(a):
                out[idx] = self.domain.pow(v, b[idx])
            return out
        if self.ordered:
            if not self.backend.is_numpy:
                to_host = self.backend.to_host
                h = cr_pow(to_host(a), to_host(b), self.dtype)
                return self.backend.from_host(np.asarray(h))
            return self.arr(cr_pow(a, b, self.dtype))
        if self.numpy_fast:
            y = np.power(a, b)
            return y if type(y) is np.ndarray else self.arr(y)
        xp = self.xp
        return self.arr(xp.pow(a, b) if hasattr(xp, "pow") else xp.power(a, b))

    def sqrt(self, x: Any) -> Any:
        if self.exact:
            return self._exact_map("sqrt", x)
        y = np.sqrt(x) if self.numpy_fast else self.xp.sqrt(x)
        return y if type(y) is self.atype else self.arr(y)

    def _exact_map(self, fn: str, x: Any) -> Any:
        x = self.arr(x)  # arithmetic on 0-d object arrays returns bare scalars
        f = getattr(self.domain, fn)
        out = np.empty(x.shape, dtype=object)
        for idx, v in np.ndenumerate(x):
            out[idx] = f(v)
        return out
