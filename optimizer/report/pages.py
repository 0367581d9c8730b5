"""What the report shows of one version (or of the baseline or the sealed test runs) when it is
opened: its change, numbers and every run with its outputs. One page at a time, so a report of
200 versions × 150 runs never holds more than one version's runs in memory."""

from __future__ import annotations

import base64
import json
import mimetypes
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from optimizer.execute.record import HARNESS_FILES
from optimizer.report import read
from optimizer.store import readonly
from optimizer.store.files import Workspace
from optimizer.store.lock import running_pid

TEXT_CAP = 20_000  # characters of one text output shown inline
IMAGE_CAP = 400_000  # bytes of one image inlined as a data: URI
# Bytes inlined in one version's page (each page loads on its own); past it, the page lists its
# outputs by name. Per page, not per report: a shared cap went to the first versions and left
# the latest, the baseline and the sealed test with names only.
PAGE_CAP = 8_000_000
TRANSCRIPT_CAP = 6_000
IMAGE_TYPES = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg"}
EXTRA = ("baseline", "test")  # the pages of runs that belong to no version


class Budget:
    """What is left of one page's cap: a run with huge outputs still gives pages that open."""

    def __init__(self, total: int | None = None) -> None:
        self.total = self.left = PAGE_CAP if total is None else total
        self.refused = False  # something was listed by name only

    def take(self, n: int) -> bool:
        if n > self.left:
            self.refused = True
            return False
        self.left -= n
        return True

    @property
    def used(self) -> int:
        return self.total - self.left


def keys(data: read.RunData) -> list[str]:
    """The pages a report of this run has: one per version, then the baseline and test runs."""
    if data.form != "iterations":
        return []
    ws = data.ws
    labels = [n["label"] for n in data.nodes if re.fullmatch(r"v\d+", n["label"] or "")]
    return labels + [k for k in EXTRA if (ws.root / k).is_dir()]


def page(ws: Workspace, data: read.RunData, key: str, budget: Budget) -> dict:
    """One page's data; `key` is a version label or one of EXTRA."""
    if key == "baseline":
        return {"runs": list(_runs(ws, ws.root / "baseline", budget, "without_skill"))}
    if key == "test":
        versions = sorted((p for p in ws.test_dir().glob("v*") if p.is_dir()), key=read.natural_key)
        return {"runs": [r for v in versions for r in _runs(ws, v, budget)]}
    return _version(ws, data.node(key), budget)


def _version(ws: Workspace, node: dict, budget: Budget) -> dict:
    folder = ws.version(node["label"])
    proposal = folder / "proposal.md"
    bench = read.read_json(folder / "benchmark.json") or {}
    runs, gradings = [], []
    for r in _runs(ws, folder, budget):
        gradings.append((r["eval_id"], r.pop("grading")))
        runs.append(r)
    return {
        "rationale": read.rationale(proposal.read_text(encoding="utf-8")) if proposal.is_file()
        else node.get("rationale") or "",
        "diff": _diff(ws, node.get("parent"), node["label"]),
        "benchmark": {"run_summary": bench.get("run_summary"), "per_eval": bench.get("per_eval"),
                      "notes": bench.get("notes")} if bench else None,
        "selection": read.read_json(folder / "selection.json"),
        "comparisons": read.comparisons(folder, node["label"], node.get("parent")),
        "analysis": read.read_json(folder / "analysis.json"),
        "failing": read.tally_failing(gradings),  # from the gradings just read, not read again
        "runs": runs,
    }


def _diff(ws: Workspace, parent: str | None, label: str) -> str | None:
    try:
        return read.version_diff(ws, parent, label) if parent else None
    except Exception:  # noqa: BLE001 - a broken snapshot must not stop the whole report
        return None


# -- run folders ---------------------------------------------------------------------------------
# 30,000 run folders make every system call and every Path object count: paths are strings here,
# and os.scandir gives names, types and whether an entry is a link in one call, where pathlib's
# glob, is_file and resolve cost one or more system calls each.


def _entries(folder: str) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except OSError:
        return []


def _inside(path: str, root: str, link: bool) -> bool:
    """A link may point anywhere (a model can make one): only its target tells."""
    return not link or os.path.realpath(path).startswith(root)


def _runs(ws: Workspace, folder: Path, budget: Budget, configuration: str = "with_skill") -> Iterator[dict]:
    """The runs under a version (or baseline) folder, eval-*/<configuration>/run-*, in natural order."""
    root = str(ws.root.resolve()) + os.sep
    base = str(Path(folder).resolve())
    if not base.startswith(root):
        return
    rel = Path(folder).relative_to(ws.root).as_posix()
    graded = _graded(ws, rel)
    found = []
    for ev in _entries(base):
        if not (ev.name.startswith("eval-") and ev.is_dir() and _inside(ev.path, root, ev.is_symlink())):
            continue
        for side in _entries(ev.path):
            if side.name == configuration and side.is_dir() and _inside(side.path, root, side.is_symlink()):
                found += [(read.natural_key(ev.name), read.natural_key(r.name), ev.name, r.name)
                          for r in _entries(side.path)
                          if r.name.startswith("run-") and r.is_dir() and _inside(r.path, root, r.is_symlink())]
    for *_, ev_name, run_name in sorted(found):
        key = f"{rel}/{ev_name}/{configuration}/{run_name}"
        yield _run(key, f"{base}/{ev_name}/{configuration}/{run_name}", root, budget, graded.get(key))


