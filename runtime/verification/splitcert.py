"""The split-bounds certificate (`torchlean_split_bounds_v1`): one JSON object per
conjunction of output rows, covering a whole branch-and-bound tree over an input box.

Invariants:
- "network" is `network_json(result, in_shape)` (the object the output-bounds certificate
  embeds) and "model_hash" its sha256 over the canonical JSON; "box" and "rows" are exact
  rationals as "p/q" strings; "digest" is the sha256 of the object without "digest".
- The tree is nested JSON: {"leaf": k}, {"split": j, "children": [low, high]} (input
  coordinate j at the exact midpoint of the node's box, both halves closed) or
  {"relu": [t, i], "children": [neg, pos]} (stage t, neuron i: z <= 0, then z >= 0).
  Every leaf index appears exactly once; `split_certificate` refuses a tree where it does
  not, and leaf records other than {"row": i[, "alpha": {stage: [float.hex(), ...]}]}.
- Nothing here proves anything: the certificate is what the independent checker
  (`python -m proofs check-cert`) recomputes; the search that built it is not trusted.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .core import VerificationError, sha
from .network import network_json

__all__ = ["SPLIT_FORMAT", "leaf_indices", "split_certificate"]

SPLIT_FORMAT = "torchlean_split_bounds_v1"


def _q(v: Fraction) -> str:
    f = Fraction(v)
    return f"{f.numerator}/{f.denominator}"


def leaf_indices(tree: dict[str, Any]) -> list[int]:
    """The leaf indices of a tree in depth-first order (iterative: trees are deep)."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        if "leaf" in node:
            out.append(int(node["leaf"]))
        else:
            todo += node["children"][::-1]
    return out


def split_certificate(
    net: Any,
    box: tuple[Any, Any],
    conj: Any,
    tree: dict[str, Any],
    leaves: list[dict[str, Any]],
) -> dict[str, Any]:
    """The certificate of one conjunction ((a, d) rows with exact a and d) proved empty on
    `box` (exact lower and upper ends) by `tree` and its `leaves`."""
    if sorted(leaf_indices(tree)) != list(range(len(leaves))):
        raise VerificationError("split certificate: the tree does not name each leaf once")
    for lf in leaves:
        if set(lf) - {"row", "alpha"} or not 0 <= lf["row"] < len(conj):
            raise VerificationError(f"split certificate: bad leaf record {lf!r}")
    network = network_json(net.result, net.in_shape)
    cert: dict[str, Any] = {
        "format": SPLIT_FORMAT,
        "network": network,
        "model_hash": sha(network),
        "box": {"lower": [_q(v) for v in box[0]], "upper": [_q(v) for v in box[1]]},
        "rows": [{"a": [_q(v) for v in a], "d": _q(d)} for a, d in conj],
        "tree": tree,
        "leaves": leaves,
    }
    cert["digest"] = sha(cert)
    return cert
