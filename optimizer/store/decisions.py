"""The decisions table of state.db: one row per decided version (its phase, decision, Δ and
interval, reason and the whole selection), as typed reads and the one write that records a
decision with the version's state and, for a promotion, the run's current best."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.decide.fdr import RuleRow
from optimizer.store.db import Store
from optimizer.store.readonly import Reader
from optimizer.store.rows import DecisionRow, Decoded, Raw, json_object


@dataclass(frozen=True)
class DecisionRecord:
    """One row of the decisions table, its selection decoded (selection.json's object, one shape
    per phase: schemas.SelectionFile; {} when none)."""

    version: str
    parent: str | None
    phase: str | None
    decision: str
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    reason: str
    decided_at: str
    selection: Decoded

    @classmethod
    def from_row(cls, row: Raw) -> DecisionRecord:
        version = str(row["version"])
        return cls(
            version=version,
            parent=row.get("parent"),
            phase=row.get("phase"),
            decision=str(row["decision"]),
            delta=row.get("delta"),
            ci_low=row.get("ci_low"),
            ci_high=row.get("ci_high"),
            reason=row.get("reason") or "",
            decided_at=row.get("decided_at") or "",
            selection=json_object(
                row.get("selection_json"), f"decisions.selection_json of {version}"
            ),
        )


def all_of(db: Reader) -> dict[str, DecisionRecord]:
    """Every decision by version."""
    return {
        d.version: d
        for d in map(DecisionRecord.from_row, db.query("select * from decisions order by rowid"))
    }


def rule_rows(db: Reader) -> list[RuleRow]:
    """(version, phase, decision) of every decision: the family of decide/fdr.py."""
    rows = db.query("select version, phase, decision from decisions order by rowid")
    return [
        {"version": str(r["version"]), "phase": r["phase"], "decision": str(r["decision"])}
        for r in rows
    ]


def record(store: Store, *, run_id: str, row: DecisionRow, promote: bool) -> None:
    """The decisions row, the version's state and, when it is promoted, the run's current best,
    in one transaction."""
    label = row["version"]
    with store.atomic():
        store.upsert("decisions", row, pk="version")
        store.table("versions").update(
            label, {"decision": row["decision"], "phase": row["phase"], "status": "decided"}
        )
        if promote:
            store.table("runs").update(run_id, {"current_best": label})
