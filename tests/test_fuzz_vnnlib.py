"""Hypothesis fuzz of the VNN-LIB reader and the verification CLI: random token soups,
random byte-level mutations of a valid property and targeted malformations.

Properties: the reader raises nothing but `VNNLibError` (a `TorchLeanError`); a
malformation (an aliasing name, an unbalanced parenthesis, an unknown operator, a
literal beyond the caps, an undeclared name) is always refused and never answered; the
CLI on any of them exits 0 or 2 and, with 2, prints one line and no answer. Every run is
bounded by the reader's caps (sizes are checked before work).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.verification.__main__ import main as verify_main
from runtime.verification.vnnlib import Property, VNNLibError, parse_vnnlib

onnx = pytest.importorskip("onnx", reason="needs the onnx package")

from tests.test_bad_inputs_verifier import identity_model  # noqa: E402

VALID = """; a property on Y = X
(declare-const X_0 Real)
(declare-const Y_0 Real)
(assert (<= X_0 2.5))
(assert (>= X_0 (- 1)))
(assert (or (and (>= (+ Y_0 Y_0) 4)) (and (<= (* 3 Y_0) -6e-1) (>= Y_0 -1))))
"""

_TOKENS = [
    "(", ")", "(", ")", "X_0", "Y_0", "Y_00", "X_\u0660", "Y_1", "and", "or", "<=", ">=", "=",
    "+", "-", "*", "assert", "declare-const", "Real", "1", "-2.5", "1e400", "1e-9", "0x10",
    "1e100000000", "9" * 50, ";", "\n", "\u00a0", "\x00", "\ufeff", "check-sat",
]  # fmt: skip


def _cli(model: Path, prop: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = verify_main([str(model), str(prop), "--timeout", "5"])
    return rc, out.getvalue(), err.getvalue()


def _parse(text: str) -> Property | None:
    """The property, or None when refused with VNNLibError (any other exception fails)."""
    try:
        return parse_vnnlib(text, "float32")
    except VNNLibError:
        return None


def test_the_template_is_valid() -> None:
    p = _parse(VALID)
    assert p is not None and len(p.disjuncts) == 2


@given(st.lists(st.sampled_from(_TOKENS), max_size=60))
def test_fuzz_token_soup(tokens: list[str]) -> None:
    _parse(" ".join(tokens))


@given(st.text(max_size=300))
def test_fuzz_random_text(text: str) -> None:
    _parse(text)


@given(data=st.data())
def test_fuzz_mutated_property(data: Any) -> None:
    text = VALID
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if op == "delete":
            text = text[:i] + text[i + data.draw(st.integers(1, 12)) :]
        elif op == "insert":
            text = text[:i] + data.draw(st.sampled_from(_TOKENS)) + text[i:]
        else:
            j = data.draw(st.integers(i, min(len(text), i + 40)))
            text = text[:j] + text[i:j] + text[j:]
    _parse(text)


_MALFORM = {
    "alias_suffix": lambda t, k: t.replace("(+ Y_0 Y_0)", f"(+ Y_0 Y_{'0' * (k + 2)})"),
    "arabic_digit": lambda t, k: t.replace("(* 3 Y_0)", "(* 3 Y_\u0660)"),
    "unbalanced": lambda t, k: (
        t[: t.rindex(")") - k] + t[t.rindex(")") - k + 1 :]
        if t[t.rindex(")") - k] == ")"
        else t + "("
    ),
    "unknown_op": lambda t, k: t.replace("(* 3 Y_0)", ["(/ 3 Y_0)", "(= Y_0 3)", "(^ Y_0)"][k]),
    "big_literal": lambda t, k: t.replace("2.5", ["1e1001", "1" * 1001, "2.5e-1001"][k]),
    "out_of_range": lambda t, k: t.replace("2.5", ["1e39", "4e38", "-1e300"][k]),
    "undeclared_x": lambda t, k: t.replace("(- 1)", ["(- X_1)", "(- X_00)", "(- x_0)"][k]),
}


@given(kind=st.sampled_from(sorted(_MALFORM)), k=st.integers(0, 2))
def test_fuzz_malformations_are_refused(kind: str, k: int) -> None:
    text = _MALFORM[kind](VALID, k)
    assert text != VALID
    assert _parse(text) is None


@pytest.fixture(scope="module")
def model(tmp_path_factory: Any) -> Path:
    p = tmp_path_factory.mktemp("model") / "id.onnx"
    p.write_bytes(identity_model())
    return p


@given(kind=st.sampled_from(sorted(_MALFORM)), k=st.integers(0, 2), data=st.data())
def test_fuzz_cli_never_answers_a_malformed_file(model: Path, kind: str, k: int, data: Any,
                                                 tmp_path_factory: Any) -> None:  # fmt: skip
    text = _MALFORM[kind](VALID, k)
    p = tmp_path_factory.mktemp("prop") / "p.vnnlib"
    encoding = data.draw(st.sampled_from(["utf-8", "utf-16"]))  # utf-16: not UTF-8 text
    p.write_bytes(text.encode(encoding))
    rc, out, err = _cli(model, p)
    assert (rc, out) == (2, "") and err.startswith("error:") and err.count("\n") == 1


@given(tokens=st.lists(st.sampled_from(_TOKENS), max_size=40))
def test_fuzz_cli_answers_only_what_parses(model: Path, tokens: list[str],
                                           tmp_path_factory: Any) -> None:  # fmt: skip
    text = VALID + " ".join(tokens)
    p = tmp_path_factory.mktemp("prop") / "p.vnnlib"
    p.write_text(text, encoding="utf-8")
    rc, out, err = _cli(model, p)
    if _parse(text) is None:
        assert (rc, out) == (2, "") and err.count("\n") == 1
    else:
        assert rc in (0, 2)  # 2: a property that parses but does not fit the network
        if rc == 0:
            assert out.split("\n")[0] in ("sat", "unsat", "unknown") and err == ""
        else:
            assert out == "" and err.count("\n") == 1


def _formulas() -> st.SearchStrategy[Any]:
    """Trees of and / or over atoms Y_0 <= k (k an int naming the atom)."""
    atoms = st.integers(0, 9)
    return st.recursive(
        atoms,
        lambda kids: st.tuples(
            st.sampled_from(["and", "or"]), st.lists(kids, min_size=1, max_size=3)
        ),
        max_leaves=12,
    )


def _text(f: Any) -> str:
    if isinstance(f, int):
        return f"(<= Y_0 {f})"
    return f"({f[0]} " + " ".join(_text(k) for k in f[1]) + ")"


def _expand(f: Any) -> list[tuple[int, ...]]:
    """The reference disjunctive normal form, written plainly (recursive, copying)."""
    if isinstance(f, int):
        return [(f,)]
    parts = [_expand(k) for k in f[1]]
    if f[0] == "or":
        return [c for p in parts for c in p]
    out: list[tuple[int, ...]] = [()]
    for p in parts:
        out = [a + b for a in out for b in p]
    return out


@given(st.lists(_formulas(), min_size=1, max_size=3))
def test_fuzz_dnf_matches_a_plain_expansion(asserts: list[Any]) -> None:
    want: list[tuple[int, ...]] = [()]
    for f in asserts:
        want = [a + b for a in want for b in _expand(f)]
    text = "(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(assert (<= X_0 1))\n"
    text += "(assert (>= X_0 0))\n" + "".join(f"(assert {_text(f)})\n" for f in asserts)
    try:
        p = parse_vnnlib(text)
    except VNNLibError as e:  # only the size caps may refuse a well-formed formula
        assert "more than" in str(e) and len(want) > 4096
        return
    got = [tuple(int(d) for _, d in conj) for conj in p.disjuncts]
    assert got == want
