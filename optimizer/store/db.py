"""state.db, the source of truth of one run: migrations, and small typed reads and writes.
Every JSON file of a workspace can be rebuilt from it; nothing else may hold state that matters."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlite_utils
from sqlite_utils import Migrations
from sqlite_utils.db import Table

from optimizer.errors import WorkFailed

migrations = Migrations("optimizer")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@migrations()
def m001_initial(db: sqlite_utils.Database) -> None:
    db.table("runs").create(  # one row: this optimizer run
        {
            "id": str,
            "skill_name": str,
            "skill_dir": str,
            "target": str,
            "started_at": str,
            "eval_set_hash": str,
            "split_json": str,
            "settings_json": str,
            "status": str,
            "stop_reason": str,
            "from_run": str,
            "finished_at": str,
        },
        pk="id",
    )
    db.table("versions").create(
        {
            "label": str,
            "hash": str,
            "parent": str,
            "iteration": int,
            "created_at": str,
            "status": str,
            "decision": str,
            "summary": str,
            "rationale": str,
            "stage": str,
            "score": float,
            "pass_rate": float,
            "cost_usd": float,
        },
        pk="label",
    )
    db.table("versions").create_index(["hash"], unique=True)
    db.table("eval_runs").create(  # one execution of one eval by one configuration
        {
            "key": str,
            "version": str,
            "eval_id": int,
            "configuration": str,
            "run_number": int,
            "split": str,
            "status": str,
            "error": str,
            "skill_invoked": int,
            "tokens": int,
            "time_seconds": float,
            "completed_at": str,
        },
        pk="key",
    )
    db.table("eval_runs").create_index(["version", "eval_id"])
    db.table("gradings").create(
        {
            "key": str,
            "status": str,
            "score": float,
            "pass_rate": float,
            "passed": int,
            "total": int,
            "rubric_normalized": float,
            "gate_passed": int,
            "grading_json": str,
            "structural_json": str,
            "completed_at": str,
        },
        pk="key",
    )
    db.table("decisions").create(
        {
            "version": str,
            "parent": str,
            "stage": str,
            "decision": str,
            "delta": float,
            "ci_low": float,
            "ci_high": float,
            "reason": str,
            "selection_json": str,
            "decided_at": str,
        },
        pk="version",
    )
    db.table("iterations").create(
        {
            "number": int,
            "parent": str,
            "stage": str,
            "candidates_json": str,
            "started_at": str,
            "finished_at": str,
        },
        pk="number",
    )
    db.table(
        "calls"
    ).create(  # the model-call ledger, which doubles as the cache that makes resume free
        {
            "hash": str,
            "role": str,
            "model": str,
            "sample": int,
            "outcome": str,
            "response_json": str,
            "input_tokens": int,
            "output_tokens": int,
            "cache_write_tokens": int,
            "cache_read_tokens": int,
            "cost_usd": float,
            "latency_ms": float,
            "attempts": int,
            "error": str,
            "created_at": str,
        },
        pk="hash",
    )
    db.table("calls").create_index(["role"])
    db.table("cache_hits").create(  # a call served from the ledger: counted, and the money it saved
        {"id": int, "hash": str, "role": str, "saved_usd": float, "at": str}, pk="id"
    )


# What the disk or another process can do to state.db: each stops the run with one sentence
# (docs/design.md §3: systemic), never a traceback and never a run recorded as failed because of it.
_SYSTEMIC = {
    "SQLITE_BUSY": "is locked by another process; close that process or wait for it, then resume the run",
    "SQLITE_LOCKED": "is locked by another process; close that process or wait for it, then resume the run",
    "SQLITE_FULL": "cannot grow because the disk is full; free some space, then resume the run",
    "SQLITE_READONLY": "is read-only; make the run folder writable, then resume the run",
    "SQLITE_IOERR": "cannot be read or written (an I/O error); check the disk, then resume the run",
    "SQLITE_CANTOPEN": "cannot be opened; check the run folder, then resume the run",
    "SQLITE_CORRUPT": "is damaged; restore it from a copy or start a new run",
    "SQLITE_NOTADB": "is damaged; restore it from a copy or start a new run",
}


class Store:
    """state.db of one run folder (WAL, busy timeout), migrated on open."""

    def __init__(self, path: Path, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self._ledger_sql: dict[tuple[str, ...], str] = {}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=busy_timeout_s, check_same_thread=False)
            self.db = sqlite_utils.Database(conn)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            self.db.execute("PRAGMA synchronous=NORMAL")
            migrations.apply(self.db)
        except sqlite3.DatabaseError as exc:
            raise WorkFailed(
                f"{self.path}: the run database cannot be opened ({exc}); "
                "restore it from a copy or start a new run."
            ) from None

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One step's writes land together or not at all."""
        with self._systemic_errors(), self.db.conn:
            yield

    @contextmanager
    def _systemic_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            name = getattr(exc, "sqlite_errorname", "") or ""
            why = _SYSTEMIC.get("_".join(name.split("_")[:2]))
            if why is None:
                raise
            raise WorkFailed(f"{self.path}: the run database {why} ({exc}).") from None

    def close(self) -> None:
        self.db.conn.close()

    # -- generic helpers ---------------------------------------------------------------
    def table(self, name: str) -> Table:
        """A table of state.db (`db[name]` is typed as a table or a view; state.db has no views)."""
        return self.db.table(name)

    def get(self, table: str, pk: Any) -> dict | None:
        try:
            with self._systemic_errors():
                return self.table(table).get(pk)
        except sqlite_utils.db.NotFoundError:
            return None

    def upsert(self, table: str, row: dict, pk: str) -> None:
        self.table(table).upsert(row, pk=pk, alter=False)

    def query(self, sql: str, params: Any = ()) -> list[dict]:
        with self._systemic_errors():
            return list(self.db.query(sql, params))

    # -- the ledger ----------------------------------------------------------------------
    def completed_call(self, request_hash: str) -> dict | None:
        # Plain SQL: every model call looks here first, and sqlite-utils' get() reads the table's
        # primary keys from the schema on each call.
        with self._systemic_errors():
            cursor = self.db.conn.execute(
                "SELECT * FROM calls WHERE hash = ? AND outcome = 'ok'", (request_hash,)
            )
            found = cursor.fetchone()
        return dict(zip([d[0] for d in cursor.description], found, strict=True)) if found else None

    def record_call(self, row: dict) -> None:
        """One statement, prepared once per row shape: the ledger write is on every model call's
        path, and sqlite-utils' upsert reads the table's schema each time (about 10× the cost)."""
        row = {**row, "created_at": row.get("created_at") or now()}
        columns = tuple(row)
        sql = self._ledger_sql.get(columns)
        if sql is None:
            names = ", ".join(f"[{c}]" for c in columns)
            updates = ", ".join(f"[{c}] = excluded.[{c}]" for c in columns if c != "hash")
            sql = (
                f"INSERT INTO calls ({names}) VALUES ({', '.join('?' * len(columns))}) "
                f"ON CONFLICT(hash) DO UPDATE SET {updates}"
            )
            self._ledger_sql[columns] = sql
        with self.atomic():
            self.db.conn.execute(sql, tuple(row.values()))

    def record_cache_hit(self, request_hash: str, role: str, saved_usd: float) -> None:
        with self.atomic():
            self.db.table("cache_hits").insert(
                {"hash": request_hash, "role": role, "saved_usd": saved_usd, "at": now()}
            )

    def spent_usd(self) -> float:
        row = self.query("select coalesce(sum(cost_usd), 0) as s from calls")[0]
        return float(row["s"])

    def ledger_summary(self) -> dict:
        calls = self.query(
            "select count(*) as n, coalesce(sum(cost_usd),0) as cost, "
            "coalesce(sum(input_tokens),0) as input_tokens, "
            "coalesce(sum(output_tokens),0) as output_tokens, "
            "coalesce(sum(cache_write_tokens),0) as cache_write_tokens, "
            "coalesce(sum(cache_read_tokens),0) as cache_read_tokens, "
            "coalesce(sum(attempts - 1),0) as retries from calls where outcome = 'ok'"
        )[0]
        hits = self.query(
            "select count(*) as n, coalesce(sum(saved_usd),0) as saved from cache_hits"
        )[0]
        return {**calls, "cache_hits": hits["n"], "saved_usd": hits["saved"]}

    # -- runs table ----------------------------------------------------------------------
    def run_row(self) -> dict | None:
        rows = self.query("select * from runs limit 1")
        return rows[0] if rows else None


