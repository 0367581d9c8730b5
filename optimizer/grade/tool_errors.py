"""What the tools of a run printed that reads as an error, for the no_errors check: their results
in transcript.jsonl (else the whole transcript.md), searched line by line for ERROR_PATTERNS,
plus results flagged is_error; what file-reading tools returned is skipped, since a file that
mentions an error is not an error of the run."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from optimizer.grade.outputs import line_of, quote
from optimizer.schemas import JsonObject

# Each is (name, regex over one line of tool output). Chosen so an ordinary successful run passes:
# "Error:" only at a line start (not "no Error: found"), tracebacks by their header line.
ERROR_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("python traceback", re.compile(r"Traceback \(most recent call last\)")),
    ("error line", re.compile(r"^\s*(?:\w+)?Error:", re.M)),
    ("command not found", re.compile(r"command not found")),
    ("permission denied", re.compile(r"Permission denied")),
    ("missing file", re.compile(r"No such file or directory")),
)
_READ_TOOLS = frozenset({"read", "view", "cat", "glob", "grep", "ls", "skill"})


def _tool_outputs(trial_dir: Path) -> Iterator[tuple[str, str, bool]]:
    """(where, text, is_error) of what tools printed, from transcript.jsonl; else the whole
    transcript.md as one text."""
    jsonl = Path(trial_dir) / "transcript.jsonl"
    if jsonl.is_file():
        names: dict[str, str] = {}
        for number, raw in enumerate(
            jsonl.read_text(encoding="utf-8", errors="replace").splitlines(), 1
        ):
            try:
                entry = json.loads(raw)
            except json.JSONDecodeError:
                continue
            for block in _blocks(entry):
                if block.get("type") == "tool_use":
                    args = block.get("input")
                    if not isinstance(args, dict):
                        args = {}
                    # the text editor tool reads files with its `view` command
                    name = "view" if args.get("command") == "view" else block.get("name", "")
                    names[str(block.get("id"))] = str(name).lower()
                elif block.get("type") == "tool_result":
                    tool = names.get(str(block.get("tool_use_id")), "")
                    text = "" if tool in _READ_TOOLS else _flatten(block.get("content"))
                    yield f"transcript.jsonl line {number}", text, block.get("is_error") is True
        return
    md = Path(trial_dir) / "transcript.md"
    if md.is_file():
        yield "transcript.md", md.read_text(encoding="utf-8", errors="replace"), False


def _blocks(node: object) -> Iterator[JsonObject]:
    """Every content block in a transcript line, whatever the executor's envelope."""
    if isinstance(node, dict):
        if node.get("type") in ("tool_use", "tool_result"):
            yield node
        for value in node.values():
            if isinstance(value, dict | list):
                yield from _blocks(value)
    elif isinstance(node, list):
        for item in node:
            yield from _blocks(item)


def _flatten(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_flatten(c) for c in content)
    if isinstance(content, dict):
        return str(content.get("text", "")) if content.get("type", "text") == "text" else ""
    return ""


def transcript_errors(trial_dir: Path) -> list[str]:
    """Each error found, as "<pattern> at <where>: <line>"; empty when the run is clean."""
    problems = []
    for where, text, is_error in _tool_outputs(trial_dir):
        if is_error:
            problems.append(f"tool result flagged is_error at {where}: {quote(text)}")
            continue
        for name, regex in ERROR_PATTERNS:
            m = regex.search(text)
            if m:
                line = text[text.rfind("\n", 0, m.start()) + 1 :].split("\n", 1)[0]
                at = (
                    where
                    if where != "transcript.md"
                    else f"transcript.md line {line_of(text, m.start())}"
                )
                problems.append(f"{name} at {at}: {quote(line)}")
    return problems
