"""The run store: migrations on a blank database, WAL, the ledger, atomic writes."""

import json
import sqlite3

import pytest

from optimizer.errors import WorkFailed
from optimizer.store import ledger, versions
from optimizer.store.db import Store
from optimizer.store.files import Workspace, write_json, write_text


def test_migrations_on_a_blank_database_create_the_columns(tmp_path):
    store = Store(tmp_path / "state.db")
    cols = {name: set(store.db[name].columns_dict) for name in store.db.table_names()}
    assert {
        "runs",
        "versions",
        "trials",
        "gradings",
        "decisions",
        "iterations",
        "calls",
    } <= cols.keys()
    assert {"label", "hash", "parent", "decision", "score"} <= cols["versions"]
    assert {
        "hash",
        "role",
        "model",
        "sample",
        "input_tokens",
        "output_tokens",
        "cache_write_tokens",
        "cache_read_tokens",
        "cost_usd",
        "latency_ms",
        "outcome",
    } <= cols["calls"]
    assert {"key", "version", "eval_id", "configuration", "run_number", "status"} <= cols["trials"]
    assert {"id", "at", "settings_json", "changed_json"} <= cols["resumes"]
    # Columns nothing wrote are gone, so nobody reads a NULL believing it is data.
    assert "pid" not in cols["runs"] and "cost_usd" not in cols["versions"]
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    applied = [r["name"] for r in store.db["_sqlite_migrations"].rows]
    store.close()
    # Re-opening applies nothing twice.
    again = Store(tmp_path / "state.db")
    assert [r["name"] for r in again.db["_sqlite_migrations"].rows] == applied


def test_run_keys_become_indexed_columns_and_older_rows_get_their_parts(tmp_path):
    """m010: a state.db written before the columns existed opens with each grading's parts filled
    in from its key, and queries by column find them."""
    import sqlite_utils

    from optimizer.store.db import migrations

    path = tmp_path / "state.db"
    old = sqlite_utils.Database(path)
    migrations.apply(old, stop_before="m010_run_key_columns")
    keys = [
        "v2/eval-10/with_skill/run-12",
        "baseline/eval-3/without_skill/run-1",
        "test/v0/eval-1/with_skill/run-2",
        "with_skill/run-4",
    ]
    old["eval_runs"].insert({"key": "with_skill/run-4", "eval_id": 7})  # its name until m013
    for key in keys:
        old["gradings"].insert({"key": key, "status": "ok"})
    old.close()
    store = Store(path)
    rows = {
        r["key"]: (r["prefix"], r["eval_id"], r["configuration"], r["run_number"])
        for r in store.query("select * from gradings")
    }
    assert rows == {
        "v2/eval-10/with_skill/run-12": ("v2/", 10, "with_skill", 12),
        "baseline/eval-3/without_skill/run-1": ("baseline/", 3, "without_skill", 1),
        "test/v0/eval-1/with_skill/run-2": ("test/v0/", 1, "with_skill", 2),
        "with_skill/run-4": ("", 7, "with_skill", 4),
    }
    # m013: the trials of an older state.db keep their rows under the table's new name.
    assert [r["eval_id"] for r in store.query("select eval_id from trials")] == [7]
    plan = " ".join(
        str(r)
        for r in store.db.execute(
            "explain query plan select * from gradings where prefix = 'v2/' and "
            "configuration = 'with_skill' and eval_id = 10"
        ).fetchall()
    )
    assert "USING INDEX" in plan
    store.close()


def test_ledger_spent_and_completed_calls(tmp_path):
    store = Store(tmp_path / "state.db")
    store.record_call(
        {
            "hash": "a",
            "role": "grader",
            "model": "m",
            "sample": 0,
            "outcome": "ok",
            "response_json": "{}",
            "cost_usd": 0.25,
            "attempts": 2,
        }
    )
    store.record_call(
        {
            "hash": "b",
            "role": "grader",
            "model": "m",
            "sample": 1,
            "outcome": "error",
            "cost_usd": 0.0,
            "attempts": 6,
        }
    )
    store.record_cache_hit("a", "grader", 0.25)
    assert store.completed_call("a") is not None and store.completed_call("b") is None
    assert store.spent_usd() == pytest.approx(0.25)
    summary = ledger.summary(store)
    assert summary["n"] == 1 and summary["cache_hits"] == 1 and summary["retries"] == 1


def test_a_corrupt_database_is_one_clear_error(tmp_path):
    path = tmp_path / "state.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(WorkFailed, match="cannot be opened"):
        Store(path)


