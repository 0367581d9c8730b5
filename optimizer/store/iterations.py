"""The iterations table of state.db: one row per iteration of the search (its parent, its stage,
the outcome of each proposal, when it started and finished), as typed reads and writes. The
outcomes (candidates_json) are parsed and checked on read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from optimizer.store.db import Store, now
from optimizer.store.errors import StoreError
from optimizer.store.readonly import Reader
from optimizer.store.rows import ProposalOutcome, json_object


@dataclass(frozen=True)
class Iteration:
    number: int
    parent: str  # every iteration begins from a parent (start)
    stage: str | None
    # The outcome of each proposal by its index as text ("0", "1", ...): {"label": vN},
    # {"duplicate": vM} or {"rejected": [...], "reasons": [...]}.
    candidates: dict[str, dict[str, Any]]
    started_at: str | None
    finished_at: str | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Iteration:
        return cls(
            number=int(row["number"]),
            parent=row["parent"],
            stage=row.get("stage"),
            candidates=candidates(row.get("candidates_json")),
            started_at=row.get("started_at"),
            finished_at=row.get("finished_at"),
        )


def candidates(raw: str | None) -> dict[str, dict[str, Any]]:
    """candidates_json, checked: an object of proposal outcomes, each an object."""
    made = json_object(raw, "iterations.candidates_json")
    if not all(isinstance(v, dict) for v in made.values()):
        raise StoreError(
            f"state.db: iterations.candidates_json is not an object of outcomes: {raw!r}"
        )
    return made


def all_of(db: Reader) -> list[Iteration]:
    """Every iteration, by number."""
    return [Iteration.from_row(r) for r in db.query("select * from iterations order by number")]


def finished(db: Reader) -> list[Iteration]:
    """The finished iterations, by number."""
    return [
        Iteration.from_row(r)
        for r in db.query("select * from iterations where finished_at is not null order by number")
    ]


def finished_count(db: Reader) -> int:
    rows = db.query("select count(*) as n from iterations where finished_at is not null")
    return int(rows[0]["n"] or 0) if rows else 0


def counts(db: Reader) -> tuple[int, int]:
    """(finished, begun) iterations."""
    rows = db.query("select count(finished_at) as done, count(*) as begun from iterations")
    return (rows[0]["done"], rows[0]["begun"]) if rows else (0, 0)


def get(store: Store, number: int) -> Iteration | None:
    found = store.query("select * from iterations where number = ?", [number])
    return Iteration.from_row(found[0]) if found else None


def open_number(db: Reader) -> int | None:
    """The first iteration begun and not finished (a resume continues it), or None."""
    rows = db.query(
        "select number from iterations where finished_at is null order by number limit 1"
    )
    return int(rows[0]["number"]) if rows else None


def last_number(db: Reader) -> int:
    """The highest iteration number begun, 0 before the first."""
    rows = db.query("select max(number) as n from iterations")
    return (rows[0]["n"] if rows else None) or 0


def times(db: Reader) -> list[tuple[str | None, str | None]]:
    """(started_at, finished_at) of the finished iterations, by number: the pace of the search."""
    return [
        (r["started_at"], r["finished_at"])
        for r in db.query(
            "select started_at, finished_at from iterations where finished_at is not null "
            "order by number"
        )
    ]


def start(store: Store, number: int, parent: str) -> Iteration:
    """Iteration `number` begins from `parent`, no proposal made yet."""
    row = {
        "number": number,
        "parent": parent,
        "stage": "propose",
        "candidates_json": "{}",
        "started_at": now(),
    }
    with store.atomic():
        store.table("iterations").insert(row)
    return Iteration.from_row(row)


def record_candidates(store: Store, number: int, made: Mapping[str, ProposalOutcome]) -> None:
    """The outcome of each proposal of the iteration so far."""
    with store.atomic():
        store.table("iterations").update(number, {"candidates_json": json.dumps(made)})


def finish(store: Store, number: int) -> None:
    with store.atomic():
        store.table("iterations").update(number, {"finished_at": now(), "stage": "done"})
