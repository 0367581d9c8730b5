"""The runs table of state.db: the one row of the run (its skill, split, settings, status, current
best, sealed test and estimate), read through a Store or a read-only View and written through
typed methods. The row is keyed by the run folder's name (store/workspace.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optimizer.schemas import JsonObject
from optimizer.store.db import Store, now
from optimizer.store.readonly import Reader, View
from optimizer.store.rows import Decoded, Raw, json_object


@dataclass(frozen=True)
class Run:
    """The runs table's one row, its JSON columns decoded. A field is None where the row has no
    value, and in the run a view builds from history.json alone (report/read.py), which knows
    only the skill's name, the start and the stop reason."""

    id: str | None = None
    skill_name: str | None = None
    skill_dir: str | None = None
    target: str | None = None  # "body" or "description"
    started_at: str | None = None
    eval_set_hash: str | None = None
    split: Decoded = field(default_factory=dict)  # split_json: train, test, note, queries
    settings: Decoded = field(default_factory=dict)  # settings_json: config.Settings
    status: str | None = None
    stop_reason: str | None = None
    from_run: str | None = None
    finished_at: str | None = None
    current_best: str | None = None
    test: Decoded | None = None  # test_json: the sealed test's outcome
    activity: str | None = None
    last_error: str | None = None
    # estimate_json: search/cost_model.Estimate's object as shown at the start (the store may not
    # import search, so its type is the reader's to state)
    estimate: Any = None

    @classmethod
    def from_row(cls, row: Raw) -> Run:
        test, estimate = row.get("test_json"), row.get("estimate_json")
        return cls(
            id=row.get("id"),
            skill_name=row.get("skill_name"),
            skill_dir=row.get("skill_dir"),
            target=row.get("target"),
            started_at=row.get("started_at"),
            eval_set_hash=row.get("eval_set_hash"),
            split=json_object(row.get("split_json"), "runs.split_json"),
            settings=json_object(row.get("settings_json"), "runs.settings_json"),
            status=row.get("status"),
            stop_reason=row.get("stop_reason"),
            from_run=row.get("from_run"),
            finished_at=row.get("finished_at"),
            current_best=row.get("current_best"),
            test=json_object(test, "runs.test_json") if test else None,
            activity=row.get("activity"),
            last_error=row.get("last_error"),
            estimate=json_object(estimate, "runs.estimate_json") if estimate else None,
        )

    @property
    def best(self) -> str:
        """The current best version, v0 before any promotion."""
        return self.current_best or "v0"


def row(db: Reader) -> Run | None:
    """The run's one row, or None when there is none yet."""
    found = db.query("select * from runs limit 1")
    return Run.from_row(found[0]) if found else None


def read(db_path: Path) -> Run | None:
    """The run of a state.db opened read-only (a daemon may be writing), None when it has none
    yet; StoreError when it cannot be read."""
    with View(db_path) as db:
        return row(db)


def _update(store: Store, run_id: str, values: dict[str, Any]) -> None:
    with store.atomic():
        store.table("runs").update(run_id, values)


def rekey(store: Store, run_id: str) -> None:
    """The row keyed by `run_id`, the run folder's name now (a folder moved or renamed since keeps
    its state under the old name)."""
    with store.atomic():
        store.db.execute("update runs set id = ?", [run_id])


def show_activity(store: Store, run_id: str, text: str) -> None:
    """runs.activity: what the daemon is doing now."""
    _update(store, run_id, {"activity": text})


def running(store: Store, run_id: str) -> None:
    """A run that starts again has no stop reason and no error yet: the old ones are history."""
    _update(store, run_id, {"status": "running", "stop_reason": None, "last_error": None})


def stopped(store: Store, run_id: str, reason: str) -> None:
    _update(
        store,
        run_id,
        {"status": "stopped", "stop_reason": reason, "finished_at": now(), "activity": "stopped"},
    )


def failed(store: Store, run_id: str, error: str) -> None:
    _update(store, run_id, {"status": "failed", "last_error": error})


def record_test(store: Store, run_id: str, result: JsonObject) -> None:
    """The sealed test's outcome (runs.test_json)."""
    _update(store, run_id, {"test_json": json.dumps(result)})


def record_estimate(store: Store, run_id: str, estimate_json: str) -> None:
    """The estimate shown when the run started (runs.estimate_json), as its JSON text."""
    _update(store, run_id, {"estimate_json": estimate_json})
