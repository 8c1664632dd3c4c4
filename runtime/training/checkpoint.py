"""State files and training checkpoints: encode, validate, decode, write atomically.

Invariants:
- JSON state files are TorchLean-compatible: `{"format": tag, "state": [{"shape": [...],
  "values": [bit patterns as integers]}]}` with tag `torchlean_state_bits_v1` (binary64) or
  `torchlean_state_float32_bits_v1` (binary32). Extensions of this package, same layout:
  `torchlean_state_float16_bits_v1`, `torchlean_state_bfloat16_bits_v1` and
  `torchlean_state_exact_v1` (values are "p/q" strings).
- Exact values are written as f"{p}/{q}" always, in lowest terms with q > 0 ("3/1", "-1/2",
  "0/1"), and read strictly: only that canonical form, a string matching
  `^(0|-?[1-9][0-9]*)/[1-9][0-9]*$` (ASCII digits) with gcd(p, q) = 1; anything else ("3",
  "0.5", " 1e-3 ", "+1/2", "-0/1", "01/2", unreduced "2/4") is a `CheckpointError` naming
  the path, the tensor and the element. (Files from the earlier "str(Fraction)" writer were
  never released; integers there read "3" and are refused.)
- NaN is one class: writing canonicalises every NaN to the positive quiet NaN with a zero
  payload; reading rejects any other NaN encoding.
- safetensors files hold tensors `state.0`, `state.1`, ... (bfloat16 as its uint16 bit
  view) and metadata `format`, `dtype`, `count`, `tying` (a JSON list) and `digest`; other
  metadata keys are refused.
- Integrity: every file torchlean writes carries a SHA-256 digest of its content. JSON
  files (state files and full training checkpoints) end with a field `"digest":
  "sha256:<hex>"`, the hash of the file's compact JSON text without that field (the bytes
  the writer produced before appending it); safetensors files carry metadata `digest`, the
  hash of the other metadata (sorted) and of every tensor's name, dtype, shape and bytes
  (name order). A read recomputes it from what it parsed and refuses a mismatch, so a
  corrupted file either is refused or parses to exactly what was written. A file without
  a digest (written by TorchLean or by an earlier torchlean) still loads, with an
  `IntegrityNotCheckedWarning` saying that integrity was not checked. The digest detects
  corruption, not tampering: anyone can write a file with a matching digest.
- Every write is atomic: a temporary file in the target's directory (created with mode
  0o666 & ~umask), flushed and fsynced, then `os.replace`, then the directory is fsynced.
  A reader sees the old file or the new one, never a mixture; a crash during a save leaves
  the previous file loadable. Targets: the path must be a `str` or `os.PathLike`; an
  existing target must be a regular file (symbolic links are refused, not followed:
  `save` never replaces a link nor writes where it points; directories, devices, FIFOs and
  sockets are refused); an existing file's permission bits are kept; every OS error
  (missing directory, permission, full disk) is a `CheckpointError` naming the path.
  Replacing a file breaks its hard links (it is a new inode).
- Every read validates everything (path type, regular file, JSON nesting depth <= 32,
  integers below 2**64, no NaN/Infinity literals, the digest, format tag, dtype, counts,
  shapes, integer ranges, NaN encodings, missing and extra tensors) and only then returns
  values; it never mutates anything. Errors are `CheckpointError`s naming the path and the
  problem.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import warnings
from fractions import Fraction
from typing import Any

import numpy as np

from spec.errors import CheckpointError
from spec.safe_files import write_atomic

from ..backends.base import np_dtype

__all__ = [
    "MAX_DEPTH",
    "STATE_TAGS",
    "TRAINING_TAG",
    "IntegrityNotCheckedWarning",
    "canonical_nan_bits",
    "check_path",
    "checked_json",
    "decode_array",
    "decode_list",
    "encode_array",
    "json_bytes_with_digest",
    "load_state",
    "note_unchecked",
    "read_json",
    "save_state",
    "state_from_json",
    "write_bytes_atomic",
]

STATE_TAGS = {
    "float64": "torchlean_state_bits_v1",
    "float32": "torchlean_state_float32_bits_v1",
    "float16": "torchlean_state_float16_bits_v1",
    "bfloat16": "torchlean_state_bfloat16_bits_v1",
    "exact": "torchlean_state_exact_v1",
}
SAFETENSORS_TAG = "torchlean_safetensors_state_v1"
TRAINING_TAG = "torchlean_training_checkpoint_v1"
# canonical "p/q": no sign on 0, no leading zeros, q >= 1 (ASCII digits; fullmatch)
_EXACT = re.compile(r"(0|-?[1-9][0-9]*)/[1-9][0-9]*")
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
# (exponent mask, quiet bit) per width: a NaN has all exponent bits and a nonzero mantissa
_NAN = {
    "float64": (0x7FF0000000000000, 0x0008000000000000, 64),
    "float32": (0x7F800000, 0x00400000, 32),
    "float16": (0x7C00, 0x0200, 16),
    "bfloat16": (0x7F80, 0x0040, 16),
}


def canonical_nan_bits(dtype: str) -> int:
    exp, quiet, _ = _NAN[dtype]
    return exp | quiet


def _is_nan_bits(dtype: str, b: int) -> bool:
    exp, _, width = _NAN[dtype]
    mant = (1 << width) - 1 & ~(exp | (1 << (width - 1)))
    return (b & exp) == exp and (b & mant) != 0


class IntegrityNotCheckedWarning(UserWarning):
    """A checkpoint without a content digest was loaded: its integrity was not checked."""


MAX_DEPTH = 32  # JSON nesting accepted on read (torchlean's own files nest at most 5 deep)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def check_path(path: Any) -> str:
    """`path` as a str (a `str` or `os.PathLike` naming a non-empty path), else
    `CheckpointError`."""
    if not isinstance(path, (str, os.PathLike)):
        raise CheckpointError(
            f"{path!r}: a checkpoint path must be a str or os.PathLike, got {type(path).__name__}"
        )
    p = os.fspath(path)
    if not isinstance(p, str) or not p:
        raise CheckpointError(f"{path!r}: a checkpoint path must be a non-empty str path")
    return p


def _existing_target(p: str) -> os.stat_result | None:
    """The lstat of an existing save target (a regular file), None when there is none."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CheckpointError(f"{p}: cannot save ({e.strerror or e})") from None
    if stat.S_ISLNK(st.st_mode):
        raise CheckpointError(
            f"{p}: is a symbolic link; save refuses to replace links (pass the target path, "
            f"{os.path.realpath(p)!r}, to write there)"
        )
    if stat.S_ISDIR(st.st_mode):
        raise CheckpointError(f"{p}: is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(f"{p}: is not a regular file (a device, FIFO or socket)")
    return st


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` atomically (see the module docstring: targets, permissions,
    errors). On any failure the previous file is untouched and no temporary file is left."""
    p = check_path(path)
    _existing_target(p)
    write_atomic(p, data, error=CheckpointError)


# --------------------------------------------------------------------------- digests


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def json_bytes_with_digest(obj: dict[str, Any]) -> bytes:
    """The compact JSON text of `obj` with a last field "digest" (see the module docstring)."""
    return _compact({**obj, "digest": _sha256(_compact(obj))})


def note_unchecked(path: str | os.PathLike[str]) -> None:
    """Give the `IntegrityNotCheckedWarning` of a loaded file without a digest (called by
    readers after the load succeeded)."""
    warnings.warn(
        IntegrityNotCheckedWarning(
            f"{path}: no content digest (written by TorchLean or an older torchlean); "
            "integrity not checked"
        ),
        stacklevel=3,
    )


def checked_json(path: str | os.PathLike[str], obj: Any) -> tuple[Any, bool]:
    """(`obj` without its "digest" field, True) with the digest verified, or (obj, False)
    for a file without one (the caller gives `note_unchecked` once the load succeeded).
    Non-objects are returned as given."""
    if not isinstance(obj, dict) or "digest" not in obj:
        return obj, False
    want = obj["digest"]
    rest = {k: v for k, v in obj.items() if k != "digest"}
    if not isinstance(want, str) or not _DIGEST.fullmatch(want):
        raise CheckpointError(f"{path}: digest {want!r:.80} is not 'sha256:<64 hex digits>'")
    got = _sha256(_compact(rest))
    if got != want:
        raise CheckpointError(
            f"{path}: content digest mismatch, the file is corrupt (stored {want[:19]}..., "
            f"content hashes to {got[:19]}...)"
        )
    return rest, True


def _tensors_digest(meta: dict[str, str], tensors: dict[str, Any]) -> str:
    h = hashlib.sha256(json.dumps(sorted(meta.items())).encode("utf-8"))
    for name in sorted(tensors):
        t = np.ascontiguousarray(tensors[name])
        h.update(json.dumps([name, t.dtype.str, list(t.shape)]).encode("utf-8"))
        h.update(t.tobytes())
    return "sha256:" + h.hexdigest()


# --------------------------------------------------------------------------- arrays


def encode_array(a: Any, dtype: str) -> dict[str, Any]:
    """{"shape": [...], "values": [...]}: bit patterns (NaN canonical) or "p/q" strings
    (lowest terms, q > 0, also for integers: "3/1")."""
    arr = np.asarray(a)
    shape = [int(d) for d in arr.shape]
    if dtype == "exact":
        fr = [Fraction(v) for v in arr.reshape(-1)]
        return {"shape": shape, "values": [f"{q.numerator}/{q.denominator}" for q in fr]}
    if arr.dtype != np_dtype(dtype):
        raise CheckpointError(f"encode: array dtype {arr.dtype} is not {dtype}")
    bits = np.ascontiguousarray(arr).view(_UINT[arr.dtype.itemsize]).reshape(-1)
    can = canonical_nan_bits(dtype)
    vals = [can if _is_nan_bits(dtype, int(b)) else int(b) for b in bits]
    return {"shape": shape, "values": vals}


def _parse_exact(v: Any) -> Fraction | None:
    """The rational of a canonical "p/q" string (see the module docstring), else None."""
    if not isinstance(v, str) or not _EXACT.fullmatch(v):
        return None
    try:
        p, q = (int(t) for t in v.split("/"))
    except ValueError:  # beyond Python's int string-conversion digit limit
        return None
    if math.gcd(p, q) != 1:
        return None
    return Fraction(p, q)


def decode_array(
    entry: Any, dtype: str, expected: tuple[int, ...] | None, where: str
) -> np.ndarray:
    """Validate one {"shape", "values"} entry and decode it (no side effects)."""
    if not isinstance(entry, dict):
        raise CheckpointError(f"{where}: expected an object, got {type(entry).__name__}")
    extra = set(entry) - {"shape", "values"}
    if extra or "shape" not in entry or "values" not in entry:
        raise CheckpointError(f"{where}: expected keys ['shape', 'values'], got {sorted(entry)}")
    shape = entry["shape"]
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise CheckpointError(f"{where}: shape must be a list of non-negative ints, got {shape!r}")
    if expected is not None and tuple(shape) != tuple(expected):
        raise CheckpointError(f"{where}: shape {tuple(shape)} is not the expected {expected}")
    vals = entry["values"]
    n = math.prod(shape)
    if not isinstance(vals, list) or len(vals) != n:
        got = len(vals) if isinstance(vals, list) else type(vals).__name__
        raise CheckpointError(f"{where}: expected {n} values for shape {tuple(shape)}, got {got}")
    if dtype == "exact":
        out = np.empty(n, dtype=object)
        for i, v in enumerate(vals):
            q = _parse_exact(v)
            if q is None:
                raise CheckpointError(
                    f"{where}: value {i}: expected an exact rational 'p/q' in lowest terms "
                    f"(integers p, q with q > 0), got {v!r}"
                )
            out[i] = q
        return out.reshape(tuple(shape))
    _, _, width = _NAN[dtype]
    can = canonical_nan_bits(dtype)
    for i, b in enumerate(vals):
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < (1 << width):
            raise CheckpointError(
                f"{where}: value {i}: expected a {width}-bit pattern in [0, 2**{width}), got {b!r}"
            )
        if _is_nan_bits(dtype, b) and b != can:
            raise CheckpointError(
                f"{where}: value {i}: non-canonical NaN encoding {b:#x} "
                f"(the only NaN accepted is {can:#x})"
            )
    bits = np.array(vals, dtype=_UINT[np_dtype(dtype).itemsize])
    return bits.view(np_dtype(dtype)).reshape(tuple(shape)).copy()


def decode_list(
    entries: Any, dtype: str, shapes: list[tuple[int, ...]], where: str
) -> list[np.ndarray]:
    if not isinstance(entries, list):
        raise CheckpointError(f"{where}: expected a list, got {type(entries).__name__}")
    if len(entries) != len(shapes):
        raise CheckpointError(f"{where}: expected {len(shapes)} tensors, got {len(entries)}")
    return [
        decode_array(e, dtype, sh, f"{where}[{i}]")
        for i, (e, sh) in enumerate(zip(entries, shapes, strict=True))
    ]


def _refuse_constant(name: str) -> Any:
    raise CheckpointError(f"the JSON constant {name} is not allowed")


def _check_tree(path: str | os.PathLike[str], obj: Any) -> None:
    """Nesting depth <= MAX_DEPTH and every integer in (-2**64, 2**64) (iteratively)."""
    stack = [(obj, 1)]
    while stack:
        o, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise CheckpointError(f"{path}: JSON nested deeper than {MAX_DEPTH} levels")
        if isinstance(o, int) and not isinstance(o, bool) and not -(2**64) < o < 2**64:
            raise CheckpointError(f"{path}: integer out of range (|value| >= 2**64)")
        if isinstance(o, dict):
            stack.extend((v, depth + 1) for v in o.values())
        elif isinstance(o, list):
            stack.extend((v, depth + 1) for v in o)


def _read_regular(path: Any) -> tuple[str, bytes]:
    p = check_path(path)
    try:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise CheckpointError(f"{p}: cannot read ({kind})")
        with open(p, "rb") as f:
            return p, f.read()
    except OSError as e:
        raise CheckpointError(f"{p}: cannot read ({e.strerror or e})") from None


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON checkpoint (depth, integer range and constants checked; the digest is
    checked by `checked_json`)."""
    p, data = _read_regular(path)
    try:
        obj = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{p}: not UTF-8 text, corrupt ({e})") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{p}: not valid JSON, truncated or corrupt ({e})") from None
    except RecursionError:
        raise CheckpointError(f"{p}: JSON nested deeper than {MAX_DEPTH} levels") from None
    except CheckpointError as e:
        raise CheckpointError(f"{p}: {e}") from None
    except ValueError as e:  # e.g. an integer beyond Python's digit limit
        raise CheckpointError(f"{p}: not a valid checkpoint ({e})") from None
    _check_tree(p, obj)
    return obj


# --------------------------------------------------------------------------- state files


def _is_safetensors(path: str | os.PathLike[str]) -> bool:
    return str(path).endswith(".safetensors")


def save_state(
    path: str | os.PathLike[str], arrays: list[Any], dtype: str, tying: list[int] | None = None
) -> None:
    """Write a state file: safetensors when the name ends in `.safetensors`, else JSON."""
    if _is_safetensors(path):
        _save_safetensors(path, arrays, dtype, tying or [])
        return
    if dtype not in STATE_TAGS:
        raise CheckpointError(f"{path}: no state format for dtype {dtype!r}")
    obj = {"format": STATE_TAGS[dtype], "state": [encode_array(a, dtype) for a in arrays]}
    write_bytes_atomic(path, json_bytes_with_digest(obj))


def load_state(
    path: str | os.PathLike[str],
    shapes: list[tuple[int, ...]],
    dtype: str,
    tying: list[int] | None = None,
) -> list[np.ndarray]:
    """Read and fully validate a state file; returns the arrays, mutates nothing."""
    check_path(path)
    if _is_safetensors(path):
        return _load_safetensors(path, shapes, dtype, tying or [])
    return state_from_json(path, read_json(path), shapes, dtype)


def state_from_json(
    path: str | os.PathLike[str], obj: Any, shapes: list[tuple[int, ...]], dtype: str
) -> list[np.ndarray]:
    """Validate and decode an already parsed JSON state file (named `path` in errors); its
    digest is checked (or, absent, an `IntegrityNotCheckedWarning` is given)."""
    obj, checked = checked_json(path, obj)
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(obj).__name__}")
    tag = obj.get("format")
    want = STATE_TAGS.get(dtype)
    if tag != want:
        raise CheckpointError(f"{path}: format tag {tag!r} is not {want!r} (dtype {dtype})")
    extra = set(obj) - {"format", "state"}
    if extra:
        raise CheckpointError(f"{path}: unexpected keys {sorted(extra)}")
    out = decode_list(obj.get("state"), dtype, shapes, f"{path}: state")
    if not checked:
        note_unchecked(path)
    return out


def _save_safetensors(
    path: str | os.PathLike[str], arrays: list[Any], dtype: str, tying: list[int]
) -> None:
    from safetensors.numpy import save

    if dtype not in _NAN:
        raise CheckpointError(f"{path}: safetensors holds IEEE dtypes only, not {dtype!r}")
    tensors = {}
    for i, a in enumerate(arrays):
        enc = encode_array(a, dtype)  # canonical NaNs
        bits = np.array(enc["values"], dtype=_UINT[np_dtype(dtype).itemsize])
        bits = bits.reshape(tuple(enc["shape"]))
        tensors[f"state.{i}"] = bits if dtype == "bfloat16" else bits.view(np_dtype(dtype))
    meta = {
        "format": SAFETENSORS_TAG,
        "dtype": dtype,
        "count": str(len(arrays)),
        "tying": json.dumps(list(tying)),
    }
    meta["digest"] = _tensors_digest(meta, tensors)
    write_bytes_atomic(path, save(tensors, metadata=meta))


def _load_safetensors(
    path: str | os.PathLike[str], shapes: list[tuple[int, ...]], dtype: str, tying: list[int]
) -> list[np.ndarray]:
    from safetensors.numpy import load

    _, data = _read_regular(path)
    if len(data) < 8:
        raise CheckpointError(f"{path}: truncated safetensors file ({len(data)} bytes)")
    n = int.from_bytes(data[:8], "little")
    if 8 + n > len(data):
        raise CheckpointError(f"{path}: truncated safetensors header ({n} bytes announced)")
    try:
        header = json.loads(data[8 : 8 + n])
        tensors = load(data)
    except Exception as e:  # the library's own parse errors
        raise CheckpointError(f"{path}: corrupt safetensors file ({e})") from None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"{path}: corrupt safetensors file (no string metadata)")
    extra = sorted(set(meta) - {"format", "dtype", "count", "tying", "digest"})
    if extra:
        raise CheckpointError(f"{path}: unexpected metadata keys {extra}")
    checked = "digest" in meta
    if checked:
        want = meta["digest"]
        meta = {k: v for k, v in meta.items() if k != "digest"}
        if _tensors_digest(meta, tensors) != want:
            raise CheckpointError(f"{path}: content digest mismatch, the file is corrupt")
    if meta.get("format") != SAFETENSORS_TAG:
        raise CheckpointError(
            f"{path}: format tag {meta.get('format')!r} is not {SAFETENSORS_TAG!r}"
        )
    if meta.get("dtype") != dtype:
        raise CheckpointError(f"{path}: dtype {meta.get('dtype')!r} is not {dtype!r}")
    try:
        file_tying = json.loads(meta.get("tying", "null"))
    except json.JSONDecodeError:
        file_tying = None
    if file_tying != list(tying):
        raise CheckpointError(f"{path}: tying {file_tying!r} is not the model's {list(tying)!r}")
    names = [f"state.{i}" for i in range(len(shapes))]
    missing = [k for k in names if k not in tensors]
    extra = sorted(set(tensors) - set(names))
    if missing or extra or meta.get("count") != str(len(shapes)):
        raise CheckpointError(
            f"{path}: expected tensors {names}; missing {missing}, extra {extra}, "
            f"count {meta.get('count')!r}"
        )
    out = []
    want_dt = np.dtype(_UINT[2]) if dtype == "bfloat16" else np_dtype(dtype)
    for i, (k, sh) in enumerate(zip(names, shapes, strict=True)):
        t = tensors[k]
        if t.dtype != want_dt:
            raise CheckpointError(f"{path}: {k}: dtype {t.dtype} is not {want_dt}")
        bits = np.ascontiguousarray(t).view(_UINT[want_dt.itemsize])
        entry = {"shape": [int(d) for d in t.shape], "values": [int(b) for b in bits.reshape(-1)]}
        out.append(decode_array(entry, dtype, sh, f"{path}: state[{i}]"))
    if not checked:
        note_unchecked(path)
    return out
