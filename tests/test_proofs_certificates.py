"""The output-bound certificate checker checks every field:
`kernels`, the statement text regenerated from the fields, runtime claims of results whose
kernels the runtime level does not model, unknown fields, and hostile JSON (deep nesting,
huge integers, NaN). Each forgery is re-digested, so only the field check can refuse it."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import proofs.bounds_certificate_check as bcc
from proofs.bounds_certificate_check import CertificateError, check_certificate, check_file
from runtime.backends import get_backend
from runtime.nn import Linear, ReLU, Sequential
from runtime.trainer import Result
from runtime.verification import results as vresults


def _redigest(cert: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in cert.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    cert["digest"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return cert


def _cert(kernels: str = "ordered", dtype: str = "float32") -> dict[str, Any]:
    # the hand-worked top_label network of tests/test_verify.py: CROWN proves label 1
    model = Sequential(Linear(2, 2), ReLU(), Linear(2, 2))
    state = [[[1, 1], [1, -1]], [0, 0], [[1, 1], [-1, -1]], [0, 7]]
    np_dt = get_backend("numpy").dtype(dtype)
    res = Result(
        model, "mse", dtype, "eager", kernels, False, [np.asarray(a, dtype=np_dt) for a in state]
    )
    return res.verify([0.0, 0.0], 1.0, property=("top_label", 1), algorithm="crown").certificate()


@pytest.fixture(scope="module")
def ordered() -> dict[str, Any]:
    return _cert()


@pytest.fixture(scope="module")
def fast() -> dict[str, Any]:
    return _cert("fast")


def _refused(good: dict[str, Any], edit: Any, match: str) -> None:
    c = copy.deepcopy(good)
    edit(c)
    with pytest.raises(CertificateError, match=match):
        check_certificate(_redigest(c))


def test_statements_are_restated_exactly() -> None:
    for level in ("real", "runtime"):
        for dt in ("float32", "float64", "bfloat16", "float16", "exact"):
            for k in bcc.KERNELS:
                assert bcc.statement(level, dt, k) == vresults.statement(level, dt, k)


def test_genuine_certificates_hold(ordered: dict[str, Any], fast: dict[str, Any]) -> None:
    assert check_certificate(ordered).startswith("certificate holds")
    assert ordered["kernels"] == "ordered" and ordered["levels"]["runtime"]["holds"] is True
    # a fast-kernel result: the runtime level claims nothing about what it computes
    assert fast["kernels"] == "fast" and fast["levels"]["runtime"]["holds"] is None
    assert "not covered" in fast["levels"]["runtime"]["statement"]
    assert check_certificate(fast).startswith("certificate holds")


def test_kernels_field_is_checked(ordered: dict[str, Any], fast: dict[str, Any]) -> None:
    _refused(ordered, lambda c: c.pop("kernels"), "kernels: expected one of")
    _refused(ordered, lambda c: c.update(kernels="turbo"), "kernels: expected one of")
    # a fast-kernel result that claims to be ordered: its statement gives it away
    _refused(fast, lambda c: c.update(kernels="ordered"), r"levels\.runtime\.statement")

    def claim_fast_holds(c: dict[str, Any]) -> None:
        c["levels"]["runtime"]["holds"] = True

    _refused(fast, claim_fast_holds, r"levels\.runtime\.holds: kernels 'fast'")

    def claim_fast_ordered(c: dict[str, Any]) -> None:  # every trace of "fast" rewritten
        c["kernels"] = "ordered"
        c["levels"]["runtime"]["statement"] = bcc.statement("runtime", "float32", "ordered")
        c["levels"]["runtime"]["holds"] = True

    # with every trace rewritten it is a genuine ordered certificate of the same network and
    # box (the certificate embeds the weights, not how they were trained): the checker
    # re-establishes the ordered-kernel bounds, so that claim is true
    c = copy.deepcopy(fast)
    claim_fast_ordered(c)
    assert check_certificate(_redigest(c)).startswith("certificate holds")
    # an ordered certificate cannot drop its runtime claim to null either way
    _refused(ordered, lambda c: c["levels"]["runtime"].update(holds=None), "holds: expected")


def test_rewritten_statements_are_refused(ordered: dict[str, Any]) -> None:
    real = ordered["levels"]["real"]["statement"]
    stronger = real.replace("for every real input in the box", "for every input")

    for level, text in (
        ("real", stronger),
        ("real", real + "; and the network is robust everywhere"),
        ("runtime", bcc.statement("runtime", "float64", "ordered")),
        ("runtime", bcc.statement("runtime", "exact", "ordered")),
        ("real", ""),
        ("runtime", None),
    ):
        _refused(
            ordered,
            lambda c, lv=level, t=text: c["levels"][lv].update(statement=t),
            rf"levels\.{level}\.statement: does not match",
        )
    _refused(ordered, lambda c: c["levels"]["real"].update(note="x"), "unknown fields")
    _refused(ordered, lambda c: c["levels"].update(fast={}), "unknown levels")


def test_hostile_json_is_refused(ordered: dict[str, Any], tmp_path: Path) -> None:
    def file_refused(text: str, match: str) -> None:
        p = tmp_path / "c.json"
        p.write_text(text)
        with pytest.raises(CertificateError, match=match):
            check_file(str(p))

    file_refused("[" * 100_000 + "]" * 100_000, "nested deeper than 32")
    deep = copy.deepcopy(ordered)
    x: Any = 0
    for _ in range(40):
        x = {"a": x}
    deep["extra"] = x
    file_refused(json.dumps(deep), "nested deeper")
    big = copy.deepcopy(ordered)
    big["property"] = ["top_label", 10**40]
    file_refused(json.dumps(big), "JSON integer of 41 digits")
    file_refused(json.dumps(ordered).replace('"0/1"', "NaN", 1), "constant NaN")
    file_refused("{", "cannot parse")
    huge = "9" * 5000 + "/1"
    _refused(ordered, lambda c: c["box"].update(center=[huge, "0/1"]), "rational of 5002 char")
    # strings are not nesting: brackets inside a string do not count
    ok = copy.deepcopy(ordered)
    p = tmp_path / "ok.json"
    p.write_text(json.dumps(ok).replace('"norm": "inf"', '"norm": "inf"'))
    assert check_file(str(p)).startswith("certificate holds")
    assert bcc.parse('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}') == {"a": "[" * 42}
