"""Explaining a bare assertion of the Session state machine: expected vs got.

Invariant: `explain(exc)` never raises. For an `AssertionError` without a message it finds
the innermost frame of the traceback in this package, parses the `assert` statement there
and, for a comparison `assert got == want` (or `is`, `<`, ...), re-evaluates both sides in
that frame's namespace (they are pure reads of the machine's state) and returns
"<source>: got <left>, expected <right>"; for other assertions the source line and the
frame's local names. Anything it cannot explain comes back as the original message.
"""

from __future__ import annotations

import ast
import linecache
from types import FrameType, TracebackType
from typing import Any

__all__ = ["explain"]

_PKG = __name__.rpartition(".")[0].replace(".", "/")


def _frame(tb: TracebackType | None) -> tuple[FrameType, int] | None:
    found = None
    while tb is not None:
        if _PKG in tb.tb_frame.f_code.co_filename.replace("\\", "/"):
            found = (tb.tb_frame, tb.tb_lineno)
        tb = tb.tb_next
    return found


def _assert_at(filename: str, lineno: int) -> ast.Assert | None:
    src = "".join(linecache.getlines(filename))
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.lineno <= lineno <= (node.end_lineno or 0):
            return node
    return None


def _short(v: Any, n: int = 300) -> str:
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def explain(exc: BaseException) -> str:
    base = f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, AssertionError):
        return base
    try:
        hit = _frame(exc.__traceback__)
        if hit is None:
            return base
        frame, lineno = hit
        node = _assert_at(frame.f_code.co_filename, lineno)
        if node is None:
            return base
        where = f"{frame.f_code.co_name} (line {node.lineno}): assert {ast.unparse(node.test)}"
        msg = f" [{exc}]" if str(exc) else ""
        t = node.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1:
            ns = dict(frame.f_globals)
            ns.update(frame.f_locals)
            left = eval(compile(ast.Expression(t.left), "<assert>", "eval"), ns)
            right = eval(compile(ast.Expression(t.comparators[0]), "<assert>", "eval"), ns)
            return f"{where}{msg}: got {_short(left)}, expected {_short(right)}"
        local = {k: _short(v, 80) for k, v in frame.f_locals.items() if k != "self"}
        return f"{where}{msg}; locals {local}"
    except Exception:  # explaining must never hide the failure itself
        return base
