"""Reading a generated HTML page back in tests: a strict parse (every element closed in
order), its ids, rows, <pre> texts and table cells; the self-containment check."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from spec.report_page import links_of

__all__ = ["Page", "assert_self_contained", "parse", "plain"]


class Page(HTMLParser):
    """Checks that every non-void element is closed in order; collects ids, row ids, the
    text of each <pre> and the cells of each table."""

    VOID = frozenset({"meta", "img", "br", "hr", "link", "input"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.ids: list[str] = []
        self.row_ids: list[str] = []
        self.pres: list[str] = []
        self.tables: list[list[list[str]]] = []
        self.tags: set[str] = set()
        self._text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
            if tag == "tr":
                self.row_ids.append(str(a["id"]))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        if tag in ("pre", "td", "th"):
            self._text = []
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()
        if tag in ("td", "th") and self._text is not None:
            self.tables[-1][-1].append("".join(self._text).strip())
            self._text = None
        elif tag == "pre" and self._text is not None:
            self.pres.append("".join(self._text))
            self._text = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)


def parse(page: str) -> Page:
    p = Page()
    p.feed(page)
    p.close()
    assert p.stack == [], f"unclosed elements {p.stack}"
    return p


def assert_self_contained(page: str, out: Path, ids: list[str]) -> None:
    assert "<script" not in page.lower()
    for link in links_of(page):
        if link.startswith("#"):
            assert link[1:] in ids, link
        elif link.startswith("data:image/png;base64,"):
            continue
        else:
            assert "://" not in link and not link.startswith("/"), link
            assert (out / link).is_file(), f"{link} is not a file the writer put in {out}"


def plain(cell: str) -> str:
    """A Markdown cell's text as a reader sees it: code and bold marks dropped."""
    return re.sub(r"\*\*(.+?)\*\*", r"\1", cell.replace("`", ""))
