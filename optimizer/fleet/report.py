"""`optimizer report FLEET`: each member's own HTML report (report/html.py), and report.html at the
fleet's root, the fleet's summary.md (fleet/views.py) as a page that links each member's report.
Reads the fleet; writes only the reports."""

from __future__ import annotations

import html
import re
from pathlib import Path

from optimizer.fleet import folder, views
from optimizer.report import html as member_html
from optimizer.store.files import write_text

STYLE = (
    "body{font:15px/1.5 system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3rem .6rem}"
    "code{background:#f4f4f4;padding:0 .2rem}"
)


def _inline(text: str) -> str:
    """Escaped text with **bold** and `code` as the summary writes them."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def page(markdown: str, links: dict[str, str]) -> str:
    """The summary's markdown (headings, lists, tables, paragraphs) as HTML; each member's name
    links to its report."""
    body: list[str] = []
    in_list = in_table = False
    for line in markdown.splitlines():
        if in_list and not line.startswith("- "):
            body.append("</ul>")
            in_list = False
        if in_table and not line.startswith("|"):
            body.append("</table>")
            in_table = False
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
        elif line.startswith("- "):
            if not in_list:
                body.append("<ul>")
                in_list = True
            item = _inline(line[2:])
            for name, href in links.items():
                bold = f"<strong>{html.escape(name)}</strong>"
                item = item.replace(bold, f'<a href="{html.escape(href)}">{bold}</a>', 1)
            body.append(f"<li>{item}</li>")
        elif line.startswith("|"):
            if not in_table:
                body.append("<table>")
                in_table = True
            cells = [c.strip() for c in line.strip("|").split("|")]
            if all(set(c) <= {"-"} for c in cells):
                continue
            body.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in cells) + "</tr>")
        elif line.strip():
            body.append(f"<p>{_inline(line)}</p>")
    body.append("</ul>" if in_list else "</table>" if in_table else "")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Fleet night</title>"
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )


def write(root: Path) -> Path:
    """Every member's report, then the fleet's page linking them; returns the page's path."""
    fleet = folder.read(root)
    links = {}
    for m, d in zip(
        sorted(fleet.members, key=lambda m: m.folder), folder.member_dirs(root, fleet), strict=True
    ):
        written = member_html.write_report(d, None)
        links[m.name] = str(written.relative_to(root))
    path = root / "report.html"
    write_text(path, page(views.summary_md(root), links))
    return path
