"""Input splitting on the rigorous engine (`splitting.sound_split_search`) and the split
certificate it yields (`splitcert.split_certificate`), re-validated by the independent
checker `proofs.split_certificate_check`."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from proofs.bounds_certificate_check import canonical_sha
from proofs.split_certificate_check import CertificateError
from proofs.split_certificate_check import check_certificate as check_split
from runtime.nn import Linear, ReLU, Sequential
from runtime.trainer import Result
from runtime.verification import VerificationError
from runtime.verification.floatnet import FloatNet
from runtime.verification.from_graph import Network
from runtime.verification.rigorous import SoundNet
from runtime.verification.splitcert import SPLIT_FORMAT, leaf_indices, split_certificate
from runtime.verification.splitting import cover_boxes, sound_split_search


def _abs_net() -> Network:
    """Y = relu(x0) + relu(-x0) + relu(x1) + relu(-x1) = |x0| + |x1| (float32)."""
    W1 = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]], np.float32)
    state = [W1, np.zeros(4, np.float32), np.ones((1, 4), np.float32), np.zeros(1, np.float32)]
    res = Result(Sequential(Linear(2, 4), ReLU(), Linear(4, 1)), "mse", "float32", "eager",
                 "ordered", False, state)  # fmt: skip
    return Network(res, 2, 1, [], (2,))


BOX = ((Fraction(-1), Fraction(-1)), (Fraction(2), Fraction(2)))


def _search(
    net: Network, d: float, hits: list[Any], slopes: bool = True, opt: tuple[int, int] = (0, 0)
) -> tuple[str, Any]:
    sn, fn = SoundNet.build(net), FloatNet.build(net.result, net.in_shape)
    assert sn is not None

    def attack(pts: list[np.ndarray]) -> Any:
        hits.extend(pts)
        return ("hit", pts[0]) if pts else None

    rows = (np.array([[1.0]]), np.array([d]))
    return sound_split_search(
        sn, fn, BOX, rows, attack, deadline=float("inf"), slopes=slopes, opt=opt
    )


def test_unsat_by_leaf_slopes_and_the_certificate_holds() -> None:
    """|x0| + |x1| <= -1/8 is empty on [-1, 2]^2 but not by CROWN's adaptive slopes on the
    whole box (1 for relu(x), 0 for relu(-x): the bound is x0 + x1 >= -2); the leaf's own
    lower slopes (all 1: |x| >= x + (-x) = 0) close it, and the checker agrees."""
    net = _abs_net()
    sn = SoundNet.build(net)
    assert sn is not None
    lo, hi = np.array([[-1.0, -1]]), np.array([[2.0, 2]])
    assert sn.lower(lo, hi, np.array([[1.0]]))[0][0, 0] < -0.125
    status, got = _search(net, -0.125, [])
    assert status == "unsat"
    tree, leaves = got
    assert any("alpha" in lf for lf in leaves)
    adaptive = _search(net, -0.125, [], slopes=False)
    assert adaptive[0] == "unsat" and "split" in adaptive[1][0]  # without them: splits
    assert all("alpha" not in lf for lf in adaptive[1][1])
    cert = split_certificate(net, BOX, (((Fraction(1),), Fraction(-1, 8)),), *adaptive[1])
    assert "certificate holds" in check_split(cert)
    conj = (((Fraction(1),), Fraction(-1, 8)),)
    cert = split_certificate(net, BOX, conj, tree, leaves)
    assert cert["format"] == SPLIT_FORMAT and cert["rows"] == [{"a": ["1/1"], "d": "-1/8"}]
    assert sorted(leaf_indices(tree)) == list(range(len(leaves)))
    assert len(cover_boxes(BOX, tree)) == len(leaves)
    assert "certificate holds" in check_split(cert)
    worse = split_certificate(net, BOX, (((Fraction(1),), Fraction(0)),), tree, leaves)
    with pytest.raises(CertificateError, match="not proved"):
        check_split(worse)  # |x| + |y| <= 0 holds at the origin: some leaf cannot close


def test_sat_point_goes_to_the_attack() -> None:
    hits: list[Any] = []
    status, got = _search(_abs_net(), 0.25, hits)
    assert status == "sat" and got[0] == "hit"
    assert all(abs(x[0]) + abs(x[1]) <= 0.25 + 1e-6 for x in hits[:1])


def test_certificate_refuses_a_tree_without_each_leaf_once() -> None:
    net = _abs_net()
    conj = (((Fraction(1),), Fraction(-1)),)
    tree = {"split": 0, "children": [{"leaf": 0}, {"leaf": 0}]}
    with pytest.raises(VerificationError, match="each leaf once"):
        split_certificate(net, BOX, conj, tree, [{"row": 0}, {"row": 0}])
    with pytest.raises(VerificationError, match="bad leaf record"):
        split_certificate(net, BOX, conj, {"leaf": 0}, [{"row": 1}])


def test_constants_shared_with_the_checker() -> None:
    """The verifier and the checker restate the format's constants independently."""
    from proofs import split_certificate_check as chk
    from runtime.verification.rigorous import FORMATS
    from runtime.verification.splitting import MAX_DEPTH

    assert SPLIT_FORMAT == chk.FORMAT and dict(FORMATS) == dict(chk.DTYPES)
    assert MAX_DEPTH == chk.MAX_TREE_DEPTH


