"""Forging helpers for the certificate tests: re-sign an edited certificate so that the
checker's refusal is about its content, never about a stale digest. Written with hashlib
here, independently of the verifier's and the checker's own hashing."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["resign"]


def _sha(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def resign(cert: dict[str, Any], network: bool = False) -> dict[str, Any]:
    """`cert` with its digest recomputed over every other field (and first, with `network`,
    its model hash over its network), in place; returned for chaining."""
    if network:
        cert["model_hash"] = _sha(cert["network"])
    cert["digest"] = _sha({k: v for k, v in cert.items() if k != "digest"})
    return cert
