"""Branch and bound on ReLU splits (`algorithm="bab"`): proofs alpha-CROWN alone cannot
give, runtime counterexamples, the budget, and the checker's validation of the split tree.

The network is a fixed seeded 3-8-8-3 ReLU net in binary32; at the center below label 1 is
on top. Radii, measured: 0.035 is proved by alpha-CROWN alone, 0.04 needs a few branches,
0.1 has a counterexample near a vertex of the box.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from proofs.bounds_certificate_check import CertificateError, check_certificate
from runtime.backends import get_backend
from runtime.nn import Linear, ReLU, Sequential
from runtime.trainer import Result
from runtime.verification import VerificationError, verify
from runtime.verification.arithmetic import Arith
from runtime.verification.crown import Crown
from runtime.verification.network import stages

C = [0.2, -0.1, 0.3]


def _net(dims: list[int], seed: int) -> Result:
    rng = np.random.default_rng(seed)
    layers: list[Any] = []
    state: list[Any] = []
    for i, (a, b) in enumerate(itertools.pairwise(dims)):
        layers.append(Linear(a, b))
        state += [rng.normal(size=(b, a)) / np.sqrt(a), rng.normal(size=b) * 0.1]
        if i < len(dims) - 2:
            layers.append(ReLU())
    np_dt = get_backend("numpy").dtype("float32")
    return Result(Sequential(*layers), "mse", "float32", "eager", "ordered", False,
                  [np.asarray(a, dtype=np_dt) for a in state])  # fmt: skip


@pytest.fixture(scope="module")
def net() -> Result:
    res = _net([3, 8, 8, 3], 1)
    assert int(np.argmax(res.predict(C))) == 1
    return res


@pytest.fixture(scope="module")
def proved(net: Result) -> Any:
    return verify(net, C, 0.04, property=("top_label", 1), algorithm="bab")


def _redigest(cert: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in cert.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    cert["digest"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return cert


def test_branching_proves_what_alpha_crown_cannot(net: Result, proved: Any) -> None:
    alpha = net.verify(C, 0.04, property=("top_label", 1), algorithm="alpha-crown")
    assert alpha.holds is False and alpha.real.margins is not None
    assert proved.holds is True and proved.branches > 1 and proved.counterexample is None
    for lv in (proved.real, proved.runtime):
        assert lv.holds and all(m > 0 for m in lv.margins if m is not None)
    assert proved.real.lower == alpha.real.lower  # the root's bounds are alpha-CROWN's
    cert = proved.certificate()
    assert len(cert["levels"]["real"]["branches"]) >= 2
    assert "bab bounds" in check_certificate(json.loads(json.dumps(cert)))
    # the runtime keeps label 1 on top at sampled points of the box
    rng = np.random.default_rng(0)
    pts = [[c + 0.04 * float(u) for c, u in zip(C, rng.uniform(-1, 1, 3), strict=True)]
           for _ in range(200)]  # fmt: skip
    pts = [p for p in pts if all(abs(Fraction(x) - Fraction(c)) <= Fraction(0.04)
                                 for x, c in zip(p, C, strict=True))]  # fmt: skip
    out = np.asarray(net.predict(pts, batch=True), dtype=np.float64)
    assert (out.argmax(axis=1) == 1).all()
    margin = [out[:, 1] - out[:, j] for j in (0, 2)]
    assert float(proved.runtime.margins[0]) <= margin[0].min()
    assert float(proved.runtime.margins[2]) <= margin[1].min()


def test_counterexample_is_a_runtime_violation(net: Result) -> None:
    v = verify(net, C, 0.1, property=("top_label", 1), algorithm="bab")
    assert v.holds is False and v.counterexample is not None
    x = v.counterexample["input"]
    assert all(abs(Fraction(a) - Fraction(c)) <= Fraction(0.1) for a, c in zip(x, C, strict=True))
    y = net.predict(x)  # checked here, independently of the search
    assert max(y[0], y[2]) >= y[1]
    assert [float(t) for t in y] == v.counterexample["output"]
    assert "branches" not in v.certificate()["levels"]["real"]
    check_certificate(v.certificate())


def test_budget_spent_is_unknown(net: Result) -> None:
    v = verify(net, C, 0.04, property=("top_label", 1), algorithm="bab", max_branches=1)
    assert v.holds is None and v.counterexample is None and v.branches == 1
    cert = v.certificate()
    assert "branches" not in cert["levels"]["real"]
    check_certificate(cert)


def test_bab_needs_a_top_label_property(net: Result) -> None:
    with pytest.raises(VerificationError, match="'bab' needs property"):
        net.verify(C, 0.04, algorithm="bab")


def test_forged_split_trees_are_refused(proved: Any) -> None:
    good = proved.certificate()

    def refused(edit: Any, match: str) -> None:
        c = copy.deepcopy(good)
        edit(c["levels"]["real"]["branches"])
        with pytest.raises(CertificateError, match=match):
            check_certificate(_redigest(c))

    refused(lambda b: b.pop(), "complete tree")
    refused(lambda b: b[0]["splits"][0].__setitem__(2, -b[0]["splits"][0][2]), "complete tree")
    refused(lambda b: b[0]["splits"][0].__setitem__(0, 1), r"splits: expected \[\[relu stage")
    refused(lambda b: b[0]["splits"][0].__setitem__(2, 2), r"splits: expected")
    refused(lambda b: b[0].update(infeasible=True), "claimed infeasible")
    refused(lambda b: b[0]["witness"].pop(), "not infeasible by stage")
    refused(lambda b: b[0]["witness"][1]["out"][0].__setitem__(1, "-1000/1"), "not sound")
    # a false margin claim: the leaves do not establish it
    c = copy.deepcopy(good)
    c["levels"]["real"]["margins"][0] = "1/1"
    with pytest.raises(CertificateError, match="margins"):
        check_certificate(_redigest(c))
    # without the tree the root (alpha-CROWN) margins do not prove the claimed ones
    c = copy.deepcopy(good)
    del c["levels"]["real"]["branches"]
    with pytest.raises(CertificateError, match="margins"):
        check_certificate(_redigest(c))


def test_an_infeasible_leaf_is_recognised() -> None:
    # z = x on [-1, 1]; h = relu(z); u = -h - 1/8 <= -1/8 < 0; out = (relu(u), 2 - relu(u))
    # ReLU stages are 2 and 4; the branch "u >= 0" (stage 4, neuron 0, +1) holds no input
    model = Sequential(Linear(1, 1), ReLU(), Linear(1, 1), ReLU(), Linear(1, 2))
    np_dt = get_backend("numpy").dtype("float32")
    state = [[[1.0]], [0.0], [[-1.0]], [-0.125], [[1.0], [-1.0]], [0.0, 2.0]]
    res = Result(model, "mse", "float32", "eager", "ordered", False,
                 [np.asarray(a, dtype=np_dt) for a in state])  # fmt: skip
    v = verify(res, [0.0], 1.0, property=("top_label", 1), algorithm="bab")
    assert v.holds is True and v.branches == 0  # out1 - out0 = 2: the root proves it
    cert = v.certificate()
    H = Arith(None)
    box = [(H.cv(H.dn, -1), H.cv(H.up, 1))]
    leaves = []
    for sign in (1, -1):
        cr = Crown(H, H, None, stages(res), box, optimise=True, splits={4: {0: sign}})
        assert (cr.empty is not None) == (sign == 1)
        leaves.append({"splits": [[4, 0, sign]], "witness": cr.witness()})
    assert len(leaves[0]["witness"]) == 3 < len(leaves[1]["witness"]) == 5
    c = copy.deepcopy(cert)
    c["levels"]["real"]["branches"] = leaves
    assert "holds" in check_certificate(_redigest(c))  # the checker finds it empty itself
    c["levels"]["real"]["branches"][1]["infeasible"] = True
    with pytest.raises(CertificateError, match="claimed infeasible"):
        check_certificate(_redigest(c))
