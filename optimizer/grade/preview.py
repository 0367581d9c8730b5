"""What a reader is shown of one run without opening its folder: the heads of its transcript, of
the judge's view and of each text output, and its outputs' names and sizes. Made once, when the
run is graded, and kept in state.db (table previews), so a report of 30,000 runs reads SQLite
instead of 30,000 folders. For a run graded before previews were kept, the report makes the same
thing from the folder with the same function; report/pages.py turns either into a page.

A preview holds no more than any one page could show; what it leaves out (images, outputs past
KEPT_CAP) it marks `read`, and the page reads that file when it shows it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from optimizer.execute.record import HARNESS_FILES
from optimizer.store.rows import Preview, PreviewOutput

TEXT_CAP = 20_000  # characters of one text output shown inline
IMAGE_CAP = 400_000  # bytes of one image inlined as a data: URI
TRANSCRIPT_CAP = 6_000
IMAGE_TYPES = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg"}
# Characters of output text one run keeps in state.db. A run that writes 100 large files adds
# at most this much to the database; its other outputs are read from the folder when shown.
KEPT_CAP = 200_000


def natural_key(path: Path | str) -> list:
    """run-2 before run-10, as text order would not."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def of_trial(trial_dir: Path | str) -> Preview:
    """The preview of one run folder. A link is read only when it points inside the run folder:
    a model can make a link to any host file."""
    path = os.fspath(trial_dir)
    inside = os.path.realpath(path) + os.sep
    out = f"{path}/outputs"
    kept = [KEPT_CAP]
    return {
        # what the grader was shown
        "transcript": _head_text(f"{path}/transcript.md"),
        "judge_view": _head_text(f"{path}/judge_view.md"),
        "outputs": [
            _describe(entry.path, rel, entry.is_symlink(), inside, kept)
            if _utf8(rel)
            else _undecodable(entry, rel)
            for rel, entry in _listing(out)
        ]
        if readable(out, inside)
        else [],
    }


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _undecodable(entry: os.DirEntry, rel: str) -> PreviewOutput:
    """A name that is not UTF-8 (a model can write one): listed as shown, never read, since the
    shown name no longer leads to the file."""
    try:
        size = entry.stat().st_size
    except OSError:
        size = 0
    return {"name": rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), "size": size}


def read_output(trial_dir: Path | str, item: PreviewOutput) -> PreviewOutput:
    """A text output the preview marked `read` (past KEPT_CAP), described from its file now."""
    path, inside = _output_path(trial_dir, item)
    # Resolved whatever its last part is: a folder on the way could have become a link.
    return _describe(path, item["name"], True, inside, [KEPT_CAP])


def image(trial_dir: Path | str, item: PreviewOutput) -> bytes | None:
    """An image output's bytes; None when it is gone, links out, or grew past IMAGE_CAP."""
    path, inside = _output_path(trial_dir, item)
    try:
        raw = head(path, IMAGE_CAP + 1) if within(path, inside) else None
    except OSError:
        return None
    return raw if raw is not None and len(raw) <= IMAGE_CAP else None


def _output_path(trial_dir: Path | str, item: PreviewOutput) -> tuple[str, str]:
    return f"{os.fspath(trial_dir)}/outputs/{item['name']}", os.path.realpath(trial_dir) + os.sep


def head(path: str, cap: int) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(cap)


def within(path: str, inside: str) -> bool:
    """The path, every link on its way resolved, is under `inside` (a folder ending in os.sep)."""
    return os.path.realpath(path).startswith(inside)


def readable(path: str, inside: str) -> bool:
    """A link may point anywhere (a model can make one): only its target tells."""
    return not os.path.islink(path) or within(path, inside)


def entries(folder: str) -> list[os.DirEntry]:
    """A folder's entries with their types in one system call; none when it is gone."""
    try:
        with os.scandir(folder) as it:
            return list(it)
    except OSError:
        return []


def _head_text(path: str) -> str:
    try:
        return head(path, TRANSCRIPT_CAP * 4).decode("utf-8", errors="ignore")[:TRANSCRIPT_CAP]
    except OSError:
        return ""


def _listing(out_dir: str) -> list[tuple[str, os.DirEntry]]:
    """Every file under outputs/ but the harness's, in natural order. Links to folders are not
    followed, as pathlib's rglob does not follow them."""
    files: list[tuple[list, str, os.DirEntry]] = []
    stack = [(out_dir, "")]
    while stack:
        folder, prefix = stack.pop()
        for entry in entries(folder):
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, rel + "/"))
            elif entry.is_file() and rel not in HARNESS_FILES:
                files.append((natural_key(rel), rel, entry))
    return [(rel, entry) for _, rel, entry in sorted(files, key=lambda f: f[0])]


def _describe(path: str, rel: str, link: bool, inside: str, kept: list[int]) -> PreviewOutput:
    # A live run (or a workspace emptied past its size limit) may remove a file between the
    # listing and the read: the file is listed, the page still made.
    try:
        return _described(path, rel, link, inside, kept)
    except OSError:
        return {"name": rel, "size": 0}


def _described(path: str, rel: str, link: bool, inside: str, kept: list[int]) -> PreviewOutput:
    if link and not within(path, inside):  # a link to a host file: listed, never read
        return {"name": rel, "size": os.stat(path).st_size}
    if os.path.splitext(rel)[1].lower() in IMAGE_TYPES:
        return {"name": rel, "size": os.stat(path).st_size, "read": True, "image": True}
    if kept[0] <= 0:  # nothing more fits: not even read
        return {"name": rel, "size": os.stat(path).st_size, "read": True}
    raw = head(path, TEXT_CAP * 4)
    # A read shorter than asked is the whole file: its size without another system call.
    size = len(raw) if len(raw) < TEXT_CAP * 4 else os.stat(path).st_size
    if b"\0" in raw:
        return {"name": rel, "size": size}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        if size <= len(raw):
            return {"name": rel, "size": size}
        text = raw.decode("utf-8", errors="ignore")
    shown = text[:TEXT_CAP]
    if len(shown) > kept[0]:  # kept out whole, so no run keeps more than KEPT_CAP
        return {"name": rel, "size": size, "read": True}
    kept[0] -= len(shown)
    return {
        "name": rel,
        "size": size,
        "text": shown,
        "truncated": size > len(shown.encode("utf-8")),
    }