def _adaptive_fails_slopes_prove() -> tuple[Network, Any, Any]:
    """The search with slope ascent only (no schemes) on |x0| + |x1| <= -1/8: the plain
    bound of the whole box is short, the optimised slopes close it without a split."""
    net = _abs_net()
    sn, fn = SoundNet.build(net), FloatNet.build(net.result, net.in_shape)
    assert sn is not None
    rows = (np.array([[1.0]]), np.array([-0.125]))
    got = sound_split_search(sn, fn, BOX, rows, lambda p: None, float("inf"), opt=(20, 0))
    return net, got, sn


def test_optimised_slopes_close_a_box_plain_crown_does_not() -> None:
    net, (status, (tree, leaves)), sn = _adaptive_fails_slopes_prove()
    lo, hi = np.array([[-1.0, -1]]), np.array([[2.0, 2]])
    assert sn.lower(lo, hi, np.array([[1.0]]))[0][0, 0] < -0.125  # plain CROWN: short
    assert status == "unsat" and tree == {"leaf": 0}
    (leaf,) = leaves
    assert leaf["row"] == 0 and set(leaf["alpha"]) == {"1"}
    slopes = [float.fromhex(h) for h in leaf["alpha"]["1"]]
    assert all(0.0 <= a <= 1.0 for a in slopes)
    alpha = [np.array([[slopes]])]
    assert sn.lower(lo, hi, np.array([[1.0]]), alpha=alpha)[0][0, 0] > -0.125
    conj = (((Fraction(1),), Fraction(-1, 8)),)
    cert = split_certificate(net, BOX, conj, tree, leaves)
    assert "certificate holds" in check_split(cert)
    plain = sound_split_search(sn, None, BOX, (np.array([[1.0]]), np.array([-0.125])),
                               lambda p: None, float("inf"), opt=(0, 0))  # fmt: skip
    assert plain[0] == "unsat" and "split" in plain[1][0]  # without the ascent: splits


def test_forged_slopes_are_refused() -> None:
    """The adaptive slopes written in place of the optimised ones, digest recomputed: the
    checker's own bound with them falls short, so the leaf is not proved."""
    net, (_, (tree, leaves)), _ = _adaptive_fails_slopes_prove()
    conj = (((Fraction(1),), Fraction(-1, 8)),)
    cert = split_certificate(net, BOX, conj, tree, leaves)
    forged = json.loads(json.dumps(cert))
    forged["leaves"][0]["alpha"]["1"] = [float(v).hex() for v in (1.0, 0.0, 1.0, 0.0)]
    forged["digest"] = canonical_sha({k: v for k, v in forged.items() if k != "digest"})
    with pytest.raises(CertificateError, match="not proved"):
        check_split(forged)
    tampered = json.loads(json.dumps(cert))
    tampered["leaves"][0]["alpha"]["1"][0] = (0.5).hex()
    with pytest.raises(CertificateError, match="digest"):
        check_split(tampered)  # changed without recomputing the digest
