"""Where the pool's versions stand (decide/pool.py), read from the ledger: which version is the
current best and which one the next iteration steps from, under loop.parent_selection = "pool"."""

from __future__ import annotations

import random

from optimizer.decide import pool
from optimizer.store import gradings, versions
from optimizer.store.db import Store


def estimates(
    store: Store, won: str | None = None, *, every: bool = False
) -> dict[str, pool.Estimate]:
    """The pool (v0 and its children that won, in the order they were registered) with each
    member's estimate; `won` counts as won before its decision is recorded. Every version decided
    in v0's phase (on the full train evals: a screened-out child is not) serves the noise and the
    prior; the runs are those its train score is over. `every`: each of those is a member too,
    won, tied or lost (GEPA's pool of candidates)."""
    rows = versions.all_of(store)
    phase = next((v.phase for v in rows if v.label == "v0"), None)
    read = []
    for v in rows:
        if v.label != won and (v.phase != phase or not v.decision):
            continue
        runs: dict[int, list[float]] = {}
        for row in gradings.scored_with_skill(store, f"{v.label}/"):
            if row["eval_id"] in v.per_eval and row["score"] is not None:
                runs.setdefault(row["eval_id"], []).append(row["score"])
        member = every or v.label == "v0" or v.decision == "won" or v.label == won
        read.append(pool.Version(v.label, v.parent, runs, member, v.label != "v0"))
    return pool.estimates(read)


def best(store: Store, won: str | None = None, *, every: bool = False) -> str:
    return pool.best(estimates(store, won, every=every))


def parent(store: Store, rng: random.Random, *, every: bool = False) -> str:
    return pool.draw(estimates(store, every=every), rng)
