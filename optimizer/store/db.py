"""state.db, the source of truth of one run: the connection (migrated on open, store/migrations.py),
and small typed reads and writes.
Every JSON file of a workspace can be rebuilt from it; nothing else may hold state that matters."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlite_utils
from sqlite_utils.db import Table

from optimizer.errors import WorkFailed
from optimizer.store import ledger
from optimizer.store.migrations import migrations
from optimizer.store.rows import CallRow, Decoded, Raw, json_object


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


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


@dataclass(frozen=True)
class Completed:
    """An answered call of the ledger as its next caller replays it, the response decoded."""

    hash: str
    role: str
    cost_usd: float
    response: Decoded  # the Messages API's answer (model/ledger.answer_data)

    @classmethod
    def from_row(cls, row: Raw) -> Completed:
        return cls(
            hash=str(row["hash"]),
            role=str(row["role"]),
            cost_usd=float(row.get("cost_usd") or 0.0),
            response=json_object(row.get("response_json"), "calls.response_json"),
        )


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
            if not name and str(exc).startswith("Could not decode to UTF-8"):
                name = "SQLITE_CORRUPT"  # Python's text decoding met a damaged page's bytes
            why = _SYSTEMIC.get("_".join(name.split("_")[:2]))
            if why is None:
                raise
            raise WorkFailed(f"{self.path}: the run database {why} ({exc}).") from None

    def close(self) -> None:
        self.db.conn.close()

    # -- generic helpers, for the store's repositories: only the store issues SQL ----------
    def table(self, name: str) -> Table:
        """A table of state.db (`db[name]` is typed as a table or a view; state.db has no views)."""
        return self.db.table(name)

    def upsert(self, table: str, row: Raw, pk: str) -> None:
        self.table(table).upsert(dict(row), pk=pk, alter=False)

    def query(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        with self._systemic_errors():
            return list(self.db.query(sql, params))

    # -- the ledger ----------------------------------------------------------------------
    def completed_call(self, request_hash: str) -> Completed | None:
        # Plain SQL: every model call looks here first, and sqlite-utils' get() reads the table's
        # primary keys from the schema on each call.
        with self._systemic_errors():
            cursor = self.db.conn.execute(
                "SELECT * FROM calls WHERE hash = ? AND outcome = 'ok'", (request_hash,)
            )
            found = cursor.fetchone()
        if not found:
            return None
        return Completed.from_row(dict(zip([d[0] for d in cursor.description], found, strict=True)))

    def record_call(self, row: CallRow) -> None:
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
        return ledger.total_usd(self)
