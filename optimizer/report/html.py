"""The HTML report: one self-contained file whose page renders lazily from one embedded JSON blob.
Never references the network, and never puts run data into the page as markup (textContent only)."""

from __future__ import annotations

import base64
import json
import mimetypes
import os
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2

from optimizer.execute.record import HARNESS_FILES
from optimizer.report import confinement, read
from optimizer.report.status import status as run_status
from optimizer.store.files import Workspace, write_text

TEXT_CAP = 20_000  # characters of one text output shown inline
IMAGE_CAP = 400_000  # bytes of one image inlined as a data: URI
TOTAL_CAP = 30_000_000  # bytes inlined over the whole report; past it, outputs are only listed
TRANSCRIPT_CAP = 6_000
COST_POINTS = 400
IMAGE_TYPES = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg"}
TEMPLATE = "template.html.j2"


class _Budget:
    """What is left of TOTAL_CAP: a run with huge outputs still gives a report that opens."""

    def __init__(self, total: int = TOTAL_CAP) -> None:
        self.left = total

    def take(self, n: int) -> bool:
        if n > self.left:
            return False
        self.left -= n
        return True


def _output(path: Path, rel: str, budget: _Budget, root: Path) -> dict:
    size = path.stat().st_size
    item: dict[str, Any] = {"name": rel, "size": size, "kind": "file"}
    if not path.resolve().is_relative_to(root):
        return item  # a model-made link to a host file: listed, never read into the report
    if path.suffix.lower() in IMAGE_TYPES:
        if size <= IMAGE_CAP and budget.take(size):
            mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            item.update(kind="image", data=f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode()}")
        return item
    with path.open("rb") as handle:
        head = handle.read(TEXT_CAP * 4)
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


def _run(ws: Workspace, run_dir: Path, budget: _Budget) -> dict:
    grading = read.read_json(run_dir / "grading.json") or {}
    outputs = []
    out_dir = run_dir / "outputs"
    if out_dir.is_dir():
        for path in sorted(out_dir.rglob("*"), key=read.natural_key):
            rel = path.relative_to(out_dir).as_posix()
            if path.is_file() and rel not in HARNESS_FILES:
                outputs.append(_output(path, rel, budget, ws.root.resolve()))
    transcript = ""
    if (run_dir / "transcript.md").is_file():
        with (run_dir / "transcript.md").open("rb") as handle:
            transcript = handle.read(TRANSCRIPT_CAP * 4).decode("utf-8", errors="ignore")[:TRANSCRIPT_CAP]
    structural = read.read_json(run_dir / "structural.json") or {}
    judge_view = ""  # what the grader was shown: converted files, attachments by type and size
    if (run_dir / "judge_view.md").is_file():
        with (run_dir / "judge_view.md").open("rb") as handle:
            judge_view = handle.read(TRANSCRIPT_CAP * 4).decode("utf-8", errors="ignore")[:TRANSCRIPT_CAP]
    return {
        "id": ws.run_id(run_dir), "path": run_dir.relative_to(ws.root).as_posix(),
        "eval_id": read.eval_of(run_dir), "configuration": run_dir.parent.name,
        "run": run_dir.name.removeprefix("run-"),
        "summary": grading.get("summary"),
        "expectations": grading.get("expectations") or [],
        "gate_passed": structural.get("gate_passed"),
        "eval_feedback": grading.get("eval_feedback"),
        "outputs": outputs, "transcript": transcript, "judge_view": judge_view,
        "user_notes_summary": grading.get("user_notes_summary"),
    }


def _diff(ws: Workspace, parent: str | None, label: str) -> str | None:
    try:
        return read.version_diff(ws, parent, label) if parent else None
    except Exception:  # noqa: BLE001 - a broken snapshot must not stop the whole report
        return None


def _page(ws: Workspace, node: dict, budget: _Budget) -> dict:
    folder = ws.version(node["label"])
    proposal = folder / "proposal.md"
    bench = read.read_json(folder / "benchmark.json") or {}
    return {
        "rationale": read.rationale(proposal.read_text(encoding="utf-8")) if proposal.is_file()
        else node.get("rationale") or "",
        "diff": _diff(ws, node.get("parent"), node["label"]),
        "benchmark": {"run_summary": bench.get("run_summary"), "per_eval": bench.get("per_eval"),
                      "notes": bench.get("notes")} if bench else None,
        "selection": read.read_json(folder / "selection.json"),
        "comparisons": read.comparisons(folder, node["label"], node.get("parent")),
        "analysis": read.read_json(folder / "analysis.json"),
        "failing": read.failing(folder),
        "runs": [_run(ws, r, budget) for r in read.run_dirs(folder)],
    }


