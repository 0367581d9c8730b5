"""What a judging model sees of a task and of a run: the task's sections, and the run's output files
rendered within a budget (text inline, the rest by name, type and size). One place for the grader
and the comparator. Never puts a host path, a time or a random name into what it renders."""

from __future__ import annotations

import html
import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optimizer.grade.structural import output_files
from optimizer.tags import data, tag, tags

MAX_FILE_CHARS = 20_000


def truncate(text: str, limit: int, head: int | None = None) -> str:
    """text cut in the middle with a visible marker; the head keeps the start, the rest the end."""
    if len(text) <= limit:
        return text
    head = min(head if head is not None else limit // 3, limit)
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[… {cut:,} characters truncated …]\n{text[len(text) - tail:] if tail else ''}"


def task_sections(eval: Any) -> list[str]:
    """The task, its expected output, its expectations (E1…) and its rubric, as tagged sections."""
    expectations = [({"id": f"E{i}"}, t) for i, t in enumerate(eval.expectations, 1)]
    parts = [
        tag("task", eval.prompt),
        tag("expected_output", eval.expected_output or "(not given)"),
        tag("expectations", tags("expectation", expectations) or "(none)"),
    ]
    if eval.rubric:
        parts.append(tag("rubric", "\n".join(_dimension(d) for d in eval.rubric)))
    return parts


def _dimension(dim: Any) -> str:
    # Written out because tags.tag() takes `name` itself as its first argument.
    anchors = [f"Score {k}: {v}" for k, v in sorted(dim.scoring.items())]
    body = "\n".join([dim.description, *anchors])
    name, weight = html.escape(dim.name, quote=True), html.escape(str(dim.weight), quote=True)
    return f'<dimension name="{name}" weight="{weight}">\n{body}\n</dimension>'


def text_of(path: Path, limit: int) -> str | None:
    """The file's text (at most 4·limit bytes read), or None when it is binary."""
    with open(path, "rb") as handle:
        data = handle.read(4 * limit)
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A cut through a multi-byte character at the read limit is still text.
        return data[: exc.start].decode("utf-8") if exc.start > len(data) - 4 else None


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


def render_outputs(run_dir: Path, *, budget: int, shown: Callable[[str], str] = lambda s: s,
                   prefix: str = "outputs/") -> str:
    """Every output file as a `<file path=..>` entry: text inline (each capped at MAX_FILE_CHARS,
    all at `budget`), binaries by name, type and size. `shown` is applied to each path and text
    (the comparator blinds them); paths are given relative to the run, under `prefix`."""
    entries, left = [], budget
    for rel in output_files(run_dir):
        path = Path(run_dir) / "outputs" / rel
        size = path.stat().st_size
        name = prefix + shown(rel)
        text = text_of(path, MAX_FILE_CHARS * 4)
        if text is None:
            kind = mimetypes.guess_type(rel)[0] or "application/octet-stream"
            entries.append(tag("file", f"(binary file, {size:,} bytes, not shown)",
                               path=name, binary="true", size=size, type=kind))
            continue
        if left <= 0:
            entries.append(tag("file", f"[… not shown: the outputs passed {budget:,} characters …]",
                               path=name, size=size))
            continue
        cap = min(MAX_FILE_CHARS, left)
        text = truncate(text, cap, head=cap * 3 // 4)
        left -= len(text)
        entries.append(data("file", shown(text), path=name))
    return "\n".join(entries) if entries else "(no output files)"