def test_atomic_json_write_validates_first(tmp_path):
    from pydantic import BaseModel, ValidationError

    class Thing(BaseModel):
        n: int

    target = tmp_path / "a" / "thing.json"
    write_json(target, {"n": 1}, model=Thing)
    assert json.loads(target.read_text()) == {"n": 1}
    with pytest.raises(ValidationError):
        write_json(target, {"n": "not a number"}, model=Thing)
    assert json.loads(target.read_text()) == {"n": 1}  # the old file is untouched
    assert [p.name for p in target.parent.iterdir()] == ["thing.json"]  # no temp file left behind
    write_text(tmp_path / "t.txt", "hello")
    assert (tmp_path / "t.txt").read_text() == "hello"


def test_workspace_run_ids_follow_feedback_json(tmp_path):
    ws = Workspace(tmp_path)
    run = ws.trial_dir("v1", 0, "with_skill", 1)
    assert run == tmp_path / "v1" / "eval-0" / "with_skill" / "run-1"
    assert ws.run_id(run) == "v1-eval-0-with_skill-run-1"


def test_store_survives_concurrent_writer(tmp_path):
    store = Store(tmp_path / "state.db")
    other = sqlite3.connect(tmp_path / "state.db")
    other.execute("insert into versions(label, hash) values ('v0', 'h0')")
    other.commit()
    found = versions.find(store, "v0")
    assert found is not None and found.hash == "h0"


def test_every_store_waits_for_a_busy_writer(tmp_path):
    """A Store opened with no arguments (model/session.py's) waits for another writer rather
    than failing at once: its connection has a busy timeout."""
    store = Store(tmp_path / "state.db")
    (timeout,) = store.db.conn.execute("pragma busy_timeout").fetchone()
    assert timeout >= 1000


def test_a_damaged_database_reads_as_one_store_error(tmp_path):
    """What a view catches is StoreError naming the file, never sqlite3's own exception."""
    from optimizer.store import runs
    from optimizer.store.errors import StoreError

    bad = tmp_path / "state.db"
    bad.write_bytes(b"not a database at all, just bytes" * 100)
    with pytest.raises(StoreError, match="state.db: not a readable run database"):
        runs.read(bad)


def test_a_json_column_is_decoded_once_in_the_store_or_is_one_store_error(tmp_path):
    """The run's JSON columns arrive decoded (runs.Run); one that is not a JSON object is a
    StoreError naming the column, never a traceback out of a view."""
    from optimizer.store import runs
    from optimizer.store.errors import StoreError

    store = Store(tmp_path / "state.db")
    with store.atomic():
        store.table("runs").insert(
            {"id": "r", "skill_name": "s", "split_json": '{"train": [1, 2], "test": [3]}'}
        )
    run = runs.row(store)
    assert run is not None and run.split == {"train": [1, 2], "test": [3]} and run.test is None
    with store.atomic():
        store.table("runs").update("r", {"settings_json": "[1, 2"})
    with pytest.raises(StoreError, match=r"runs\.settings_json is not a JSON object"):
        runs.row(store)


def test_a_view_reads_an_older_state_db_under_todays_names(tmp_path):
    """A view never migrates: the tables and columns m013-m015 renamed are read under today's
    names from a state.db made before them, with their rows."""
    import sqlite_utils

    from optimizer.store import readonly, versions
    from optimizer.store.db import migrations

    path = tmp_path / "state.db"
    old = sqlite_utils.Database(path)
    migrations.apply(old, stop_before="m013_trials")
    old["eval_runs"].insert({"key": "v0/eval-1/with_skill/run-1", "eval_id": 1})
    old["runs"].insert({"id": "night", "stage": "iteration 2: proposal 1 from v0"})
    old["versions"].insert(
        {"label": "v0", "hash": "h", "stage": "baseline", "decision": "baseline"}
    )
    old["decisions"].insert({"version": "v1", "stage": "screening", "decision": "lost"})
    old.close()
    with readonly.View(path) as view:
        assert view.query("select eval_id from trials") == [{"eval_id": 1}]
        assert view.query("select activity from runs")[0]["activity"].startswith("iteration 2")
        assert [v.phase for v in versions.all_of(view)] == ["baseline"]
        assert view.query("select phase from decisions") == [{"phase": "screening"}]
    assert "phase" not in {c.name for c in sqlite_utils.Database(path)["versions"].columns}
