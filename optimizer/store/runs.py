"""The runs table of state.db: the one row of the run (its skill, split, settings, status, current
best, sealed test and estimate), read through a Store or a read-only View and written through
typed methods. The row is keyed by the run folder's name (store/workspace.py)."""

from __future__ import annotations

import json
from typing import Any, cast

from optimizer.schemas import JsonObject
from optimizer.store.db import Store, now
from optimizer.store.readonly import Reader
from optimizer.store.rows import RunRow


def row(db: Reader) -> RunRow | None:
    """The run's one row, or None when there is none yet."""
    found = db.query("select * from runs limit 1")
    return cast(RunRow, found[0]) if found else None


def _update(store: Store, run_id: str, values: dict[str, Any]) -> None:
    with store.atomic():
        store.table("runs").update(run_id, values)


def rekey(store: Store, run_id: str) -> None:
    """The row keyed by `run_id`, the run folder's name now (a folder moved or renamed since keeps
    its state under the old name)."""
    with store.atomic():
        store.db.execute("update runs set id = ?", [run_id])


def show_stage(store: Store, run_id: str, text: str) -> None:
    """runs.stage: what the daemon is doing now."""
    _update(store, run_id, {"stage": text})


def running(store: Store, run_id: str) -> None:
    """A run that starts again has no stop reason and no error yet: the old ones are history."""
    _update(store, run_id, {"status": "running", "stop_reason": None, "last_error": None})


def stopped(store: Store, run_id: str, reason: str) -> None:
    _update(
        store,
        run_id,
        {"status": "stopped", "stop_reason": reason, "finished_at": now(), "stage": "stopped"},
    )


def failed(store: Store, run_id: str, error: str) -> None:
    _update(store, run_id, {"status": "failed", "last_error": error})


def record_test(store: Store, run_id: str, result: JsonObject) -> None:
    """The sealed test's outcome (runs.test_json)."""
    _update(store, run_id, {"test_json": json.dumps(result)})


def record_estimate(store: Store, run_id: str, estimate_json: str) -> None:
    """The estimate shown when the run started (runs.estimate_json), as its JSON text."""
    _update(store, run_id, {"estimate_json": estimate_json})
