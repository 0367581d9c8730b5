"""Claude Code session files (~/.claude/projects/<project>/*.jsonl, docs/design.md §17) read for the times a
skill was used: the task, the files, what the user said after. Never write or send what it reads
(grow/draft.py masks it first)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from optimizer.errors import BadInput
from optimizer.inputs import redact
from optimizer.schemas import Json, JsonObject

WRITE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
# The CLI's own messages in the user's turn: not something the user typed.
_NOT_TYPED = ("<system-reminder>", "<local-command-", "Caveat:", "<command-message>", "<bash-")
_COMMAND = re.compile(r"<command-name>/?(?P<name>[^<]+)</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(?P<args>.*?)</command-args>", re.DOTALL)
_LOADED = re.compile(r"Base directory for this skill: (?P<dir>\S+)")
_SINCE = re.compile(r"^(?P<n>\d+)(?P<unit>[hdw])$")
# A later message that says the result was not right (the strongest signal of what to check).
_CORRECTION = re.compile(
    r"\b(no|not|wrong|instead|actually|don't|do not|didn't|did not|should|shouldn't|forgot|forget|"
    r"missing|fix|incorrect|rather|never|always|must|please use|use \w+ not)\b|\[Request interrupted",
    re.IGNORECASE,
)


def is_correction(message: str) -> bool:
    return _CORRECTION.search(message) is not None


@dataclass
class Use:
    """One time the skill was used in a session: the task that led to it and what followed."""

    file: Path
    session_id: str
    time: str
    cwd: str
    task: str
    later: list[str] = field(default_factory=list)  # the user's messages after the skill ran
    # The user's messages before the task since the previous use (or the session's start): the
    # request a follow-up typed before the skill ran ("keep it under 10 lines") belongs to.
    earlier: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    final: str = ""
    skill_dir: str = ""


def parse_since(value: str | None, now: datetime | None = None) -> datetime | None:
    """`30d`, `12h`, `2w` or an ISO date; None means no limit."""
    if not value:
        return None
    now = now or datetime.now(UTC)
    found = _SINCE.match(value.strip())
    if found:
        hours = {"h": 1, "d": 24, "w": 24 * 7}[found["unit"]] * int(found["n"])
        return now - timedelta(hours=hours)
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise BadInput(
            f"--since {value!r}: give an age such as 30d, 12h or 2w, or an ISO date "
            "such as 2026-11-01."
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def session_files(root: Path) -> list[Path]:
    """Every session file under root, sorted by path; subagents' transcripts are not sessions."""
    if not root.is_dir():
        raise BadInput(
            f"--from {root}: no such folder; Claude Code keeps sessions in "
            "~/.claude/projects, or pass the folder that holds the .jsonl files."
        )
    return sorted(p for p in root.rglob("*.jsonl") if p.is_file() and "subagents" not in p.parts)


def records(path: Path) -> Iterator[dict[str, Json]]:
    """The JSON objects of a session file; a line that is not one (a write cut short) is skipped."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict):
                yield item


def _blocks(record: JsonObject) -> list[JsonObject]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _typed_text(record: JsonObject) -> str:
    """What the user typed in this record, '' for tool results and the CLI's own messages."""
    texts = [b.get("text", "") for b in _blocks(record) if b.get("type") == "text"]
    text = "\n".join(t for t in texts if isinstance(t, str)).strip()
    args = _COMMAND_ARGS.search(text)
    if _COMMAND.search(text):
        return args["args"].strip() if args else ""
    return "" if text.startswith(_NOT_TYPED) else text


def _invoked(record: JsonObject, name: str) -> bool:
    """The Skill tool called with this skill, the skill loaded, or its slash command typed."""
    for block in _blocks(record):
        if block.get("type") == "tool_use" and block.get("name") == "Skill":
            params = block.get("input")  # another program's file: a damaged block is passed over
            called = params.get("skill") if isinstance(params, dict) else None
            if isinstance(called, str) and (called == name or called.endswith(f":{name}")):
                return True
        text = block.get("text") if block.get("type") == "text" else None
        if isinstance(text, str):
            loaded = _LOADED.search(text)
            if loaded and Path(loaded["dir"]).name == name:
                return True
            command = _COMMAND.search(text)
            if command and command["name"].strip().split(":")[-1] == name:
                return True
    return False


def _skill_dir(record: JsonObject) -> str:
    for block in _blocks(record):
        text = block.get("text")
        loaded = (
            _LOADED.search(text) if block.get("type") == "text" and isinstance(text, str) else None
        )
        if loaded:
            return loaded["dir"]
    return ""


def _tool_facts(record: JsonObject, use: Use) -> None:
    for block in _blocks(record):
        kind = block.get("type")
        if kind == "tool_use":
            params = block.get("input")
            params = params if isinstance(params, dict) else {}
            target = params.get("file_path") or params.get("notebook_path")
            if isinstance(target, str):
                (use.writes if block.get("name") in WRITE_TOOLS else use.reads).append(target)
        elif kind == "tool_result" and block.get("is_error"):
            content = block.get("content")
            if isinstance(content, list):
                # Blocks of one output, joined as written: a value split across two stays whole,
                # so the redaction sees it whole.
                content = "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
            # Masked before it is cut: a secret across the cut would leave a piece no rule knows.
            use.errors.append(redact.text(str(content or "a tool call failed"))[:300])
        elif kind == "text" and record.get("type") == "assistant" and block.get("text"):
            use.final = str(block["text"])


def uses(path: Path, name: str) -> list[Use]:
    """Each use of the skill `name` in one session file, in the file's order."""
    found: list[Use] = []
    last_task, session_id, time, cwd = "", "", "", ""
    typed_since: list[str] = []  # the user's messages since the current use began
    current: Use | None = None
    for record in records(path):
        if record.get("isSidechain"):
            continue  # a subagent's turns: its prompt is the agent's, not the user's
        session_id = session_id or str(record.get("sessionId") or "")
        time = time or str(record.get("timestamp") or "")
        cwd = cwd or str(record.get("cwd") or "")
        kind = record.get("type")
        if kind not in ("user", "assistant"):
            continue
        typed = _typed_text(record) if kind == "user" and not record.get("isMeta") else ""
        if _invoked(record, name):
            # Used again after a correction: the same task; after another request: a new one.
            fresh = (
                current is None or typed or (current.later and not is_correction(current.later[-1]))
            )
            if fresh:
                task = typed or (current.later.pop() if current is not None else last_task)
                earlier = typed_since[:-1] if not typed and task == last_task else []
                current = Use(
                    file=path,
                    session_id=session_id,
                    cwd=cwd,
                    task=task,
                    time=str(record.get("timestamp") or time),
                    earlier=earlier,
                )
                found.append(current)
                typed_since = []
        elif typed and current is not None:
            current.later.append(typed)
        if current is not None:
            current.skill_dir = current.skill_dir or _skill_dir(record)
            _tool_facts(record, current)
        if typed:
            last_task = typed
            typed_since.append(typed)
    return [u for u in found if u.task]


def mine(root: Path, name: str, since: datetime | None) -> list[Use]:
    """The uses of the skill in every session under root started at or after `since`."""
    out: list[Use] = []
    for path in session_files(root):
        try:
            if name not in path.read_text(encoding="utf-8", errors="replace"):
                continue  # most sessions never mention the skill: skip parsing them
        except OSError:
            continue
        for use in uses(path, name):
            if since is None or _when(use.time, path) >= since:
                out.append(use)
    return out


def _when(stamp: str, path: Path) -> datetime:
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        return when if when.tzinfo else when.replace(tzinfo=UTC)
    except ValueError:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
