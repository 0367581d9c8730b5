"""SKILL.md: its YAML front matter (name, description and the few other keys the Agent Skills
format allows) and its body, parsed and checked, and the description rewritten in place. Never
accepts a front matter that an agent would read differently from how it is checked here."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from optimizer.errors import BadInput

SKILL_FILE = "SKILL.md"
ALLOWED_KEYS = ("name", "description", "license", "allowed-tools", "metadata", "compatibility")
NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


class SkillDoc(BaseModel):
    """A parsed SKILL.md: the front matter as written, its two required fields, the body."""

    model_config = ConfigDict(frozen=True)
    front_matter: dict[str, Any]
    name: str
    description: str
    body: str


def _split_front_matter(text: str, path: Path | str) -> tuple[str, str, int]:
    """(front matter text, body, line number of the first front matter line) or BadInput."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise BadInput(
            f"{path}: no YAML front matter; start the file with a '---' line, then "
            "'name:' and 'description:', then a closing '---' line."
        )
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :]), 2
    raise BadInput(
        f"{path}: the front matter is never closed; add a '---' line after its last field."
    )


def parse_skill_md(text: str, path: Path | str = SKILL_FILE) -> SkillDoc:
    """Parse SKILL.md; BadInput only when it cannot be read at all (see `check_skill_md` for rules)."""
    raw, body, first_line = _split_front_matter(text, path)
    try:
        front = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + first_line}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadInput(
            f"{path}: the front matter is not valid YAML ({problem}{where}); fix the syntax "
            "there, and quote a value that contains ': '."
        ) from None
    if not isinstance(front, dict):
        raise BadInput(
            f"{path}: the front matter must be a YAML mapping of fields (got {type(front).__name__}); "
            "write 'name: ...' and 'description: ...' lines."
        )
    name, description = front.get("name"), front.get("description")
    return SkillDoc(
        front_matter=front,
        name=name if isinstance(name, str) else "",
        description=description if isinstance(description, str) else "",
        body=body,
    )


def front_matter_problems(doc: SkillDoc, path: Path | str = SKILL_FILE) -> list[str]:
    """Every rule of the front matter and body that `doc` breaks, one sentence each."""
    problems = _unknown_key_problems(doc, path)
    problems += _name_problems(doc.front_matter.get("name"), path)
    problems += _description_problems(doc.front_matter.get("description"), path)
    problems += _optional_field_problems(doc, path)
    if not doc.body.strip():
        problems.append(
            f"{path}: there are no instructions after the front matter; write the skill's body "
            "below the closing '---'."
        )
    return problems