@migrations()
def m002_best_and_scopes(db: sqlite_utils.Database) -> None:
    # The current best is a decision, not a derivation: with Pareto parents a winning child may
    # still score below the best, so the loop records it explicitly.
    db.table("runs").add_column("current_best", str)
    db.table("runs").add_column("test_json", str)
    db.table("runs").add_column("pid", int)
    db.table("runs").add_column("stage", str)
    db.table("runs").add_column("last_error", str)
    # Which version (or stage) a model call was made for, so lineage can show cost per version.
    db.table("calls").add_column("scope", str)
    db.table("versions").add_column("split_scores_json", str)


@migrations()
def m003_batches_and_estimate(db: sqlite_utils.Database) -> None:
    # Message Batches in flight (llm.batch): recorded as soon as the service acknowledges one, so
    # a resumed run re-attaches to it instead of paying for the same requests again. `items_json`
    # maps each custom_id (the ledger's request hash) to its role, model, sample and scope.
    db.table("batches").create(
        {
            "id": str,
            "scope": str,
            "roles": str,
            "custom_ids_json": str,
            "items_json": str,
            "status": str,
            "created_at": str,
            "ended_at": str,
            "counts_json": str,
        },
        pk="id",
    )
    db.table("batches").create_index(["status"])
    db.table("calls").add_column("batch_id", str)  # set when the answer came through a batch
    db.table("runs").add_column("estimate_json", str)  # the cost preview shown when the run started


