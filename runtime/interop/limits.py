"""Size limits for untrusted model files and inputs, checked before anything is allocated.

Public: `Limits` (the caps), `current()` (the caps in force), `set_limits(**caps)` and the
context manager `limits(**caps)` to raise or lower them, `LimitError`, the checks
`check_elements`, `check_total`, `check_nodes`, `check_trips`, and the bounded readers
`read_file` (a regular file of at most `max_file_bytes`) and `load_npz` (an `.npz` of named
real arrays, each header checked before its data is inflated).

Invariants:
- The caps in force are the defaults of `Limits`, overridden by the environment variables
  `TORCHLEAN_MAX_TENSOR_ELEMENTS`, `TORCHLEAN_MAX_TOTAL_ELEMENTS`, `TORCHLEAN_MAX_NODES`,
  `TORCHLEAN_MAX_LOOP_TRIPS` and `TORCHLEAN_MAX_FILE_BYTES` (read at each `current()`),
  overridden in turn by `set_limits` / `limits` (process-wide, innermost wins).
- Every check raises `LimitError` (a `ModelImportError`, hence a `TorchLeanError`) whose
  message names what was too large, the cap, and how to raise it; a check never allocates
  the thing it checks.
- `read_file` opens non-blocking and refuses anything that is not a regular file (devices,
  FIFOs, sockets, directories) before reading, checks the size against `max_file_bytes`
  first, then reads in chunks up to the real size (memory follows the file, never the
  cap); a file that grows past the cap while read is still refused.
- `load_npz` opens the file with the same checks (`spec.safe_files.open_regular`, size
  capped by `max_file_bytes`), never unpickles (object arrays are refused)
  and refuses complex arrays (they have no value in the real domains); a corrupt member
  (bad CRC, truncated data), an encrypted one or an unknown compression method is a
  `ModelImportError` naming the member.
"""

from __future__ import annotations

import contextlib
import os
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from spec.safe_files import open_regular, read_bytes

from .core import ModelImportError

__all__ = [
    "LimitError",
    "Limits",
    "check_elements",
    "check_nodes",
    "check_total",
    "check_trips",
    "current",
    "limits",
    "load_npz",
    "read_file",
    "set_limits",
]


class LimitError(ModelImportError):
    """A model file or input exceeds a size cap (see `runtime.interop.limits`)."""


@dataclass(frozen=True)
class Limits:
    """The caps. Elements count array entries (any dtype); bytes count file sizes."""

    max_tensor_elements: int = 2**27
    max_total_elements: int = 2**29
    max_nodes: int = 1_000_000
    max_loop_trips: int = 100_000
    max_file_bytes: int = 2**31


_OVERRIDES: list[dict[str, int]] = []


def _env_name(field: str) -> str:
    return "TORCHLEAN_" + field.upper()


def current() -> Limits:
    """The caps in force (defaults, then environment variables, then `set_limits`)."""
    caps: dict[str, int] = {}
    for f in fields(Limits):
        raw = os.environ.get(_env_name(f.name))
        if raw is not None:
            try:
                caps[f.name] = int(raw)
            except ValueError as e:
                raise LimitError(f"{_env_name(f.name)}={raw!r} is not an integer") from e
    for o in _OVERRIDES:
        caps.update(o)
    return replace(Limits(), **caps)


def _checked(caps: dict[str, int]) -> dict[str, int]:
    known = {f.name for f in fields(Limits)}
    for k, v in caps.items():
        if k not in known:
            raise LimitError(f"unknown limit {k!r}; known: {sorted(known)}")
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise LimitError(f"limit {k} must be a non-negative integer, got {v!r}")
    return dict(caps)


def set_limits(**caps: int) -> Limits:
    """Replace caps for the rest of the process (e.g. `set_limits(max_nodes=10**7)`);
    returns the caps now in force."""
    _OVERRIDES.append(_checked(caps))
    return current()


@contextlib.contextmanager
def limits(**caps: int) -> Iterator[Limits]:
    """Caps replaced inside a `with` block only."""
    _OVERRIDES.append(_checked(caps))
    try:
        yield current()
    finally:
        _OVERRIDES.pop()


def _how(field: str) -> str:
    return (
        f"raise it with runtime.interop.limits.set_limits({field}=...) "
        f"or the environment variable {_env_name(field)}"
    )


def _exceeds(what: str, got: int, field: str, cap: int) -> LimitError:
    return LimitError(f"{what}: {got} exceeds the limit {field}={cap} ({_how(field)})")


