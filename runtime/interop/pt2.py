"""Reading `.pt2` files (`torch.export.save`) without running code from them.

Invariants:
- `read_pt2(path, trust_pickle=False)` returns the `torch.export.ExportedProgram` in the
  file or raises `ModelImportError` (one line naming the file), never another exception.
- Untrusted (the default): every tensor payload is unpickled by torch's restricted
  `weights_only` loader only. `torch.export.load` falls back to full unpickling for sample
  inputs, state dicts and constants the safe loader rejects, unpickles `use_pickle`
  weights and constants with `weights_only=False`, and loads custom and opaque objects
  with pickle; during the call each of these is routed through the safe loader or refused
  with `PickleRefused`, whose message names the trust flag (`trust_pickle=True`,
  `--trust-pickle`). Nothing the file holds is executed before it is refused.
- `trust_pickle=True` is `torch.export.load` unchanged: full pickle, which can run
  arbitrary code from the file; use it for files you made or trust.
- Before torch reads it, the path must name a regular file (no devices, FIFOs or
  directories) holding a zip archive whose total uncompressed size is at most
  `PT2_MAX_BYTES` (environment `TORCHLEAN_PT2_MAX_BYTES` raises it).
- The guard replaces `torch.load`, `torch._C._pickle_load_obj` and the `pickle` name of
  torch's archive reader for the duration of one load, under a lock: loads in other
  threads during that time are guarded too.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .core import ModelImportError

__all__ = ["PT2_MAX_BYTES", "TRUST_HINT", "PickleRefused", "read_pt2"]

PT2_MAX_BYTES = 4 << 30
"""Default cap on a `.pt2` archive's total uncompressed size (4 GiB)."""

TRUST_HINT = (
    "full unpickling can run arbitrary code from the file; if you trust the file, pass "
    "trust_pickle=True (load_exported / load_model) or --trust-pickle (python -m conformance)"
)

_LOCK = threading.Lock()


class PickleRefused(ModelImportError):
    """A `.pt2` file needs unpickling beyond torch's `weights_only` loader and
    `trust_pickle` was not given."""


def _max_bytes() -> int:
    text = os.environ.get("TORCHLEAN_PT2_MAX_BYTES")
    if not text:
        return PT2_MAX_BYTES
    try:
        return int(text)
    except ValueError:
        raise ModelImportError(
            f"TORCHLEAN_PT2_MAX_BYTES={text!r} is not an integer number of bytes"
        ) from None


def _check_file(path: str) -> None:
    try:
        st = os.stat(path)
    except OSError as e:
        raise ModelImportError(f"{path}: cannot read the file ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ModelImportError(f"{path}: not a regular file")
    if st.st_size == 0:
        raise ModelImportError(f"{path}: the file is empty (not a torch.export .pt2 archive)")
    cap = _max_bytes()
    try:
        with zipfile.ZipFile(path) as z:
            total = sum(i.file_size for i in z.infolist())
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        raise ModelImportError(
            f"{path}: not a torch.export .pt2 archive (truncated or corrupt zip: {e})"
        ) from None
    if total > cap:
        raise ModelImportError(
            f"{path}: the archive unpacks to {total} bytes, over the cap of {cap} "
            "(set TORCHLEAN_PT2_MAX_BYTES to raise it)"
        )


def _refuse(what: str) -> PickleRefused:
    return PickleRefused(f"{what} needs full unpickling; refused: {TRUST_HINT}")


class _NoPickle:
    """Stands in for the `pickle` module inside torch's archive reader."""

    @staticmethod
    def loads(*_: Any, **__: Any) -> Any:
        raise _refuse("an opaque Python object in the file")


@contextmanager
def _quiet() -> Iterator[None]:
    """torch's loader logs its fallbacks (with tracebacks) on the root handler: muted
    for the duration of one load; our own error says what happened."""
    loggers = [logging.getLogger(n) for n in _LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, lv in zip(loggers, levels, strict=True):
            lg.setLevel(lv)


_LOGGERS = ("torch.export", "torch._export", "torch.export.pt2_archive._package")


@contextmanager
def _guarded() -> Iterator[None]:
    import torch
    from torch.export.pt2_archive import _package

    real_load = torch.load
    real_obj = torch._C._pickle_load_obj

    def safe_load(f: Any, *args: Any, weights_only: Any = None, **kw: Any) -> Any:
        if weights_only is True:
            return real_load(f, *args, weights_only=True, **kw)
        try:
            return real_load(f, *args, weights_only=True, **kw)
        except Exception as e:
            hit = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(e))
            why = f"it names {hit.group(1)}" if hit else type(e).__name__
            raise _refuse(f"a pickled payload the weights_only loader rejects ({why})") from None

    def no_obj(*_: Any, **__: Any) -> Any:
        raise _refuse("a TorchScript custom object in the file")

    with _LOCK:
        torch.load = safe_load
        torch._C._pickle_load_obj = no_obj
        had = "pickle" in vars(_package)
        real_pickle = vars(_package).get("pickle")
        setattr(_package, "pickle", _NoPickle)  # noqa: B010 (typed either way, torch or not)
        try:
            yield
        finally:
            torch.load = real_load
            torch._C._pickle_load_obj = real_obj
            if had:
                setattr(_package, "pickle", real_pickle)  # noqa: B010
            else:
                del _package.pickle


def read_pt2(path: str, trust_pickle: bool = False) -> Any:
    """The `ExportedProgram` in the `.pt2` file `path` (see the module docstring)."""
    try:
        import torch
    except ImportError as e:
        raise ModelImportError(f"{path}: loading a .pt2 file needs the torch package") from e
    _check_file(path)
    try:
        with _quiet():
            if trust_pickle:
                return torch.export.load(path)
            with _guarded():
                return torch.export.load(path)
    except ModelImportError as e:
        raise type(e)(f"{path}: {e}") from None
    except Exception as e:  # torch's own errors on a malformed archive
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ModelImportError(
            f"{path}: not a loadable torch.export program ({type(e).__name__}: {first})"
        ) from None
