"""Reading untrusted files and writing results, one error path for both.

Public: `read_bytes` / `read_text` (bounded readers), `open_regular` (the same checks, a
file object for readers that seek), `check_destination` and
`write_atomic` (the writers' two halves), the errors `FileReadError` and `FileWriteError`.

Invariants:
- A read opens the path non-blocking (a FIFO never blocks), then refuses anything that is
  not a regular file (devices such as /dev/zero, FIFOs, sockets, directories) from the
  opened descriptor's own `fstat`, so the file checked is the file read. The size cap is
  checked against that `fstat` before a byte is read; the data is read in chunks of at most
  `CHUNK` bytes up to the real size plus one byte (a file that grows while read is still
  refused at the cap), so memory follows the file, never the cap.
- `read_text` validates UTF-8 strictly; a bad byte is refused with its line and offset.
- `check_destination(path)` (call it before the work that produces the data) refuses a
  missing directory, a directory this process cannot write, a symbolic link or a
  non-regular file at the path. `write_atomic` writes a temporary file in the target's
  directory (created exclusively, never through a link, with the permission bits of the
  file it replaces, else 0o666 & ~umask), fsyncs it, `os.replace`s it onto the target and
  fsyncs the directory: a reader sees the old file or the new one, and a failure (a full disk
  included) leaves the old file untouched and no temporary file behind.
- Every failure is one `FileReadError` / `FileWriteError` (`TorchLeanError`s) whose
  one-line message names the path and the reason (the OS's words for an OS error).
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from typing import BinaryIO

from .errors import TorchLeanError

__all__ = [
    "CHUNK",
    "FileReadError",
    "FileWriteError",
    "check_destination",
    "open_regular",
    "read_bytes",
    "read_text",
    "write_atomic",
]

CHUNK = 1 << 20
"""The largest single read of `read_bytes`, in bytes."""


class FileReadError(TorchLeanError):
    """An input file cannot be read: missing, not a regular file, too large, not UTF-8."""


class FileWriteError(TorchLeanError):
    """An output file cannot be written: bad destination, link, full disk, permission."""


def _why(e: OSError) -> str:
    return e.strerror or str(e) or type(e).__name__


def _open_regular(path: str, error: type[TorchLeanError]) -> tuple[int, os.stat_result]:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not isinstance(path, (str, os.PathLike)):
        raise error(f"{path!r}: an input path must be a str or os.PathLike")
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError, TypeError) as e:  # ValueError: an embedded NUL
        why = _why(e) if isinstance(e, OSError) else str(e)
        raise error(f"{path}: cannot read ({why})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise error(f"{path}: not a regular file (devices, FIFOs, sockets, directories refused)")
    return fd, st


def _too_big(
    path: str,
    cap: int,
    size: int,
    error: type[TorchLeanError],
    too_big: Callable[[int], TorchLeanError] | None,
) -> TorchLeanError:
    if too_big is not None:
        return too_big(size)
    return error(f"{path}: {size} bytes exceeds the limit of {cap} bytes")


def open_regular(
    path: str,
    cap: int,
    *,
    error: type[TorchLeanError] = FileReadError,
    too_big: Callable[[int], TorchLeanError] | None = None,
) -> BinaryIO:
    """The regular file `path` opened for binary reading (non-blocking open, checked on the
    opened descriptor), its size at most `cap` (else `too_big(size)` or `error`); for
    readers that seek (zip archives) instead of reading everything."""
    fd, st = _open_regular(path, error)
    if st.st_size > cap:
        os.close(fd)
        raise _too_big(path, cap, st.st_size, error, too_big)
    return os.fdopen(fd, "rb")


def read_bytes(
    path: str,
    cap: int,
    *,
    error: type[TorchLeanError] = FileReadError,
    too_big: Callable[[int], TorchLeanError] | None = None,
) -> bytes:
    """The bytes of the regular file `path`, at most `cap` of them; `too_big(size)` (default:
    an `error` naming the cap) is raised for a larger file, `error` for any other failure."""
    fd, st = _open_regular(path, error)
    try:
        if st.st_size > cap:
            raise _too_big(path, cap, st.st_size, error, too_big)
        parts, got, want = [], 0, min(st.st_size, cap) + 1
        while got < want:
            try:
                chunk = os.read(fd, min(CHUNK, want - got))
            except OSError as e:
                raise error(f"{path}: cannot read ({_why(e)})") from None
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
            if got == want and got <= cap:  # the file grew: read on, up to the cap
                want = min(want + CHUNK, cap + 1)
        if got > cap:
            raise _too_big(path, cap, got, error, too_big)
        return b"".join(parts)
    finally:
        os.close(fd)


def read_text(path: str, cap: int, *, error: type[TorchLeanError] = FileReadError,
              too_big: Callable[[int], TorchLeanError] | None = None) -> str:  # fmt: skip
    """`read_bytes` decoded as strict UTF-8 (a bad byte is refused naming its line)."""
    data = read_bytes(path, cap, error=error, too_big=too_big)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(
            f"{path}: line {line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
        ) from None


def check_destination(path: str, *, error: type[TorchLeanError] = FileWriteError) -> str:
    """`path` as a str once its directory exists and is writable and nothing but a regular
    file sits at the path (no link, directory, device or FIFO); else `error`."""
    try:
        p = os.fspath(path)
    except TypeError:
        raise error(f"{path!r}: an output path must be a str or os.PathLike") from None
    if not isinstance(p, str) or not p or "\x00" in p:
        raise error(f"{p!r}: not a valid output path")
    d = os.path.dirname(p) or "."
    if not os.path.isdir(d):
        raise error(f"{p}: cannot write: the directory {d!r} does not exist")
    if not os.access(d, os.W_OK | os.X_OK):
        raise error(f"{p}: cannot write: the directory {d!r} is not writable")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    except OSError as e:
        raise error(f"{p}: cannot write ({_why(e)})") from None
    if stat.S_ISLNK(st.st_mode):
        raise error(f"{p}: is a symbolic link (refused: write to its target path instead)")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{p}: exists and is not a regular file (directory, device, FIFO refused)")
    return p


def write_atomic(
    path: str, data: bytes | str, *, error: type[TorchLeanError] = FileWriteError
) -> None:
    """Write `data` (a str as UTF-8) to `path` atomically (see the module docstring)."""
    p = check_destination(path, error=error)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        keep = stat.S_IMODE(os.lstat(p).st_mode)
    except FileNotFoundError:
        keep = None
    d = os.path.dirname(p) or "."
    tmp = os.path.join(d, f".{os.path.basename(p)[:64]}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as e:
        raise error(f"{p}: cannot write ({_why(e)})") from None
    try:
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            if keep is not None:
                os.fchmod(fd, keep)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, p)
    except BaseException as e:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise error(f"{p}: cannot write ({_why(e)})") from None
        raise
    _sync_directory(d)


def _sync_directory(d: str) -> None:
    """Make a rename in `d` durable; some file systems cannot fsync a directory, and the
    file itself is already complete then, so that failure is ignored."""
    try:
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
