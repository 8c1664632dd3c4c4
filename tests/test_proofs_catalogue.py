"""The catalogue of `proofs`: producers return their theorems (nothing is registered at
import), names and aliases are unique, and a theorem is found under an alias (TorchLean's
Lean name of the link theorem)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from proofs import catalogue
from proofs.catalogue import PRODUCERS, ProofError, get, select, theorems
from proofs.records import Scope, Theorem

ROOT = Path(__file__).resolve().parent.parent
LINK = "link.backward_dense_from_lower_eq_backprop_all_ctx"
LEAN = "backwardDenseFrom_compileAuxData_eq_backpropAllCtx"


def test_torchlean_name_is_an_alias_of_the_link_theorem() -> None:
    assert get(LEAN) is get(LINK)
    assert get(LINK).aliases == (LEAN,)
    assert [t.name for t in select([LEAN])] == [LINK]


def test_an_unknown_name_is_refused() -> None:
    with pytest.raises(ProofError, match="unknown theorem 'backwardDenseFrom'"):
        get("backwardDenseFrom")


def test_show_finds_a_theorem_under_its_alias() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "proofs", "show", LEAN],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    assert out.startswith(LINK + "\n")
    aliases = next(ln for ln in out.splitlines() if ln.startswith("  aliases:"))
    assert LEAN in aliases.split(":", 1)[1].replace(",", " ").split()


def test_producers_return_the_catalogue_in_order_and_register_nothing() -> None:
    before = [t.name for t in theorems()]
    produced = [t.name for produce in PRODUCERS for t in produce()]
    assert produced == before
    assert [t.name for t in theorems()] == before  # asking again changed nothing


def _th(name: str, aliases: tuple[str, ...] = ()) -> Theorem:
    return Theorem(
        name=name,
        statement="s",
        formula="f",
        scope=Scope((), (), ""),
        evidence=("written proof",),
        check=lambda ctx: None,  # type: ignore[arg-type,return-value]
        aliases=aliases,
    )


@pytest.mark.parametrize(
    "made",
    [
        [_th("a.x"), _th("a.x")],
        [_th("a.x", ("lean_x",)), _th("a.y", ("lean_x",))],
        [_th("a.x"), _th("a.y", ("a.x",))],
        [_th("a.x", ("a.y",)), _th("a.y")],
        [_th("a.x", ("a.x",))],
    ],
)
def test_names_and_aliases_are_unique(monkeypatch: pytest.MonkeyPatch, made: list[Theorem]) -> None:
    monkeypatch.setattr(catalogue, "PRODUCERS", (lambda: made,))
    monkeypatch.setattr(catalogue, "_BUILT", [])
    with pytest.raises(ProofError, match=r"used twice|are theorem names"):
        catalogue.theorems()
