"""A description fleet's confusion: which skill fired for whose requests, at v0 and at the best, from
the trigger probes each member recorded (every split probed). A member's own should-trigger
queries are its own requests; a sibling's requests are its should-not queries with that owner
(inputs/triggers.with_siblings); its other should-not queries are "other requests"."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from optimizer.store import readonly, runs, trials
from optimizer.store.files import Workspace
from optimizer.store.runs import Run

OTHER = "other requests"
PROBE = "trigger"  # trials.configuration of a probe row (search/probe.CONFIGURATION)


@dataclass(frozen=True)
class Cell:
    fired: str  # the skill whose description was probed
    requests: str  # whose requests: a skill's name, or OTHER
    v0: float | None  # the share of probes that fired, at v0
    best: float | None  # and at the best
    best_label: str


def _rates(db: readonly.View, label: str, owner_of: dict[int, str]) -> dict[str, float]:
    fired: dict[str, list[float]] = {}
    for r in trials.probes(db, label, PROBE):
        if r["status"] == "ok" and r["eval_id"] in owner_of:
            fired.setdefault(owner_of[r["eval_id"]], []).append(float(bool(r["skill_invoked"])))
    return {k: math.fsum(v) / len(v) for k, v in sorted(fired.items()) if v}


def member_cells(run_dir: Path) -> list[Cell]:
    """One member's row of the table; empty for a member that optimises no description."""
    ws = Workspace(run_dir)
    with readonly.View(ws.state_db) as db:
        run = runs.row(db) or Run()
        if run.target != "description":
            return []
        name = run.skill_name or ""
        owner_of = {
            int(q["id"]): q.get("owner") or (name if q["should_trigger"] else OTHER)
            for q in run.split.get("queries", [])
        }
        best = run.current_best or "v0"
        before, after = _rates(db, "v0", owner_of), _rates(db, best, owner_of)
    owners = sorted(set(owner_of.values()), key=lambda o: (o == OTHER, o != name, o))
    return [Cell(name, o, before.get(o), after.get(o), best) for o in owners]


def markdown(cells: list[Cell]) -> list[str]:
    """The table as markdown lines: a row per skill that fired, a column per whose requests."""
    if not cells:
        return []
    columns = sorted({c.requests for c in cells}, key=lambda o: (o == OTHER, o))
    rows = sorted({c.fired for c in cells})
    at = {(c.fired, c.requests): c for c in cells}

    def shown(c: Cell | None) -> str:
        if c is None or (c.v0 is None and c.best is None):
            return "—"
        v0 = "—" if c.v0 is None else f"{c.v0:.2f}"
        best = "—" if c.best is None else f"{c.best:.2f}"
        return f"{v0} → {best}"

    out = [
        "Share of probes in which the skill of the row fired for the requests of the column, "
        "v0 → best (its own requests should fire; a sibling's should not).",
        "",
        "| fired \\ requests of | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    out += [f"| {r} | " + " | ".join(shown(at.get((r, c))) for c in columns) + " |" for r in rows]
    return out
