"""The files a structural check may look at, all under a run's outputs/ (harness files and
anything that resolves outside it left out), the glob rules that match them (grade/structural.py
states them for eval authors), how much of one is read, and how evidence quotes what was found."""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

from optimizer.execute.record import HARNESS_FILES

MAX_SCAN_BYTES = 5_000_000  # a check never reads more of one file than this


def output_files(trial_dir: Path) -> list[str]:
    """Every output file, as a path relative to outputs/ with `/`, sorted; harness files and
    anything that resolves outside outputs/ are left out."""
    root = Path(trial_dir) / "outputs"
    if not root.is_dir():
        return []
    real_root = root.resolve()
    found = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in files:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if rel in HARNESS_FILES:
                continue
            try:
                resolved = path.resolve()
            except OSError:
                continue
            if not resolved.is_relative_to(real_root) or not resolved.is_file():
                continue
            found.append(rel)
    return sorted(found)


_GLOB_TOKEN = re.compile(r"\*\*/|\*\*|\*|\?|\[!?\]?[^\]]*\]|.", re.S)
_GLOB_FIXED = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex: `*` and `?` stay within one folder, `**` spans folders."""

    def one(tok: str) -> str:
        if tok in _GLOB_FIXED:
            return _GLOB_FIXED[tok]
        if len(tok) > 2 and tok[0] == "[":
            body = tok[1:-1].replace("\\", "\\\\")
            return "[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]"
        return re.escape(tok)

    return re.compile("".join(one(tok) for tok in _GLOB_TOKEN.findall(pattern)) + r"\Z")


def matching(trial_dir: Path, pattern: str) -> list[str]:
    """Output files that `pattern` matches (the rules of grade/structural.py)."""
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if pattern.startswith("outputs/"):
        pattern = pattern[len("outputs/") :]
    files = output_files(trial_dir)
    if "/" not in pattern:
        return [f for f in files if fnmatch.fnmatchcase(f.rsplit("/", 1)[-1], pattern)]
    regex = _glob_regex(pattern.lstrip("/"))
    return [f for f in files if regex.match(f)]


def read_output(trial_dir: Path, rel: str) -> str | None:
    """A file's text, or None for a binary file (a NUL byte or not UTF-8)."""
    with open(Path(trial_dir) / "outputs" / rel, "rb") as handle:
        data = handle.read(MAX_SCAN_BYTES)
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace") if len(data) == MAX_SCAN_BYTES else None


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def quote(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
