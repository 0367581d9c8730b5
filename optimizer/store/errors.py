"""StoreError: what a caller outside the store catches when state.db cannot be read. SQLite's own
exceptions never leave optimizer/store, so no other module imports sqlite3."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from optimizer.errors import WorkFailed


class StoreError(WorkFailed):
    """state.db cannot be opened or read (damaged, not a database, no right to read it). A
    systemic failure (exit 1) unless the caller says it in its own words, as a view does."""

    def naming(self, path: Path) -> list[str]:
        """Its sentences with the database's path for a bare "state.db": a record's decoder does
        not know which run folder it reads."""
        bare = "state.db:"
        return [f"{path}:{p[len(bare) :]}" if p.startswith(bare) else p for p in self.problems]


@contextmanager
def reading(path: Path | str) -> Iterator[None]:
    """SQLite's errors inside the block as one StoreError naming the database."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a readable run database ({exc}).") from None
