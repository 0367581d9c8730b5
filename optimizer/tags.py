"""The tagged-section format of every model request (`<task>…</task>`, `<file path="…">…</file>`),
written by the roles and read back by the simulator. Never build a request section by string
concatenation elsewhere."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence


def tag(name: str, content: str, /, **attrs: object) -> str:
    """One tagged section: `<name a="1">content</name>`. Attribute values are escaped; the content
    is not, so models and the simulator read files verbatim."""
    attr_text = "".join(f' {k}="{html.escape(str(v), quote=True)}"' for k, v in attrs.items())
    return f"<{name}{attr_text}>\n{content}\n</{name}>"


def tags(name: str, items: Sequence[tuple[Mapping[str, object], str]]) -> str:
    return "\n".join(tag(name, content, **attrs) for attrs, content in items)


_ATTR = re.compile(r'([a-zA-Z_][\w-]*)="([^"]*)"')


def parse_tags(text: str, name: str) -> list[tuple[dict[str, str], str]]:
    """Every `<name ...>content</name>` section in text, in order (not nested in itself)."""
    pattern = re.compile(rf"<{name}((?:\s+[\w-]+=\"[^\"]*\")*)\s*>\n?(.*?)\n?</{name}>", re.S)
    found = []
    for m in pattern.finditer(text):
        attrs = {k: html.unescape(v) for k, v in _ATTR.findall(m.group(1))}
        found.append((attrs, m.group(2)))
    return found


def section(text: str, name: str) -> str | None:
    """The content of the first `<name>` section, or None."""
    found = parse_tags(text, name)
    return found[0][1] if found else None