@migrations()
def m004_calls_scope_index(db: sqlite_utils.Database) -> None:
    # lineage sums each version's cost by scope after every iteration; without the index that is
    # a scan of the whole ledger per version.
    db.table("calls").create_index(["scope"], if_not_exists=True)


@migrations()
def m005_version_errors(db: sqlite_utils.Database) -> None:
    # A failure of ours while one version was evaluated: recorded on it, the run goes on.
    db.table("versions").add_column("error", str)
    # Why a run is unscored (docs/design.md §7): its cause, shown in status and benchmark.json.
    db.table("gradings").add_column("error", str)


@migrations()
def m006_resumes(db: sqlite_utils.Database) -> None:
    # Each resume's effective settings and the keys it changed ({key: [before, after]}); the run's
    # settings_json is kept equal to the latest, so status shows the limits in force, not the
    # ones the run was started with.
    db.table("resumes").create(
        {"id": int, "at": str, "settings_json": str, "changed_json": str}, pk="id"
    )


@migrations()
def m007_drop_unused_columns(db: sqlite_utils.Database) -> None:
    # Never written: the daemon's pid lives in the run folder's pidfile (store/lock.py), and a
    # version's cost is summed from the ledger by scope (search/lineage.py).
    db.table("runs").transform(drop={"pid"})
    db.table("versions").transform(drop={"cost_usd"})


@migrations()
def m008_run_confinement(db: sqlite_utils.Database) -> None:
    # How each run's model-written commands were confined (1 under bubblewrap, 0 not) and by what
    # ("bwrap", "none" when the user opted out, "host" for the Claude Code CLI); null for runs
    # made before it was recorded. status, show and the report read it.
    db.table("eval_runs").add_column("confined", int)
    db.table("eval_runs").add_column("sandbox", str)


@migrations()
def m009_run_previews(db: sqlite_utils.Database) -> None:
    # What the report shows of each run (grade/preview.py), kept when the run is graded so that a
    # report reads state.db instead of every run folder. Runs graded before have no row; the
    # report reads their folders.
    db.table("previews").create({"key": str, "preview_json": str}, pk="key")


@migrations()
def m010_run_key_columns(db: sqlite_utils.Database) -> None:
    # A grading's run key as columns (store/keys.py), indexed, so that a version's scores and
    # failures are selected by column instead of matching key text. Older rows get their parts
    # from their keys, once, here; `optimizer execute` rows without an eval segment take theirs
    # from eval_runs.
    from optimizer.store.keys import RunKey

    gradings = db.table("gradings")
    for column, kind in (
        ("prefix", str),
        ("eval_id", int),
        ("configuration", str),
        ("run_number", int),
    ):
        gradings.add_column(column, kind)
    evals = {r["key"]: r["eval_id"] for r in db.query("select key, eval_id from eval_runs")}
    for row in list(db.query("select key from gradings")):
        try:
            parts = RunKey.parse(row["key"], evals.get(row["key"]))
        except ValueError:
            continue  # not a key this version wrote; left without parts, never selected
        gradings.update(row["key"], parts.columns())
    gradings.create_index(["prefix", "configuration", "eval_id", "run_number"])
