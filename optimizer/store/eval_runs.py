"""The eval_runs table of state.db: one row per execution of an eval (or a trigger probe) by one
configuration, as typed reads and writes."""

from __future__ import annotations

from optimizer.store.readonly import Reader


def counts(db: Reader) -> tuple[int, int]:
    """(runs recorded, runs of the sealed test split)."""
    rows = db.query("select count(*) as n, coalesce(sum(split = 'test'), 0) as test from eval_runs")
    return (rows[0]["n"], rows[0]["test"]) if rows else (0, 0)
