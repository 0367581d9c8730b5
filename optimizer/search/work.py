"""Work the agent repeats across evals: the same shell command, or a helper script written again
and again. What every run redoes is what a skill author bundles as a script in scripts/ (the
skill-creator's "look for repeated work"). Read from transcript.jsonl; never from a test run."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path, PurePosixPath

from optimizer.store.files import Workspace

MAX_ITEMS = 5
MIN_EVALS = 2  # seen in one eval only, it is that task's work, not the skill's
SCRIPT_SUFFIXES = {".py", ".sh", ".js", ".ts", ".r", ".rb", ".pl"}
_SPACE = re.compile(r"\s+")


def repeated(ws: Workspace, label: str, runs: list[tuple[int, int]]) -> list[str]:
    """The tool calls of a version's with_skill runs that recur in at least MIN_EVALS evals, most
    widespread first (then most frequent, then by text), as one line each."""
    evals: dict[str, set[int]] = defaultdict(set)
    count: dict[str, int] = defaultdict(int)
    for e, n in runs:
        path = ws.trial_dir(label, e, "with_skill", n) / "transcript.jsonl"
        for call in _calls(path):
            evals[call].add(e)
            count[call] += 1
    common = [c for c in evals if len(evals[c]) >= MIN_EVALS]
    common.sort(key=lambda c: (-len(evals[c]), -count[c], c))
    return [f"{c} (in {len(evals[c])} evals, {count[c]} runs)" for c in common[:MAX_ITEMS]]


def _calls(path: Path) -> list[str]:
    """Each tool call of one run as a short, comparable line; a run's repeats count once."""
    if not path.is_file():
        return []
    found: list[str] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if entry.get("type") != "message" or entry.get("role") != "assistant":
            continue
        for block in entry.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                call = _describe(str(block.get("name", "")), block.get("input") or {})
                if call and call not in found:
                    found.append(call)
    return found


def _describe(name: str, args: dict) -> str | None:
    if name.lower() == "bash" and isinstance(args.get("command"), str):
        first = args["command"].strip().splitlines()[0] if args["command"].strip() else ""
        return f"runs `{_SPACE.sub(' ', first)[:160]}`" if first else None
    # A script written by the agent (not an output it delivers) is work the skill could ship.
    path = args.get("path") or args.get("file_path")
    created = name == "Write" or args.get("command") == "create"
    if created and isinstance(path, str):
        pure = PurePosixPath(path)
        if pure.suffix.lower() in SCRIPT_SUFFIXES and "outputs" not in pure.parts:
            return f"writes a helper script `{pure.name}`"
    return None
