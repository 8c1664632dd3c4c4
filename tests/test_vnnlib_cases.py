"""Input disjunctions (`parse_vnnlib_cases`) go through the same hardened reader as a single
box: names matched exactly as declared, repeated variables added, the DNF sized before it is
expanded, and no case list that is empty."""

from __future__ import annotations

from fractions import Fraction

import pytest

from runtime.verification.vnnlib import VNNLibError, parse_vnnlib_cases

HEAD = "(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(declare-const Y_1 Real)\n"
BOXES = "(assert (or (and (>= X_0 0) (<= X_0 1)) (and (>= X_0 2) (<= X_0 3))))\n"


def test_two_boxes_are_two_cases_with_their_rows() -> None:
    cases = parse_vnnlib_cases(HEAD + BOXES + "(assert (<= Y_0 Y_1))\n")
    assert [(p.lower, p.upper) for p in cases] == [
        ((Fraction(0),), (Fraction(1),)),
        ((Fraction(2),), (Fraction(3),)),
    ]
    # Y_0 - Y_1 <= 0 in each case
    for p in cases:
        assert p.disjuncts == ((((Fraction(1), Fraction(-1)), Fraction(0)),),)


@pytest.mark.parametrize("alias", ["Y_00", "Y_\u0660", "Y_01"])
def test_an_alias_of_a_declared_name_is_refused_in_a_disjunction(alias: str) -> None:
    text = HEAD + BOXES + f"(assert (<= (+ Y_0 {alias}) 0))\n"
    with pytest.raises(VNNLibError):
        parse_vnnlib_cases(text)


def test_a_repeated_variable_is_added_in_a_disjunction() -> None:
    twice = parse_vnnlib_cases(HEAD + BOXES + "(assert (<= (+ Y_0 Y_0) 1))\n")
    scaled = parse_vnnlib_cases(HEAD + BOXES + "(assert (<= (* 2 Y_0) 1))\n")
    assert [p.disjuncts for p in twice] == [p.disjuncts for p in scaled]
    assert twice[0].disjuncts[0][0] == ((Fraction(2), Fraction(0)), Fraction(1))


def test_only_empty_boxes_are_refused() -> None:
    empty = "(assert (or (and (>= X_0 1) (<= X_0 0)) (and (>= X_0 3) (<= X_0 2))))\n"
    with pytest.raises(VNNLibError):
        parse_vnnlib_cases(HEAD + empty + "(assert (<= Y_0 Y_1))\n")


def test_a_case_without_both_bounds_is_refused() -> None:
    half = "(assert (or (and (>= X_0 0) (<= X_0 1)) (>= X_0 2)))\n"
    with pytest.raises(VNNLibError):
        parse_vnnlib_cases(HEAD + half + "(assert (<= Y_0 Y_1))\n")
