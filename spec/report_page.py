"""The pieces of a static HTML report page: escaping, tables, summaries, a Markdown subset
rendered to HTML, and writing the page into its directory. It lives in the lowest layer
(with `spec.doc`) so that every layer's command can write its report as a page
(`markdown_page`: the verification CLI, the zoo, the benchmarks); the conformance pages
are `conformance.html`.

Invariants:
- A page is one self-contained file: inline CSS, no script, no external style sheet, font
  or image; the only links it holds are in-page anchors (`#...`) and relative paths of
  files its writer put beside it (`links_of` lists them, a test checks them).
- Every text that comes from a report is escaped (`esc`); only `Raw` values (built here
  from escaped parts) are inserted as they are.
- Output is a function of the inputs only: no clock, no random names, dictionaries in
  their given order, so the same report renders to the same bytes.
- `markdown_html` renders the subset of Markdown the project's generated docs use
  (headings, paragraphs, `-` lists, fenced code, pipe tables, `code`, **bold**, links
  to in-page anchors); a pipe table becomes an HTML table with exactly the Markdown
  cells (`markdown_tables` reads them back), so a docs table and its HTML never disagree.
"""

from __future__ import annotations

import html
import os
import platform
import re
from collections.abc import Iterable, Sequence
from html.parser import HTMLParser
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from .version import __version__ as SPEC_VERSION

__all__ = [
    "Raw",
    "anchor_id",
    "cell_html",
    "code_block",
    "document",
    "environment",
    "esc",
    "inline_html",
    "links_of",
    "machine",
    "markdown_html",
    "markdown_page",
    "markdown_tables",
    "package_version",
    "page_dir_problem",
    "summary_list",
    "table",
    "this_environment",
    "write_bundle",
    "write_page",
]

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:72em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:2px 6px;
text-align:left;vertical-align:top}th{background:#f0f0f0}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
code{background:#f3f3f3}.pass{color:#176f2c;font-weight:bold}.fail{color:#b00020;
font-weight:bold}.warn{color:#8a5a00}dl.summary{display:grid;grid-template-columns:max-content
auto;gap:2px 1em}dl.summary dt{font-weight:bold}dl.summary dd{margin:0}
img.plot{display:block}.note{color:#555;font-style:italic}
""".strip()


class Raw(str):
    """HTML built from escaped parts: inserted as it is."""


def esc(v: Any) -> str:
    """`v` as escaped text (`Raw` values pass through)."""
    return v if isinstance(v, Raw) else html.escape(str(v), quote=True)


def anchor_id(*parts: str) -> str:
    """A stable fragment id: the parts joined by `-`, characters outside [A-Za-z0-9._-]
    replaced by `_` (ids of different names may only collide if the names differ there)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", "-".join(parts))


def cell_html(v: Any) -> str:
    return esc(v)


def table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "", row_ids: Any = None
) -> Raw:
    """An HTML table; `row_ids`, if given, is a sequence of ids (or None) for the rows."""
    attr = f' class="{esc(cls)}"' if cls else ""
    out = [f"<table{attr}>", "<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers)]
    out.append("</tr></thead><tbody>")
    for k, r in enumerate(rows):
        rid = row_ids[k] if row_ids is not None else None
        tr = f'<tr id="{esc(rid)}">' if rid else "<tr>"
        out.append(tr + "".join(f"<td>{cell_html(c)}</td>" for c in r) + "</tr>")
    out.append("</tbody></table>")
    return Raw("\n".join(out))


def code_block(text: str) -> Raw:
    return Raw(f"<pre>{esc(text)}</pre>")


def summary_list(items: Iterable[tuple[str, Any]]) -> Raw:
    """A definition list of (label, value) pairs."""
    body = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items)
    return Raw(f'<dl class="summary">{body}</dl>')


def document(title: str, parts: Iterable[str]) -> str:
    """The whole page: head with inline CSS, the title, the parts in order."""
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{esc(title)}</title>\n<style>\n{CSS}\n</style>\n</head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n{body}\n</body>\n</html>\n"
    )


