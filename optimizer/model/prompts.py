"""Prompt templates (prompts/*.md), one per model role, with placeholders checked on load and on
every render. Never a template found missing at 3 a.m.: `run` loads them all before it starts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from optimizer.errors import WorkFailed

_PACKAGE = Path(__file__).resolve().parents[1]  # optimizer/
# A source checkout (and an editable install of one) reads the repository's prompts/ in place; an
# installed wheel holds the same files as package data, optimizer/prompts (see pyproject.toml).
PROMPTS_DIR = (
    _PACKAGE.parent / "prompts"
    if (_PACKAGE.parent / "pyproject.toml").is_file()
    else _PACKAGE / "prompts"
)
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
        raise WorkFailed(
            f"{path}: the prompt template is missing, so this installation of "
            "skill-optimizer is incomplete; reinstall the package (from a source "
            "checkout: pip install --force-reinstall .)."
        )
    text = path.read_text(encoding="utf-8")
    return Template(name, text, frozenset(_PLACEHOLDER.findall(text)))


def check_installed() -> None:
    """Load every role's template: a broken install stops a run before it starts any work."""
    from optimizer.config import ROLES

    for role in ROLES:
        load_prompt(role)
