"""A fleet read from its folder, never changed: `optimizer status FLEET` (one line per skill and
the fleet's spend) and the fleet's summary.md (per skill v0 → best, the sealed gain with its
interval, the spend, why it stopped and the command that adopts it; where the money went and why;
what was skipped and why). Every figure comes from the member's own views (report/status.py,
report/summary.py) or fleet.db; none is computed here a second time."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import TypedDict

from rich.console import Console

from optimizer.fleet import confusion, folder
from optimizer.report import status as member_status
from optimizer.report import summary as member_summary
from optimizer.schemas import MorningSummary
from optimizer.store import fleetdb
from optimizer.store.files import write_text
from optimizer.store.lock import running_pid
from optimizer.words import dollars, plural


class MemberLine(TypedDict):
    name: str
    run_dir: str
    status: str | None
    activity: str | None
    best: str | None
    score: float | None
    iterations_done: int
    sealed_delta: float | None
    budgeted_usd: float
    spent_usd: float
    stop_reason: str | None


class SkippedLine(TypedDict):
    skill_dir: str
    reason: str


class FleetStatus(TypedDict):
    fleet_dir: str
    running: bool
    pid: int | None
    budget_usd: float | None
    deadline: str | None
    budgeted_usd: float
    spent_usd: float
    members: list[MemberLine]
    skipped: list[SkippedLine]
    steps: dict[str, int]  # iterations the fleet chose, per member folder


def _member(name: str, d: Path) -> MemberLine:
    info = member_status.status(d)
    best = info["current_best"]
    sealed = info.get("test")
    delta = sealed.get("delta") if isinstance(sealed, dict) else None
    return {
        "name": name,
        "run_dir": str(d),
        "status": info["status"],
        "activity": info["activity"],
        "best": best["version"] if best else None,
        "score": best["score"] if best else None,
        "iterations_done": info["iterations_done"],
        "sealed_delta": float(delta) if isinstance(delta, int | float) else None,
        "budgeted_usd": info["budgeted_usd"] or 0.0,
        "spent_usd": info["spent_usd"] or 0.0,
        "stop_reason": info["stop_reason"],
    }


def status(root: Path) -> FleetStatus:
    """The fleet as it stands: alive or not, its budget and spend, each member's line."""
    fleet = folder.read(root)
    pid = running_pid(folder.workspace(root))
    members = [
        _member(m.name, d)
        for m, d in zip(
            sorted(fleet.members, key=lambda m: m.folder),
            folder.member_dirs(root, fleet),
            strict=True,
        )
    ]
    steps = fleetdb.steps(root)
    return {
        "fleet_dir": str(root),
        "running": pid is not None,
        "pid": pid,
        "budget_usd": fleet.budget_usd,
        "deadline": fleet.deadline or None,
        "budgeted_usd": round(math.fsum(m["budgeted_usd"] for m in members), 6),
        "spent_usd": round(math.fsum(m["spent_usd"] for m in members), 6),
        "members": members,
        "skipped": [{"skill_dir": s.skill_dir, "reason": s.reason} for s in fleet.skipped],
        "steps": dict(sorted(Counter(s.member for s in steps).items())),
    }


def spent_words(info: FleetStatus) -> str:
    budget = info.get("budget_usd")
    of = f" of the {dollars(budget)} budget" if budget else ""
    apart = info["spent_usd"] - info["budgeted_usd"]
    more = f" (+{dollars(apart)} on adoptions)" if apart > 5e-3 else ""
    return f"{dollars(info['budgeted_usd'])} spent{of}{more}"


def print_status(console: Console, info: FleetStatus) -> None:
    alive = f"running (pid {info['pid']})" if info["running"] else "not running"
    console.print(
        f"fleet {info['fleet_dir']}: {alive}, {len(info['members'])} skills, {spent_words(info)}",
        markup=False,
        highlight=False,
    )
    for m in info["members"]:
        console.print(f"  {_member_line(m, info['steps'])}", markup=False, highlight=False)
    for s in info["skipped"]:
        console.print(f"  skipped {s['skill_dir']}: {s['reason']}", markup=False, highlight=False)


def _member_line(m: MemberLine, steps: dict[str, int]) -> str:
    score = f" {m['score']:.3f}" if m.get("score") is not None else ""
    sealed = f", sealed Δ {m['sealed_delta']:+.3f}" if m.get("sealed_delta") is not None else ""
    where = m.get("stop_reason") or m.get("activity") or m.get("status") or ""
    n = steps.get(Path(m["run_dir"]).name, 0)
    return (
        f"{m['name']}: best {m['best'] or 'v0'}{score}{sealed}, "
        f"{m['iterations_done']} iterations ({n} chosen by the fleet), "
        f"{dollars(m['budgeted_usd'])}; {where}"
    )


def _sealed(s: MorningSummary) -> str:
    n = s.sealed
    if n is None or n.delta is None:
        return "no sealed test"
    interval = f" [{n.low:+.3f}, {n.high:+.3f}]" if n.low is not None and n.high is not None else ""
    return f"{n.delta:+.3f}{interval} on {plural(n.evals, 'sealed eval')}"


def summary_md(root: Path) -> str:
    """The fleet's morning, from each member's summary.json and fleet.db."""
    info = status(root)
    out = [f"# Fleet night: {root}", "", f"{len(info['members'])} skills, {spent_words(info)}.", ""]
    out += ["## Per skill", ""]
    for m in info["members"]:
        d = Path(m["run_dir"])
        md, js = member_summary.paths(d)
        if not js.is_file():
            out.append(f"- **{m['name']}**: no summary yet (`optimizer summary {d}`)")
            continue
        s = MorningSummary.model_validate_json(js.read_text(encoding="utf-8"))
        v0 = f"{s.train.v0:.3f}" if s.train and s.train.v0 is not None else "?"
        best = f"{s.train.best:.3f}" if s.train and s.train.best is not None else "?"
        adopt = f"; adopt it: `optimizer adopt {d}`" if s.won else ""
        why = (s.stop_reason or s.status or "").rstrip(".")
        out.append(
            f"- **{m['name']}**: v0 {v0} → {s.best} {best} (train); sealed {_sealed(s)}; "
            f"{dollars(m['budgeted_usd'])}; why it stopped: {why}{adopt}. Its morning: {md}"
        )
    out += ["", "## Where the money went", ""]
    steps = fleetdb.steps(root)
    if not steps:
        out.append("- no iteration was chosen by the fleet (each skill had its baseline only).")
    for member, n in info["steps"].items():
        last = next(s for s in reversed(steps) if s.member == member)
        out.append(f"- {member}: {n} iterations chosen; the last for {last.why}")
    cells = [c for m in info["members"] for c in confusion.member_cells(Path(m["run_dir"]))]
    if cells:
        out += ["", "## Who fired for whose requests", ""] + confusion.markdown(cells)
    if info["skipped"]:
        out += ["", "## Skipped", ""]
        out += [f"- {s['skill_dir']}: {s['reason']}" for s in info["skipped"]]
    return "\n".join(out) + "\n"


def write_summary(root: Path) -> Path:
    path = Path(root) / "summary.md"
    write_text(path, summary_md(root))
    return path