def _cost_series(calls: list[dict]) -> list[list]:
    total, series = 0.0, []
    for c in calls:
        total += c.get("cost_usd") or 0.0
        if c.get("created_at"):
            series.append([c["created_at"], round(total, 6)])
    if len(series) > COST_POINTS:  # keep the shape, drop points; the last one is the total
        step = len(series) / COST_POINTS
        series = [series[int(i * step)] for i in range(COST_POINTS)] + [series[-1]]
    return series


def build(run_dir: Path, *, review: bool = False, files_base: str = "") -> dict:
    """Everything the page shows, as JSON-able data."""
    data = read.load(run_dir, with_calls=True)
    ws = data.ws
    budget = _Budget()
    nodes = []
    for n in data.nodes:
        flat = {k: v for k, v in n.items() if k not in ("rationale", "children")}
        if data.form == "iterations":
            flat["per_eval"] = read.per_eval(ws, n)
        nodes.append(flat)
    pages = {n["label"]: _page(ws, n, budget) for n in data.nodes
             if data.form == "iterations" and re.fullmatch(r"v\d+", n["label"] or "")}
    extra = {}
    if (ws.root / "baseline").is_dir():
        extra["baseline"] = [_run(ws, r, budget) for r in read.run_dirs(ws.root / "baseline", "without_skill")]
    if ws.test_dir().is_dir():
        extra["test"] = [_run(ws, r, budget) for v in sorted(ws.test_dir().glob("v*"), key=read.natural_key)
                         for r in read.run_dirs(v)]
    evals = sorted({e for n in nodes for e in (n.get("per_eval") or {})}, key=lambda e: read.natural_key(Path(e)))
    status = run_status(run_dir) if data.source == "state.db" else None
    return {
        "meta": {"skill_name": data.run.get("skill_name") or data.history.get("skill_name") or ws.root.name,
                 "run_id": data.run.get("id") or ws.root.name, "simulated": data.simulated,
                 "current_best": data.current_best, "source": data.source, "form": data.form,
                 "status": data.run.get("status"), "stop_reason": data.run.get("stop_reason"),
                 "started_at": data.run.get("started_at"),
                 "generated_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
                 "review": review, "files_base": files_base,
                 "inlined_bytes": TOTAL_CAP - budget.left, "inline_cap_reached": budget.left <= 0,
                 "sandbox": confinement.describe(status["sandbox"]) if status else None,
                 "unconfined": bool(status and status["sandbox"]["unconfined"])},
        "status": status,
        "nodes": nodes,
        "evals": evals,
        "cost": _cost_series(data.calls),
        "budget_usd": (data.settings.get("budget") or {}).get("usd"),
        "test": status.get("test") if status else data.history.get("test"),
        "warnings": data.warnings,  # shown on top: what the numbers below do not say
        "suggestions": read.read_json(ws.feedback_aggregate),
        "pages": pages,
        "extra": extra,
    }


def script_json(data: Any) -> str:
    """JSON that is inert inside a <script> element: no '<', '>' or '&' can close or open a tag."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent),
                              autoescape=True, undefined=jinja2.StrictUndefined)


def render(run_dir: Path, *, review: bool = False, files_base: str = "") -> str:
    data = build(run_dir, review=review, files_base=files_base)
    template = _environment().get_template(TEMPLATE)
    return template.render(
        title=f"{data['meta']['skill_name']} — skill optimizer report",
        simulated=data["meta"]["simulated"], review=review,
        unconfined=data["meta"]["sandbox"] if data["meta"]["unconfined"] else None,
        nonce=secrets.token_urlsafe(16), data_json=script_json(data),
    )


def write_report(run_dir: Path, output: Path | None = None) -> Path:
    """report.html (or `output`): links to run files are relative to where the file is written."""
    target = Path(output) if output is not None else Workspace(run_dir).report
    base = os.path.relpath(Path(run_dir).resolve(), target.resolve().parent).replace(os.sep, "/")
    html = render(run_dir, files_base="" if base == "." else f"{base}/")
    write_text(target, html)
    return target
