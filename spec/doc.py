"""Generated documentation: the op table as Markdown (docs/OPS.md, written with the other
generated docs by `python -m proofs readme`; `python -m spec.doc` prints it).

Invariant: docs/OPS.md is exactly `op_table_markdown()` (a test checks it), so the docs
cannot drift from the table.
"""

from __future__ import annotations

from .ops import OPS

__all__ = ["op_table_markdown"]


def op_table_markdown() -> str:
    lines = [
        "# The op table",
        "",
        "Generated from `spec.ops.OPS` by `python -m proofs readme`; do not edit.",
        "Composite ops are defined by a body of other ops; that composition is normative.",
        "Each op is defined in `spec/ops/<family>.py`; rows are in family order.",
        "",
        "| op | family | kind | arity | attributes | saves for backward | "
        "definition and conventions |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, op in OPS.items():
        attrs = (
            ", ".join(
                f"{a.name}: {a.kind}" + ("" if a.required else " (optional)") for a in op.attrs
            )
            or "—"
        )
        arity = "n ≥ 1" if op.arity is None else str(op.arity)
        doc = op.doc.replace("|", "\\|")
        lines.append(
            f"| `{name}` | {op.family} | {op.kind} | {arity} | {attrs} | {op.saves} | {doc} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(op_table_markdown(), end="")