def write_page(out_dir: str | os.PathLike[str], name: str, text: str) -> str:
    """Write `text` as `out_dir/name` (the directory is created); its path."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def page_dir_problem(path: str) -> str:
    """Why `--html PATH` cannot be written ('' when it can): PATH is a directory, or can be
    created in an existing, writable parent."""
    if os.path.exists(path) and not os.path.isdir(path):
        return f"--html {path!r} is not a directory"
    d = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        return f"--html {path!r}: the directory {d!r} does not exist"
    if not os.access(d, os.W_OK | os.X_OK):
        return f"--html {path!r}: the directory {d!r} is not writable"
    return ""


def write_bundle(out_dir: str, page: str, files: dict[str, str]) -> str:
    """Write `files` (relative path -> text) and the page as `out_dir/index.html`; its path."""
    for rel, text in files.items():
        write_page(os.path.join(out_dir, os.path.dirname(rel)), os.path.basename(rel), text)
    return write_page(out_dir, "index.html", page)


def markdown_page(
    out_dir: str,
    title: str,
    md: str,
    meta: dict[str, Any] | None = None,
    images: dict[str, bytes] | None = None,
) -> str:
    """Write a report that its command renders as Markdown as `out_dir/index.html`: the
    summary (the run's `meta`, its versions and machine), the Markdown body, then each of
    `images` (file name -> PNG bytes) written beside the page and shown; the page's path."""
    m = dict(meta or {})
    cmd = m.pop("command", None)
    items = [(k, v) for k, v in m.items() if k not in _ENV_KEYS]
    items += environment({**this_environment(), **m})
    parts: list[str] = ['<h2 id="summary">Summary</h2>', summary_list(items)]
    if cmd:
        parts += ["<p>Reproduce this run:</p>", code_block(cmd)]
    parts += ['<h2 id="report">Report</h2>', markdown_html(md)]
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    for name, data in (images or {}).items():
        (d / name).write_bytes(data)
        parts.append(f'<p><img alt="{esc(name)}" src="{esc(name)}"></p>')
    return write_page(out_dir, "index.html", document(title, parts))


_ENV_KEYS = ("spec_version", "torchlean", "python", "numpy", "machine")


def package_version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def machine() -> str:
    """The machine a run records: OS, architecture, CPU count (no host name)."""
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"


def this_environment() -> dict[str, str]:
    """This process's versions and machine, under the keys a report's meta uses."""
    return {
        "spec_version": SPEC_VERSION,
        "torchlean": package_version("torchlean"),
        "python": platform.python_version(),
        "numpy": package_version("numpy"),
        "machine": machine(),
    }


def environment(meta: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """The versions and the machine of a run as (label, value) rows: this process's without
    `meta`; with it, what the report recorded (`spec_version`, `torchlean`, `python`,
    `numpy`, `machine`; "not recorded" where absent), never the renderer's."""
    src = this_environment() if meta is None else meta
    labels = {"spec_version": "spec version (semantics)"}
    return [(labels.get(k, k), str(src.get(k) or "not recorded")) for k in this_environment()]


# ---- Markdown subset -------------------------------------------------------------------


def inline_html(text: str) -> str:
    """One line of the Markdown subset: `code`, **bold**, and [text](#anchor) links to
    anchors of the same page."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for p in parts:
        if len(p) >= 2 and p.startswith("`") and p.endswith("`"):
            out.append(f"<code>{esc(p[1:-1])}</code>")
        else:
            t = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", esc(p))
            out.append(re.sub(r"\[([^\]]+)\]\((#[^)\s\"]+)\)", r'<a href="\2">\1</a>', t))
    return "".join(out)


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def _is_rule(line: str) -> bool:
    return bool(re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*(:?-+:?\s*)?\|?", line.strip()))


def markdown_tables(md: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every pipe table of `md`: (header cells, body rows of cells), in order."""
    lines = md.splitlines()
    out: list[tuple[list[str], list[list[str]]]] = []
    k = 0
    while k < len(lines):
        if lines[k].lstrip().startswith("|") and k + 1 < len(lines) and _is_rule(lines[k + 1]):
            head, rows = _cells(lines[k]), []
            k += 2
            while k < len(lines) and lines[k].lstrip().startswith("|"):
                rows.append(_cells(lines[k]))
                k += 1
            out.append((head, rows))
        else:
            k += 1
    return out


def _md_table(lines: list[str]) -> str:
    head, rows = _cells(lines[0]), [_cells(x) for x in lines[2:]]
    th = "".join(f"<th>{inline_html(h)}</th>" for h in head)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{inline_html(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table>\n<thead><tr>{th}</tr></thead><tbody>\n{body}\n</tbody></table>"


def _block(lines: list[str], k: int, out: list[str]) -> int:
    """Render the block starting at line k; the index after it."""
    line = lines[k]
    if line.startswith("```"):
        j = k + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        out.append(f"<pre>{esc(chr(10).join(lines[k + 1 : j]))}</pre>")
        return j + 1
    m = re.match(r"(#{1,6})\s+(.*)", line)
    if m:
        n = min(len(m.group(1)) + 1, 6)
        hid = anchor_id(m.group(2).strip().lower())
        out.append(f'<h{n} id="{esc(hid)}">{inline_html(m.group(2))}</h{n}>')
        return k + 1
    if line.lstrip().startswith("|") and k + 1 < len(lines) and _is_rule(lines[k + 1]):
        j = k + 2
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            j += 1
        out.append(_md_table(lines[k:j]))
        return j
    if re.match(r"\s*[-*] ", line):
        items, j = [], k
        while j < len(lines) and (re.match(r"\s*[-*] ", lines[j]) or lines[j].startswith("  ")):
            if re.match(r"\s*[-*] ", lines[j]):
                items.append(re.sub(r"^\s*[-*] ", "", lines[j]))
            else:
                items[-1] += " " + lines[j].strip()
            j += 1
        out.append("<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in items) + "</ul>")
        return j
    j = k
    para = []
    while j < len(lines) and lines[j].strip() and not _starts_block(lines, j):
        para.append(lines[j].strip())
        j += 1
    out.append(f"<p>{inline_html(' '.join(para))}</p>")
    return max(j, k + 1)


def _starts_block(lines: list[str], j: int) -> bool:
    line = lines[j]
    return bool(
        line.startswith("```")
        or re.match(r"#{1,6}\s", line)
        or re.match(r"\s*[-*] ", line)
        or (line.lstrip().startswith("|") and j + 1 < len(lines) and _is_rule(lines[j + 1]))
    )


def markdown_html(md: str) -> Raw:
    """The Markdown subset of the module docstring as HTML (headings one level down, so a
    document's `#` sits under the page's title)."""
    lines = md.splitlines()
    out: list[str] = []
    k = 0
    while k < len(lines):
        if not lines[k].strip() or lines[k].strip().startswith("<!--"):
            k += 1
            continue
        k = _block(lines, k, out)
    return Raw("\n".join(out))


# ---- reading a page back ---------------------------------------------------------------


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for k, v in attrs:
            if k in ("href", "src") and v is not None:
                self.links.append(v)


def links_of(page: str) -> list[str]:
    """Every href / src of the page, in order."""
    p = _Links()
    p.feed(page)
    return p.links
