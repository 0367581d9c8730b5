"""The simulated agent reads the task's input files before it writes, as a real one does: one turn
of file views (the text editor's `view`, or Claude Code's Read), whose results come back in the
conversation. What it can then carry into the answer (the inputs' values, a CSV's row and column
counts) is in the inputs, never in the expectations: a value the inputs do not hold stays out of
reach. A view runs no command: reading costs a model turn, not a sandbox."""

from __future__ import annotations

import csv
import io
import re

from optimizer.sim.text import block_text, tool_uses

MAX_FILES = 3  # input files read; a task with more is read in part, as a hurried agent does
_NUMBERED = re.compile(r"^\s*\d+(?:\t|→)", re.M)  # the line numbers a view puts before each line
_LISTED = re.compile(
    r"input files (?:are there|are in your working directory, at these relative paths):\s*"
    r"(?P<paths>[^\n]+?)\.(?:\s|$)"
)
_VALUE = re.compile(r"(?<![\w.#/-])\d+(?:\.\d+)?%?(?![\w.])")  # a cell at a time
MAX_VALUES = 12  # of the inputs' figures an answer lists


def listed(text: str) -> list[str]:
    """The input files the agent's prompt names (ours or the Claude Code CLI's)."""
    m = _LISTED.search(text)
    if m is None or m.group("paths").strip() == "none":
        return []
    return [p.strip() for p in m.group("paths").split(",") if p.strip()]


def is_read(block: dict) -> bool:
    """A file view (ours or Claude Code's Read): reading, not acting."""
    name = str(block.get("name", ""))
    return name == "Read" or (block.get("input") or {}).get("command") == "view"


def read_calls(tool_names: list[str], paths: list[str], cwd: str) -> list[tuple[str, dict]]:
    """(tool name, input) of the views that read the inputs, or none when no tool can."""
    shown = [p if p.startswith("/") else f"{cwd.rstrip('/')}/{p}" for p in paths[:MAX_FILES]]
    if "str_replace_based_edit_tool" in tool_names:
        return [("str_replace_based_edit_tool", {"command": "view", "path": p}) for p in shown]
    if "Read" in tool_names:
        return [("Read", {"file_path": p}) for p in shown]
    return []


SKILL_ROOT = "/skill/"  # where our executor shows the skill's own files, read only


def _viewed(block: dict) -> str:
    args = block.get("input") or {}
    return str(args.get("path") or args.get("file_path") or "")


def already_read(body: dict) -> bool:
    return any(is_read(b) and not _viewed(b).startswith(SKILL_ROOT) for _, b in tool_uses(body))


def results(body: dict) -> dict[str, str]:
    """What each view returned, by the path it viewed, without the view's line numbers."""
    viewed = {str(b.get("id")): _viewed(b) for _, b in tool_uses(body) if is_read(b)}
    found: dict[str, str] = {}
    for message in body["messages"]:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            path = viewed.get(str(block.get("tool_use_id"))) if isinstance(block, dict) else None
            if path:
                found[path] = _NUMBERED.sub("", block_text(block.get("content") or ""))
    return found


def text_read(body: dict) -> str:
    """What the views of the inputs returned: the user-side text after them, without their line
    numbers (the skill's own files, read later, are the skill's, not the inputs')."""
    at = next((i for i, b in tool_uses(body) if is_read(b)), None)
    if at is None:
        return ""
    text = _NUMBERED.sub(
        "",
        "\n".join(
            block_text(m.get("content"))
            for m in body["messages"][at + 1 :]
            if m.get("role") == "user"
        ),
    )
    for path, shown in results(body).items():
        if path.startswith(SKILL_ROOT):
            text = text.replace(shown, "")
    return text


def values(inputs: str) -> list[str]:
    """The figures the inputs hold, in order, at most MAX_VALUES, and a CSV's row count."""
    found = list(dict.fromkeys(_VALUE.findall(inputs)))[:MAX_VALUES]
    rows = _csv_rows(inputs)
    return found + ([str(rows)] if rows is not None and str(rows) not in found else [])


def _csv_rows(inputs: str) -> int | None:
    lines = [ln for ln in inputs.splitlines() if ln.strip()]
    if len(lines) < 2 or "," not in lines[0]:
        return None
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    width = len(table[0])
    data = [r for r in table[1:] if len(r) == width]
    return len(data) if width > 1 and data else None


def label_value(label: str, inputs: str) -> str:
    """What the agent writes after a label it was asked for: a count it can read off the inputs
    (rows, columns), else where the value comes from."""
    rows = _csv_rows(inputs)
    lowered = label.lower()
    if rows is not None and "row" in lowered:
        return str(rows)
    if rows is not None and "column" in lowered:
        return str(len(next(csv.reader(io.StringIO(inputs.lstrip())))))
    return "taken from the inputs"