def _graded(ws: Workspace, rel: str) -> dict[str, tuple[str, int | None]]:
    """The gradings state.db holds for the runs under `rel` ({run key: (grading.json's text,
    gate passed)}), in one query: two files fewer to open per run. A run without a row (a
    folder with history.json only, or graded but killed before its commit) is read from files."""
    if not ws.state_db.is_file():
        return {}
    try:
        conn = readonly.connect(ws.state_db, live=running_pid(ws) is not None)
    except sqlite3.Error:
        return {}
    with closing(conn):  # keys are the run folders' paths: a range of the primary key
        try:
            rows = conn.execute("select key, grading_json, gate_passed from gradings where key >= ? and key < ? "
                                "and grading_json is not null", (f"{rel}/", f"{rel}0"))
            return {key: (text, gate) for key, text, gate in rows}
        except sqlite3.Error:
            return {}


def _head(path: str, cap: int) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(cap)


def _json(path: str) -> dict:
    try:
        return _loads(_head(path, -1))
    except OSError:
        return {}  # absent, or mid-rename while a run goes on


def _loads(text: str | bytes) -> dict:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _text(path: str) -> str:
    try:
        return _head(path, TRANSCRIPT_CAP * 4).decode("utf-8", errors="ignore")[:TRANSCRIPT_CAP]
    except OSError:
        return ""


def _run(rel: str, path: str, root: str, budget: Budget, graded: tuple[str, int | None] | None) -> dict:
    grading = _loads(graded[0]) if graded else _json(f"{path}/grading.json")
    gate = graded[1] if graded else None
    out = f"{path}/outputs"
    eval_dir, configuration, run = rel.split("/")[-3:]
    return {
        "id": rel.replace("/", "-"), "path": rel,
        "eval_id": eval_dir.removeprefix("eval-"), "configuration": configuration,
        "run": run.removeprefix("run-"),
        "summary": grading.get("summary"),
        "expectations": grading.get("expectations") or [],
        "gate_passed": bool(gate) if gate is not None else _json(f"{path}/structural.json").get("gate_passed"),
        "eval_feedback": grading.get("eval_feedback"),
        "outputs": _outputs(out, root, budget) if _inside(out, root, os.path.islink(out)) else [],
        "transcript": _text(f"{path}/transcript.md"),
        "judge_view": _text(f"{path}/judge_view.md"),  # what the grader was shown
        "user_notes_summary": grading.get("user_notes_summary"),
        "grading": grading,  # for the version's failing expectations; not part of the page
    }


def _outputs(out_dir: str, root: str, budget: Budget) -> list[dict]:
    files: list[tuple[list, str, os.DirEntry]] = []
    stack = [(out_dir, "")]
    while stack:  # links to folders are not followed, as pathlib's rglob does not follow them
        folder, prefix = stack.pop()
        for entry in _entries(folder):
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, rel + "/"))
            elif entry.is_file() and rel not in HARNESS_FILES:
                files.append((read.natural_key(rel), rel, entry))
    return [_output_or_gone(entry, rel, budget, root) for _, rel, entry in sorted(files, key=lambda f: f[0])]


def _output_or_gone(entry: os.DirEntry, rel: str, budget: Budget, root: str) -> dict:
    # A live run (or a workspace emptied past its size limit) may remove a file between the
    # listing and the read: the file is listed, the page still made.
    try:
        return _output(entry, rel, budget, root)
    except OSError:
        return {"name": rel, "size": 0, "kind": "file"}


def _output(entry: os.DirEntry, rel: str, budget: Budget, root: str) -> dict:
    if not _inside(entry.path, root, entry.is_symlink()):  # a model-made link to a host file: listed, never read
        return {"name": rel, "size": entry.stat().st_size, "kind": "file"}
    suffix = os.path.splitext(entry.name)[1].lower()
    if suffix in IMAGE_TYPES:
        size = entry.stat().st_size
        item: dict[str, Any] = {"name": rel, "size": size, "kind": "file"}
        if size <= IMAGE_CAP and budget.take(size):
            mime = mimetypes.guess_type(entry.name)[0] or "application/octet-stream"
            raw = _head(entry.path, IMAGE_CAP + 1)  # the file may have grown since its stat
            if len(raw) <= IMAGE_CAP:
                item.update(kind="image", data=f"data:{mime};base64,{base64.b64encode(raw).decode()}")
        return item
    head = _head(entry.path, TEXT_CAP * 4)
    # A read shorter than asked is the whole file: its size without another system call.
    size = len(head) if len(head) < TEXT_CAP * 4 else entry.stat().st_size
    item = {"name": rel, "size": size, "kind": "file"}
    if b"\0" in head:
        return item
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        if size <= len(head):
            return item
        text = head.decode("utf-8", errors="ignore")
    shown = text[:TEXT_CAP]
    if budget.take(len(shown)):
        item.update(kind="text", text=shown, truncated=size > len(shown.encode("utf-8")))
    return item
