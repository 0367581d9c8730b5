"""The decisions table of state.db: one row per decided version (its stage, decision, Δ and
interval, reason and the whole selection), as typed reads and the one write that records a
decision with the version's state and, for a promotion, the run's current best."""

from __future__ import annotations

import json
from typing import cast

from optimizer.decide.fdr import RuleRow
from optimizer.store.db import Store
from optimizer.store.readonly import Reader
from optimizer.store.rows import Decided, DecisionRow


def rows(db: Reader) -> dict[str, DecisionRow]:
    """Every decision's row by version, selection_json as stored."""
    return {d["version"]: d for d in cast(list[DecisionRow], db.query("select * from decisions"))}


def all_of(db: Reader) -> dict[str, Decided]:
    """Every decision by version, its selection parsed (`selection`, {} when none)."""
    out = {}
    for row in db.query("select * from decisions"):
        selection = json.loads(row.pop("selection_json") or "{}")
        if not isinstance(selection, dict):
            raise ValueError(f"decisions.selection_json of {row['version']} is not an object")
        row["selection"] = selection
        out[row["version"]] = cast(Decided, row)
    return out


def rule_rows(db: Reader) -> list[RuleRow]:
    """(version, stage, decision) of every decision: the family of decide/fdr.py."""
    return cast(list[RuleRow], db.query("select version, stage, decision from decisions"))


def record(store: Store, *, run_id: str, row: DecisionRow, promote: bool) -> None:
    """The decisions row, the version's state and, when it is promoted, the run's current best,
    in one transaction."""
    label = row["version"]
    with store.atomic():
        store.upsert("decisions", row, pk="version")
        store.table("versions").update(
            label, {"decision": row["decision"], "stage": row["stage"], "status": "decided"}
        )
        if promote:
            store.table("runs").update(run_id, {"current_best": label})
