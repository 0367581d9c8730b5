"""The tagged-section format of every model request (`<task>…</task>`, `<file path="…">…</file>`),
written by the roles and read back by the simulator. Never build a request section by string
concatenation elsewhere.

Two kinds of section. `tag` holds our own text (the task, the expectations). `data` holds text we
did not write and must not obey: output files, transcripts, skill files a model proposed, a
model's own words. Its closing tag carries a boundary drawn from the content's hash, so no content
can close the section early and write sections of its own after it (to forge a grading, say),
while the content itself reaches the model byte for byte. The boundary is a pure function of the
content: the same run asks the same question, and a resumed run hits its ledger."""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Mapping, Sequence


def tag(name: str, content: str, /, **attrs: object) -> str:
    """One tagged section: `<name a="1">content</name>`. Attribute values are escaped; the content
    is not, so models and the simulator read files verbatim."""
    attr_text = "".join(f' {k}="{html.escape(str(v), quote=True)}"' for k, v in attrs.items())
    return f"<{name}{attr_text}>\n{content}\n</{name}>"


def data(name: str, content: str, /, **attrs: object) -> str:
    """An untrusted section: `<name a="1" boundary="B">content</name boundary="B">`. Finding the
    closing line needs B, and B depends on the whole content, so the content cannot contain it
    (that would be a fixed point of SHA-256)."""
    digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:BOUNDARY_LEN]
    attr_text = "".join(f' {k}="{html.escape(str(v), quote=True)}"' for k, v in attrs.items())
    return f'<{name}{attr_text} boundary="{digest}">\n{content}\n</{name} boundary="{digest}">'


def tags(name: str, items: Sequence[tuple[Mapping[str, object], str]]) -> str:
    return "\n".join(tag(name, content, **attrs) for attrs, content in items)


BOUNDARY_LEN = 24  # hex digits: 96 bits
_ATTR = re.compile(r'([a-zA-Z_][\w-]*)="([^"]*)"')
# A data section, found left to right: the first opening whose own closing line follows wins, so
# whatever sits inside it (a forged section, a fake boundary) is content, never structure.
_DATA = re.compile(
    rf'<([\w-]+)((?:\s+[\w-]+="[^"]*")*?)\s+boundary="([0-9a-f]{{{BOUNDARY_LEN}}})">\n'
    r'(.*?)\n</\1 boundary="\3">',
    re.S,
)


def parse_tags(text: str, name: str) -> list[tuple[dict[str, str], str]]:
    """Every `<name ...>content</name>` section in text, in order (not nested in itself), data
    sections included. Text inside a data section is never read as a section of ours."""
    found: list[tuple[int, dict[str, str], str]] = []
    pieces, done = [], 0
    for m in _DATA.finditer(text):
        if m.group(1) == name:
            found.append((m.start(), _attrs(m.group(2)), m.group(4)))
        # Blanked at equal length, so positions in `masked` are positions in `text`.
        pieces += [text[done : m.start()], " " * (m.end() - m.start())]
        done = m.end()
    masked = "".join([*pieces, text[done:]])
    pattern = re.compile(rf"<{name}((?:\s+[\w-]+=\"[^\"]*\")*)\s*>\n?(.*?)\n?</{name}>", re.S)
    for m in pattern.finditer(masked):
        found.append((m.start(), _attrs(m.group(1)), text[m.start(2) : m.end(2)]))
    return [(attrs, content) for _, attrs, content in sorted(found, key=lambda f: f[0])]


def _attrs(text: str) -> dict[str, str]:
    return {k: html.unescape(v) for k, v in _ATTR.findall(text) if k != "boundary"}


def section(text: str, name: str) -> str | None:
    """The content of the first `<name>` section, or None."""
    found = parse_tags(text, name)
    return found[0][1] if found else None