def check_elements(shape: Sequence[int], what: str) -> int:
    """The element count of `shape`, refused when over `max_tensor_elements` (or when a
    dimension is negative)."""
    n = 1
    for d in shape:
        d = int(d)
        if d < 0:
            raise ModelImportError(f"{what}: negative dimension {d} in shape {list(shape)}")
        n *= d
    cap = current().max_tensor_elements
    if n > cap:
        raise _exceeds(f"{what} of shape {list(shape)} has", n, "max_tensor_elements", cap)
    return n


def check_total(n: int, what: str) -> None:
    cap = current().max_total_elements
    if n > cap:
        raise _exceeds(f"{what} hold", n, "max_total_elements", cap)


def check_nodes(n: int, what: str) -> None:
    cap = current().max_nodes
    if n > cap:
        raise _exceeds(f"{what} has", n, "max_nodes", cap)


def check_trips(n: int, what: str) -> None:
    cap = current().max_loop_trips
    if n > cap:
        raise _exceeds(f"{what} runs", n, "max_loop_trips", cap)


def read_file(path: str) -> bytes:
    """The bytes of the regular file `path`, at most `max_file_bytes` of them, read in
    chunks up to the file's real size (`spec.safe_files.read_bytes`)."""
    cap = current().max_file_bytes

    def too_big(size: int) -> LimitError:
        return _exceeds(f"{path} has", size, "max_file_bytes", cap)

    return read_bytes(path, cap, error=ModelImportError, too_big=too_big)


_ZIP_ERRORS = (
    zipfile.BadZipFile,  # a bad CRC, a truncated or malformed archive
    zipfile.LargeZipFile,  # a ZIP64 member where ZIP64 is off
    RuntimeError,  # zipfile: an encrypted member opened without a password
    NotImplementedError,  # zipfile: an unsupported compression method (e.g. 99)
    ValueError,  # NumPy: a malformed .npy header
    OSError,
    EOFError,  # a member shorter than its header says
    zlib.error,  # a corrupt deflate stream
)
"""What zipfile, zlib and NumPy raise on a corrupt, encrypted or unsupported member: each
becomes a `ModelImportError` naming the member."""


def _npz_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> tuple[Any, ...]:
    try:
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _fortran, dtype = np.lib.format.read_array_header_1_0(f)
            else:
                shape, _fortran, dtype = np.lib.format.read_array_header_2_0(f)
    except _ZIP_ERRORS as e:
        raise ModelImportError(
            f"{path}: member {info.filename!r} is not a readable array ({type(e).__name__}: {e})"
        ) from None
    return shape, dtype


def _member(info: zipfile.ZipInfo) -> str:
    return info.filename[:-4] if info.filename.endswith(".npy") else info.filename


def load_npz(path: str) -> dict[str, np.ndarray]:
    """Named real arrays from the `.npz` file `path`; every member's shape and dtype are
    read from its header and checked against the caps before its data is inflated."""
    cap = current().max_file_bytes

    def too_big(size: int) -> LimitError:
        return _exceeds(f"{path} has", size, "max_file_bytes", cap)

    with open_regular(path, cap, error=ModelImportError, too_big=too_big) as fh:
        try:
            zf = zipfile.ZipFile(fh)
        except _ZIP_ERRORS as e:
            raise ModelImportError(f"{path}: not an .npz file ({type(e).__name__}: {e})") from None
        with zf:
            _check_npz_headers(zf, path)
            return {_member(info): _npz_array(zf, info, path) for info in zf.infolist()}


def _check_npz_headers(zf: zipfile.ZipFile, path: str) -> None:
    total = 0
    for info in zf.infolist():
        shape, dtype = _npz_header(zf, info, path)
        what = f"{path}: array {_member(info)!r}"
        if dtype.hasobject:
            raise ModelImportError(f"{what} holds Python objects (refused: no unpickling)")
        if dtype.kind not in "biuf":
            raise ModelImportError(
                f"{what} has dtype {dtype} (expected a real number or boolean array)"
            )
        total += check_elements(shape, what)
        check_total(total, f"{path}: the arrays")


def _npz_array(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> np.ndarray:
    try:
        with zf.open(info) as f:
            return np.lib.format.read_array(f, allow_pickle=False)
    except _ZIP_ERRORS as e:
        raise ModelImportError(
            f"{path}: array {_member(info)!r} is corrupt ({type(e).__name__}: {e})"
        ) from None
