"""Prompt templates (prompts/*.md) with checked placeholders, and the tagged-section format that
every role's request uses. Never build a prompt by string concatenation outside this module."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from optimizer.errors import WorkFailed

_PACKAGE = Path(__file__).resolve().parents[1]  # optimizer/
# A source checkout (and an editable install of one) reads the repository's prompts/ in place; an
# installed wheel holds the same files as package data, optimizer/prompts (see pyproject.toml).
PROMPTS_DIR = (_PACKAGE.parent / "prompts" if (_PACKAGE.parent / "pyproject.toml").is_file()
               else _PACKAGE / "prompts")
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Template:
    name: str
    text: str
    placeholders: frozenset[str]

    def render(self, **values: str) -> str:
        # A missing or unknown value is a programming error caught on the first call, not at 3 a.m.
        missing = self.placeholders - values.keys()
        unknown = values.keys() - self.placeholders
        if missing or unknown:
            raise ValueError(
                f"prompt {self.name}: missing {sorted(missing)}, unknown {sorted(unknown)}"
            )
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.text)


@cache
def load_prompt(name: str, directory: Path | None = None) -> Template:
    """Load prompts/<name>.md; its `{{placeholder}}` names are checked on every render."""
    path = (directory or PROMPTS_DIR) / f"{name}.md"
    if not path.is_file():
        # The templates ship with the package: a missing one is a broken install, not bad input.
        raise WorkFailed(f"{path}: the prompt template is missing, so this installation of "
                         "skill-optimizer is incomplete; reinstall the package (from a source "
                         "checkout: pip install --force-reinstall .).")
    text = path.read_text(encoding="utf-8")
    return Template(name, text, frozenset(_PLACEHOLDER.findall(text)))


def check_installed() -> None:
    """Load every role's template: a broken install stops a run before it starts any work."""
    from optimizer.config import ROLES

    for role in ROLES:
        load_prompt(role)


def tag(name: str, content: str, /, **attrs: object) -> str:
    """One tagged section: `<name a="1">content</name>`. Attribute values are escaped; the content
    is not, so models and the simulator read files verbatim."""
    attr_text = "".join(f' {k}="{html.escape(str(v), quote=True)}"' for k, v in attrs.items())
    return f"<{name}{attr_text}>\n{content}\n</{name}>"


def tags(name: str, items: list[tuple[dict[str, object], str]]) -> str:
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
