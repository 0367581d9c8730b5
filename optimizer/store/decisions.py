"""The decisions table of state.db: one row per decided version (its stage, decision, Δ and
interval, reason and the whole selection), as typed reads and the one write that records a
decision with the version's state and, for a promotion, the run's current best."""

from __future__ import annotations

import json
from typing import Any, cast

from optimizer.decide.fdr import RuleRow
from optimizer.store.db import Store, now
from optimizer.store.readonly import Reader
from optimizer.store.rows import DecisionRow


def rows(db: Reader) -> dict[str, DecisionRow]:
    """Every decision's row by version, selection_json as stored."""
    return {d["version"]: d for d in cast(list[DecisionRow], db.query("select * from decisions"))}


def all_of(db: Reader) -> dict[str, dict[str, Any]]:
    """Every decision by version, its selection parsed (`selection`, {} when none)."""
    out = {}
    for row in db.query("select * from decisions"):
        selection = json.loads(row.pop("selection_json") or "{}")
        if not isinstance(selection, dict):
            raise ValueError(f"decisions.selection_json of {row['version']} is not an object")
        row["selection"] = selection
        out[row["version"]] = row
    return out


def rule_rows(db: Reader) -> list[RuleRow]:
    """(version, stage, decision) of every decision: the family of decide/fdr.py."""
    return cast(list[RuleRow], db.query("select version, stage, decision from decisions"))


def record(
    store: Store,
    *,
    run_id: str,
    label: str,
    parent: str,
    stage: str,
    selection: dict[str, Any],
    promote: bool,
) -> None:
    """The decisions row, the version's state and, when it is promoted, the run's current best,
    in one transaction. The row's delta and interval are read from the selection itself."""
    interval = selection.get("interval") or {}
    verdict = selection["decision"]
    with store.atomic():
        store.upsert(
            "decisions",
            {
                "version": label,
                "parent": parent,
                "stage": stage,
                "decision": verdict,
                "delta": selection.get("delta"),
                "ci_low": interval.get("low"),
                "ci_high": interval.get("high"),
                "reason": selection["reason"],
                "selection_json": json.dumps(selection),
                "decided_at": now(),
            },
            pk="version",
        )
        store.table("versions").update(
            label, {"decision": verdict, "stage": stage, "status": "decided"}
        )
        if promote:
            store.table("runs").update(run_id, {"current_best": label})
