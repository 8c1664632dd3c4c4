"""The environment fingerprint a worker must share with the driver before it gets work.

Invariants:
- `fingerprint()` is a flat dict of strings, computed once per process: the torchlean
  version, a SHA-256 over the package sources (`source_hash`: every `*.py` and `*.csv`
  under spec/, runtime/, conformance/ and proofs/, by relative path and content, read from
  disk), the versions of every library that can change a result (Python, NumPy, gmpy2, GMP,
  MPFR, ml_dtypes, sympy, mpmath, Hypothesis, array-api-compat), the machine and the width
  of NumPy's long double (the sweep's reference), and the float-environment probe
  (`spec.probe.check_subnormals`, run in that process when the fingerprint is taken).
- `differences(here, there)` names every key whose values differ, as
  `key: worker <there> vs here <here>`; a worker is accepted only when it is empty and
  its probe passed (`"ok"`).
- Nothing here imports Dask.
"""

from __future__ import annotations

import functools
import hashlib
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["PACKAGES", "differences", "digest", "fingerprint", "source_hash"]

PACKAGES = ("spec", "runtime", "conformance", "proofs")
_SUFFIXES = (".py", ".csv")
ROOT = Path(__file__).resolve().parents[2]


def source_hash(root: Path = ROOT) -> str:
    """SHA-256 over the relative paths and contents of the package sources under `root`."""
    h = hashlib.sha256()
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*")):
            if p.suffix in _SUFFIXES and p.is_file() and "__pycache__" not in p.parts:
                h.update(p.relative_to(root).as_posix().encode() + b"\0")
                h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _dist_version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def _torchlean_version(root: Path = ROOT) -> str:
    v = _dist_version("torchlean")
    if v != "not installed":
        return v
    py = root / "pyproject.toml"  # a source tree on sys.path: the version it declares
    if py.is_file():
        for line in py.read_text().splitlines():
            if line.startswith("version"):
                return line.split("=", 1)[1].strip().strip('"') + " (source tree)"
    return v


def _probe() -> str:
    from spec.probe import check_subnormals

    try:
        check_subnormals()
    except Exception as e:  # the probe's error names what failed; report it, don't raise
        return f"FAILED: {e}"
    return "ok"


def _libraries() -> dict[str, str]:
    import gmpy2
    import numpy as np

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "gmpy2": gmpy2.version(),
        "gmp": gmpy2.mp_version(),
        "mpfr": gmpy2.mpfr_version(),
        "ml_dtypes": _dist_version("ml_dtypes"),
        "sympy": _dist_version("sympy"),
        "mpmath": _dist_version("mpmath"),
        "hypothesis": _dist_version("hypothesis"),
        "array_api_compat": _dist_version("array-api-compat"),
        "machine": platform.machine(),
        "longdouble_mantissa_bits": str(np.finfo(np.longdouble).nmant),
    }


@functools.cache
def fingerprint() -> dict[str, str]:
    """This process's fingerprint (see the module invariants); cached per process."""
    return {
        "torchlean": _torchlean_version(),
        "source_hash": source_hash(),
        **_libraries(),
        "float_probe": _probe(),
    }


def digest(fp: dict[str, str]) -> str:
    """A short stable digest of a fingerprint."""
    text = "\n".join(f"{k}={fp[k]}" for k in sorted(fp))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def differences(here: dict[str, str], there: dict[str, str]) -> list[str]:
    """Every difference of `there` (a worker) from `here` (the driver), and a failed probe."""
    out = []
    for k in sorted(set(here) | set(there)):
        a, b = here.get(k, "missing"), there.get(k, "missing")
        if a != b:
            out.append(f"{k.replace('_', ' ')}: worker {b} vs here {a}")
    if there.get("float_probe", "ok") != "ok" and not any(d.startswith("float") for d in out):
        out.append(f"float probe: {there['float_probe']}")
    return out
