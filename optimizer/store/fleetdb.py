"""fleet.db, the record of a fleet's nights and choices: which member each next step went to, and
why (every member's expected gain a dollar at that moment), and which members' own stop rules
ended their search in the night under way. The choice itself is a pure function of the members'
ledgers (fleet/allocate.py), so a resumed fleet makes it again from them; a member the night had
finished stays finished when a kill interrupted the night (its resume alone would search again,
as a resumed run does after a plateau). Each row is written before the step it names starts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from optimizer.store import readonly
from optimizer.store.db import now

FLEET_DB = "fleet.db"


@dataclass(frozen=True)
class Step:
    n: int  # the fleet's step, from 1
    member: str  # the member's folder name
    iteration: int  # the member's iteration the step is
    why: str  # the sentence the console printed
    expected: dict[str, float | None]  # per member: expected gain a dollar (None: first look)
    at: str


TABLES: dict[str, tuple[dict[str, type], str | tuple[str, ...]]] = {
    "nights": ({"n": int, "started_at": str, "finished_at": str}, "n"),
    "done": ({"night": int, "member": str, "reason": str}, ("night", "member")),
    "counts_from": ({"night": int, "member": str, "iteration": int}, ("night", "member")),
    "steps": (
        {"n": int, "member": str, "iteration": int, "why": str, "expected_json": str, "at": str},
        "n",
    ),
}


def _db(fleet_dir: Path) -> sqlite_utils.Database:
    db = sqlite_utils.Database(fleet_dir / FLEET_DB)
    db.conn.execute("pragma journal_mode=wal")
    have = set(db.table_names())
    for name, (columns, pk) in TABLES.items():
        if name not in have:
            db.table(name).create(columns, pk=pk)
    return db


def record(
    fleet_dir: Path, member: str, iteration: int, why: str, expected: dict[str, float | None]
) -> None:
    """One more step; a step already recorded for the member's same iteration (a resume going
    on with an iteration a kill left open) is not recorded twice."""
    db = _db(fleet_dir)
    try:
        last = list(db.query("select member, iteration from steps order by n desc limit 1"))
        if last and (last[0]["member"], last[0]["iteration"]) == (member, iteration):
            return
        n = int(next(db.query("select coalesce(max(n), 0) as n from steps"))["n"]) + 1
        with db.conn:
            db.table("steps").insert(
                {
                    "n": n,
                    "member": member,
                    "iteration": iteration,
                    "why": why,
                    "expected_json": json.dumps(expected, sort_keys=True),
                    "at": now(),
                }
            )
    finally:
        db.close()


def steps(fleet_dir: Path) -> list[Step]:
    """Every step, in order; none for a fleet that made none (or has no fleet.db yet)."""
    path = fleet_dir / FLEET_DB
    if not path.is_file():
        return []
    # Read-only, as every view reads: a view never writes, nor waits on, the daemon's database.
    conn = readonly.connect(path, live=True)
    try:
        if not conn.execute("select 1 from sqlite_master where name = 'steps'").fetchone():
            return []
        return [
            Step(
                int(r["n"]),
                str(r["member"]),
                int(r["iteration"]),
                str(r["why"]),
                json.loads(r["expected_json"] or "{}"),
                str(r["at"]),
            )
            for r in conn.execute("select * from steps order by n")
        ]
    finally:
        conn.close()


def night(fleet_dir: Path) -> tuple[int, bool]:
    """The night under way and whether it is new: the last one while it has not finished (a kill
    interrupted it), else a new one."""
    db = _db(fleet_dir)
    try:
        last = list(db.query("select n, finished_at from nights order by n desc limit 1"))
        if last and not last[0]["finished_at"]:
            return int(last[0]["n"]), False
        n = int(last[0]["n"]) + 1 if last else 1
        with db.conn:
            db.table("nights").insert({"n": n, "started_at": now(), "finished_at": None})
        return n, True
    finally:
        db.close()


def close_night(fleet_dir: Path) -> None:
    """The night under way ends here without finishing (a resume with a new budget or deadline
    after a kill): the next night starts afresh, its members' searches too."""
    db = _db(fleet_dir)
    try:
        with db.conn:
            db.conn.execute("update nights set finished_at = ? where finished_at is null", [now()])
    finally:
        db.close()


def finish_night(fleet_dir: Path, n: int) -> None:
    db = _db(fleet_dir)
    try:
        with db.conn:
            db.table("nights").update(n, {"finished_at": now()})
    finally:
        db.close()


def mark_done(fleet_dir: Path, n: int, member: str, reason: str) -> None:
    """The member's own stop rule ended its search in night n."""
    db = _db(fleet_dir)
    try:
        with db.conn:
            db.table("done").insert({"night": n, "member": member, "reason": reason}, replace=True)
    finally:
        db.close()


def done(fleet_dir: Path, n: int) -> dict[str, str]:
    """The members whose search ended in night n, and why."""
    db = _db(fleet_dir)
    try:
        return {
            str(r["member"]): str(r["reason"])
            for r in db.query(
                "select member, reason from done where night = ? order by member", [n]
            )
        }
    finally:
        db.close()


def counts_from(fleet_dir: Path, n: int, member: str, default: int) -> int:
    """Where the member's stop rules count from in night n (RunState.plateau_from): `default`,
    recorded, the first time the night asks; what was recorded, on a resume of the same night."""
    db = _db(fleet_dir)
    try:
        rows = list(
            db.query(
                "select iteration from counts_from where night = ? and member = ?", [n, member]
            )
        )
        if rows:
            return int(rows[0]["iteration"])
        with db.conn:
            db.table("counts_from").insert({"night": n, "member": member, "iteration": default})
        return default
    finally:
        db.close()
