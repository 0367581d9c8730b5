"""The one read-only way into a run's state.db, for everything that only looks (status, lineage,
the report, the review server, the daemon deciding whether a folder holds a run). Never migrates,
checkpoints or writes anything, so a daemon may be running."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import quote

from optimizer.store.errors import StoreError, reading


def connect(db_path: Path, *, live: bool = False, shared: bool = False) -> sqlite3.Connection:
    """A read-only connection whose rows read as mappings. A database nobody writes (`live` false
    and no -wal file) is opened immutable, so that not even the -wal and -shm files SQLite creates
    for a WAL reader appear in the run folder; pass live=True when a daemon may be writing.
    `shared`: used from several threads, one at a time (the caller holds a lock). StoreError when
    it cannot be opened."""
    with reading(db_path):
        return _connect(db_path, live=live, shared=shared)


def _connect(db_path: Path, *, live: bool, shared: bool) -> sqlite3.Connection:
    path = quote(str(Path(db_path).resolve()))
    quiet = not live and not Path(f"{db_path}-wal").exists()
    for mode in (["immutable=1"] if quiet else []) + ["mode=ro", "immutable=1"]:
        conn = sqlite3.connect(
            f"file:{path}?{mode}", uri=True, timeout=10, check_same_thread=not shared
        )
        conn.row_factory = sqlite3.Row
        try:
            conn.execute("select count(*) from sqlite_master").fetchone()
        except sqlite3.OperationalError:
            conn.close()  # e.g. no right to create the -shm file of someone else's run folder
            continue
        _today_names(conn)
        return conn
    raise sqlite3.OperationalError("unable to open the database read-only")


# Tables and columns migrations renamed (store/migrations.py m013-m015): (table, old table,
# old column, new column). A view never migrates, so an older state.db is read under today's
# names through temporary views, which SQLite looks up before the file's own tables.
RENAMED = (
    ("trials", "eval_runs", None, None),
    ("runs", None, "stage", "activity"),
    ("versions", None, "stage", "phase"),
    ("decisions", None, "stage", "phase"),
)


def _today_names(conn: sqlite3.Connection) -> None:
    tables = {
        r[0] for r in conn.execute("select name from main.sqlite_master where type = 'table'")
    }
    for table, old_table, old, new in RENAMED:
        if old_table is not None:
            if table not in tables and old_table in tables:
                conn.execute(f"create temp view {table} as select * from main.{old_table}")
            continue
        columns = {r[1] for r in conn.execute(f"pragma main.table_info({table})")}
        if old in columns and new not in columns:
            conn.execute(f"create temp view {table} as select *, {old} as {new} from main.{table}")


def rows(
    conn: sqlite3.Connection, sql: str, params: tuple[object, ...] = ()
) -> list[dict[str, Any]]:
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    except sqlite3.OperationalError:
        return []  # a table or column an older run folder does not have yet


class Reader(Protocol):
    """What the store's repositories read through: the writer's Store (db.py) or a read-only View.
    Rows come back as plain dicts, in the order the statement states."""

    def query(self, sql: str, params: Sequence[object] = ()) -> list[dict[str, Any]]: ...


class View:
    """state.db opened read-only (connect) for the repositories of the store: query() reads as
    rows() does, so a table or column an older run folder does not have yet reads as no rows."""

    def __init__(self, db_path: Path, *, live: bool = False) -> None:
        self.path = Path(db_path)
        self.conn = connect(db_path, live=live)

    def reading(self) -> AbstractContextManager[None]:
        """SQLite's errors of a statement on self.conn as one StoreError (errors.reading)."""
        return reading(self.path)

    def query(self, sql: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
        with self.reading():
            return rows(self.conn, sql, tuple(params))

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> View:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def count_runs(db_path: Path) -> int | None:
    """Rows in the runs table (0 also when there is no table yet), None when unreadable."""
    try:
        conn = connect(db_path)
    except StoreError:
        return None
    try:
        return int(conn.execute("select count(*) from runs").fetchone()[0])
    except sqlite3.OperationalError as exc:
        return 0 if "no such table" in str(exc) else None
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()


class Commits:
    """Whether anyone has committed to state.db since the last look, for a reader that keeps what
    it read (the review server): SQLite's data_version on one long-lived connection changes with
    every commit of another connection. A file's time and size do not: two commits within one tick
    of the file system's clock can leave both the same, and the reader would keep a stale copy."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._conn: sqlite3.Connection | None = None
        self._live = False

    def version(self) -> int | None:
        """A number that differs after any commit by another connection; None while unreadable.
        A run nobody writes (no -wal file) is watched immutable, so that watching it leaves no
        -wal or -shm file in its folder; once a writer appears the watch reopens live."""
        live = Path(f"{self.db_path}-wal").exists()
        try:
            if self._conn is None or live != self._live:
                if self._conn is not None:
                    self._conn.close()
                self._conn, self._live = connect(self.db_path, live=live, shared=True), live
            return int(self._conn.execute("pragma data_version").fetchone()[0])
        except (StoreError, sqlite3.Error):
            self._conn = None
            return None
