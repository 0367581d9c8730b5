"""The runs table of state.db: the one row of the run (its skill, split, settings, status, current
best, sealed test and estimate), read through a Store or a read-only View and written through
typed methods. The row is keyed by the run folder's name (store/workspace.py)."""

from __future__ import annotations

from typing import Any

from optimizer.store.readonly import Reader


def row(db: Reader) -> dict[str, Any] | None:
    """The run's one row, or None when there is none yet."""
    found = db.query("select * from runs limit 1")
    return found[0] if found else None