def _unknown_key_problems(doc: SkillDoc, path: Path | str) -> list[str]:
    """One sentence per front matter key the format does not allow, with the closest allowed
    key when there is one (a typo is the usual cause)."""
    problems: list[str] = []
    unknown = [k for k in doc.front_matter if k not in ALLOWED_KEYS]
    for key in unknown:
        close = difflib.get_close_matches(str(key), ALLOWED_KEYS, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        problems.append(
            f"{path}: front matter field '{key}' is not allowed; {hint}use only "
            f"{', '.join(ALLOWED_KEYS)} (put anything else under 'metadata')."
        )
    return problems


def _name_problems(name: object, path: Path | str) -> list[str]:
    """What is wrong with the 'name' value as written: missing, not text, too long, or not
    kebab-case (with a kebab-case suggestion made from it)."""
    problems: list[str] = []
    if name is None or name == "":
        problems.append(
            f"{path}: front matter field 'name' is missing; add 'name: my-skill' (kebab-case)."
        )
    elif not isinstance(name, str):
        problems.append(
            f"{path}: front matter field 'name' must be text (got {name!r}); write it in kebab-case."
        )
    else:
        if len(name) > NAME_MAX:
            problems.append(
                f"{path}: front matter field 'name' has {len(name)} characters; shorten it to "
                f"at most {NAME_MAX}."
            )
        if not NAME_RE.fullmatch(name):
            suggestion = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", name.lower())).strip("-")
            problems.append(
                f"{path}: front matter field 'name' is '{name}', which is not kebab-case; use "
                f"lowercase letters, digits and single hyphens, e.g. '{suggestion or 'my-skill'}'."
            )
    return problems


def _description_problems(description: object, path: Path | str) -> list[str]:
    """What is wrong with the 'description' value as written: missing or blank, not text, too
    long, or holding an angle bracket."""
    problems: list[str] = []
    if description is None or (isinstance(description, str) and not description.strip()):
        problems.append(
            f"{path}: front matter field 'description' is missing or empty; say what the skill "
            "does and when to use it."
        )
    elif not isinstance(description, str):
        problems.append(
            f"{path}: front matter field 'description' must be text (got {type(description).__name__}); "
            "quote it."
        )
    else:
        if len(description) > DESCRIPTION_MAX:
            problems.append(
                f"{path}: front matter field 'description' has {len(description)} characters; "
                f"shorten it to at most {DESCRIPTION_MAX}."
            )
        if "<" in description or ">" in description:
            problems.append(
                f"{path}: front matter field 'description' contains an angle bracket ('<' or '>'); "
                "remove it, since descriptions are placed inside XML tags."
            )
    return problems


def _optional_field_problems(doc: SkillDoc, path: Path | str) -> list[str]:
    """What is wrong with the optional fields that are present (compatibility, license,
    metadata, allowed-tools); an absent one is never a problem."""
    fm = doc.front_matter
    problems: list[str] = []
    if "compatibility" in fm:
        compat = fm["compatibility"]
        if not isinstance(compat, str) or not compat.strip():
            problems.append(
                f"{path}: front matter field 'compatibility' must be non-empty text; describe the "
                "environment the skill needs or remove the field."
            )
        elif len(compat) > COMPATIBILITY_MAX:
            problems.append(
                f"{path}: front matter field 'compatibility' has {len(compat)} characters; shorten "
                f"it to at most {COMPATIBILITY_MAX}."
            )
    if "license" in fm and not isinstance(fm["license"], str):
        problems.append(
            f"{path}: front matter field 'license' must be text; write e.g. 'license: MIT'."
        )
    if "metadata" in fm and not isinstance(fm["metadata"], dict):
        problems.append(
            f"{path}: front matter field 'metadata' must be a mapping of keys to values; indent "
            "its entries under 'metadata:'."
        )
    if "allowed-tools" in fm:
        tools = fm["allowed-tools"]
        ok = isinstance(tools, str) or (
            isinstance(tools, list) and all(isinstance(t, str) for t in tools)
        )
        if not ok:
            problems.append(
                f"{path}: front matter field 'allowed-tools' must be a space-separated string or "
                "a list of tool names; write e.g. 'allowed-tools: Read Bash'."
            )
    return problems


def check_skill_md(text: str, path: Path | str = SKILL_FILE) -> list[str]:
    """All problems of one SKILL.md text (a proposal can be checked before it becomes a folder)."""
    try:
        doc = parse_skill_md(text, path)
    except BadInput as exc:
        return list(exc.problems)
    return front_matter_problems(doc, path)


def set_description(text: str, new: str) -> str:
    """SKILL.md text with the front matter's description replaced by `new`, the rest untouched."""
    text = text.replace("\r\n", "\n")
    _split_front_matter(text, SKILL_FILE)
    lines = text.lstrip("\ufeff").split("\n")
    close = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    # yaml renders the scalar (quoting, escapes); an endless width keeps it on one line.
    rendered = yaml.safe_dump({"description": new}, allow_unicode=True, width=float("inf"))
    rendered = rendered.rstrip("\n")
    start = next((i for i in range(1, close) if re.match(r"description\s*:", lines[i])), None)
    if start is None:
        name_at = next((i for i in range(1, close) if re.match(r"name\s*:", lines[i])), close - 1)
        lines[name_at + 1 : name_at + 1] = rendered.split("\n")
    else:
        end = start + 1
        # A folded or multi-line value continues on indented lines (and blank lines between them).
        while end < close and (lines[end][:1] in (" ", "\t") or not lines[end].strip()):
            end += 1
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        lines[start:end] = rendered.split("\n")
    result = "\n".join(lines)
    if parse_skill_md(result).description != new:
        raise ValueError("set_description: the rewritten front matter does not read back")
    return result


# ---------------------------------------------------------------------------
# Folder contents: walk, hash, snapshot, diff
# ---------------------------------------------------------------------------
