"""The versions table of state.db: every version of the skill a run made (its parent, iteration,
decision, scores), as typed reads and writes."""

from __future__ import annotations

from typing import Any

from optimizer.store.readonly import Reader


def outcomes(db: Reader) -> list[dict[str, Any]]:
    """(label, parent, iteration, decision, score) of every version: what the stop rules read."""
    return db.query("select label, parent, iteration, decision, score from versions")
