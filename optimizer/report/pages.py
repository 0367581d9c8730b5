"""What the report shows of one version (or of the baseline or the sealed test runs) when it is
opened: its change, numbers and every run with its outputs. One page at a time, so a report of
200 versions × 150 runs never holds more than one version's runs in memory."""

from __future__ import annotations

import base64
import functools
import mimetypes
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from optimizer.grade import preview
from optimizer.grade.preview import natural_key
from optimizer.report import folders, read
from optimizer.report.view import Node, RunView
from optimizer.schemas import JsonObject
from optimizer.store import gradings, readonly
from optimizer.store.errors import StoreError
from optimizer.store.files import Workspace
from optimizer.store.gradings import Committed
from optimizer.store.lock import running_pid
from optimizer.store.rows import PreviewOutput

TEXT_CAP, IMAGE_CAP = preview.TEXT_CAP, preview.IMAGE_CAP  # what one output may show inline
# Bytes inlined in one version's page (each page loads on its own); past it, the page lists its
# outputs by name. Per page, not per report: a shared cap went to the first versions and left
# the latest, the baseline and the sealed test with names only.
PAGE_CAP = 8_000_000
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


def keys(data: RunView) -> list[str]:
    """The pages a report of this run has: one per version, then the baseline and test runs."""
    if data.form != "iterations":
        return []
    ws = data.ws
    labels = [n.label for n in data.nodes if re.fullmatch(r"v\d+", n.label)]
    return labels + [k for k in EXTRA if (ws.root / k).is_dir()]


def page(ws: Workspace, data: RunView, key: str, budget: Budget) -> dict:
    """One page's data; `key` is a version label or one of EXTRA."""
    if key == "baseline":
        return {"runs": list(_runs(ws, ws.root / "baseline", budget, "without_skill"))}
    if key == "test":
        versions = sorted((p for p in ws.test_dir().glob("v*") if p.is_dir()), key=natural_key)
        return {"runs": [r for v in versions for r in _runs(ws, v, budget)]}
    return _version(ws, data.node(key), budget)


def _version(ws: Workspace, node: Node, budget: Budget) -> dict:
    folder = ws.version(node.label)
    proposal = folder / "proposal.md"
    bench = read.read_json(folder / "benchmark.json") or {}
    runs, gradings = [], []
    for r in _runs(ws, folder, budget):
        gradings.append((r["eval_id"], r.pop("grading")))
        runs.append(r)
    return {
        "rationale": folders.rationale(proposal.read_text(encoding="utf-8"))
        if proposal.is_file()
        else node.rationale,
        "diff": _diff(ws, node.parent, node.label),
        "benchmark": {
            "run_summary": bench.get("run_summary"),
            "per_eval": bench.get("per_eval"),
            "notes": bench.get("notes"),
        }
        if bench
        else None,
        "selection": read.read_json(folder / "selection.json"),
        "comparisons": folders.comparisons(folder, node.label, node.parent),
        "analysis": read.read_json(folder / "analysis.json"),
        "failing": folders.tally_failing(gradings),  # from the gradings just read, not read again
        "runs": runs,
    }


def _diff(ws: Workspace, parent: str | None, label: str) -> str | None:
    try:
        return folders.version_diff(ws, parent, label) if parent else None
    except Exception:  # noqa: BLE001 - a broken snapshot must not stop the whole report
        return None


# -- runs ----------------------------------------------------------------------------------------
# 30,000 runs make every system call count: a page's runs, their gradings and their previews come
# from state.db in one query, and only a run graded before previews were kept (or a folder with
# history.json only) is read from its folder.


def _runs(
    ws: Workspace, folder: Path, budget: Budget, configuration: str = "with_skill"
) -> Iterator[dict]:
    """The runs under a version (or baseline) folder, eval-*/<configuration>/run-*, in natural order."""
    root = str(ws.root.resolve()) + os.sep
    if not str(Path(folder).resolve()).startswith(root):
        return
    rel = Path(folder).relative_to(ws.root).as_posix()
    live = running_pid(ws) is not None
    rows = _committed(ws, rel, live)
    keys = set(rows or ())
    # A run still executing (or killed before its row) has a folder and no row yet: while the
    # daemon works, and for folders state.db does not describe, the folders are listed too.
    if not rows or live:
        keys.update(_walk(str(folder), rel, root, configuration))
    found = []
    for key in keys:  # eval-2 before eval-10, then run-2 before run-10
        m = _RUN_KEY.fullmatch(key, len(rel) + 1)
        if m and m["side"] == configuration:
            found.append((_number(m["eval"]), _number(m["run"]), key))
    home = str(ws.root)
    for *_, key in sorted(found):
        yield _run(key, f"{home}/{key}", budget, (rows or {}).get(key, (None, None, None)), root)


