"""Static, self-contained HTML reports of the project's runs and references.

Invariants:
- Pages are written by `suite_page` (a `python -m conformance` run), `engine_page` (an
  engine judged by `--engine`) and `compare` (two JSON reports side by side); `plots`
  draws the optional matplotlib plots; `__main__` re-renders a saved JSON report. The
  shared pieces are `spec.report_page`, which also writes the pages of the commands whose
  report is Markdown (the zoo, the verification CLI, `python -m benchmarks`).
- Every page is rendered from the JSON report (or the Markdown text) its command writes,
  by the code that renders the docs' tables, so a page and a docs table never disagree.
- No page runs a script or fetches anything: inline CSS, plots as `data:` URIs, links only
  to anchors and to files written beside the page.
"""

from spec.report_page import links_of, markdown_html, markdown_tables

from .suite_page import suite_html, write_suite_html

__all__ = ["links_of", "markdown_html", "markdown_tables", "suite_html", "write_suite_html"]