_RUN_KEY = re.compile(r"eval-(?P<eval>[^/]+)/(?P<side>[^/]+)/run-(?P<run>[^/]+)")


def _number(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (-1, name)


def _walk(base: str, rel: str, root: str, configuration: str) -> list[str]:
    """The run keys under a folder, from the folder itself (what state.db may not hold yet)."""
    keys = []
    for ev in preview.entries(base):
        if not (ev.name.startswith("eval-") and ev.is_dir() and preview.readable(ev.path, root)):
            continue
        for side in preview.entries(ev.path):
            if side.name == configuration and side.is_dir() and preview.readable(side.path, root):
                keys += [
                    f"{rel}/{ev.name}/{configuration}/{r.name}"
                    for r in preview.entries(side.path)
                    if r.name.startswith("run-") and r.is_dir() and preview.readable(r.path, root)
                ]
    return keys


def _committed(ws: Workspace, rel: str, live: bool) -> dict[str, Committed] | None:
    """Every run state.db holds under `rel` (gradings.shown_under); None without state.db."""
    if not ws.state_db.is_file():
        return None
    try:
        db = readonly.View(ws.state_db, live=live)
    except StoreError:
        return None
    with db:
        return gradings.shown_under(db, rel)


def _json(path: str) -> JsonObject:
    try:
        return gradings.lenient_object(preview.head(path, -1))
    except OSError:
        return {}  # absent, or mid-rename while a run goes on


def _run(rel: str, path: str, budget: Budget, committed: Committed, root: str) -> dict:
    graded, gate, kept = committed
    # The folder is read only when it really is inside the workspace: state.db names a run's
    # folder, it does not vouch that no eval or run folder became a link to elsewhere.
    inside = functools.cache(lambda: preview.within(path, root))
    grading = graded if graded is not None else _json(f"{path}/grading.json") if inside() else {}
    view: Mapping[str, Any] = (
        kept if kept is not None else preview.of_trial(path) if inside() else {}
    )
    if gate is None and inside():
        checked = _json(f"{path}/structural.json").get("gate_passed")
        gate = int(checked) if isinstance(checked, bool | int) else None
    eval_dir, configuration, run = rel.split("/")[-3:]
    return {
        "id": rel.replace("/", "-"),
        "path": rel,
        "eval_id": eval_dir.removeprefix("eval-"),
        "configuration": configuration,
        "run": run.removeprefix("run-"),
        "summary": grading.get("summary"),
        "expectations": grading.get("expectations") or [],
        "gate_passed": bool(gate) if gate is not None else None,
        "eval_feedback": grading.get("eval_feedback"),
        "outputs": [_shown(path, item, budget, inside) for item in view.get("outputs") or []],
        "transcript": view.get("transcript") or "",
        "judge_view": view.get("judge_view") or "",  # what the grader was shown
        "user_notes_summary": grading.get("user_notes_summary"),
        "grading": grading,  # for the version's failing expectations; not part of the page
    }


def _shown(run_dir: str, item: PreviewOutput, budget: Budget, inside: Callable[[], bool]) -> dict:
    """One output on a page: inlined while the page's budget lasts, else listed by name."""
    shown: dict[str, Any] = {"name": item["name"], "size": item["size"], "kind": "file"}
    if item.get("read") and not inside():
        return shown
    if item.get("image"):
        if item["size"] <= IMAGE_CAP and budget.take(item["size"]):
            raw = preview.image(run_dir, item)
            if raw is not None:
                mime = mimetypes.guess_type(item["name"])[0] or "application/octet-stream"
                shown.update(
                    kind="image", data=f"data:{mime};base64,{base64.b64encode(raw).decode()}"
                )
        return shown
    if item.get("read"):
        item = preview.read_output(run_dir, item)
    if "text" in item and budget.take(len(item["text"])):
        shown.update(kind="text", text=item["text"], truncated=item["truncated"])
    return shown
