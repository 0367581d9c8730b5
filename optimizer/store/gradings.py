"""The gradings and previews tables of state.db: one grading per run (its status, score, pass
rate, the judge's grading and the structural checks) and what the report shows of it, as typed
reads and the one write that commits both. Runs are selected by their key's columns
(store/keys.py), never by matching key text; grading_json is parsed and checked on read."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

import orjson

from optimizer import schemas
from optimizer.schemas import JsonObject
from optimizer.store.db import Store
from optimizer.store.readonly import Reader, View
from optimizer.store.rows import (
    GradingRow,
    GradingStatus,
    Preview,
    Raw,
    ScoredTrial,
    TrialTokens,
    UnscoredKey,
    UnscoredTrial,
    json_object,
)

# The statuses whose score counts (docs/design.md §7); judge_error and unscored runs are counted
# and shown but never averaged.
SCORED = ("ok", "gated", "exec_error")
SCORED_SQL = "(" + ", ".join(f"'{s}'" for s in SCORED) + ")"

# A report's view of one run: grading.json's object, whether the gate passed, the kept preview
# (None where state.db holds none: the report reads the run's folder instead).
Committed = tuple[JsonObject | None, int | None, JsonObject | None]


def grading(raw: str) -> schemas.Grading:
    """grading_json, checked: an object, validated as the judge's grading.json."""
    return schemas.Grading.model_validate(json_object(raw, "gradings.grading_json"))


@dataclass(frozen=True)
class Graded:
    """One row of the gradings table as read, its JSON columns decoded and validated (None for a
    run left unscored, which was never graded)."""

    key: str
    eval_id: int
    configuration: str
    run_number: int
    status: GradingStatus
    score: float | None
    pass_rate: float | None
    rubric_normalized: float | None
    grading: schemas.Grading | None
    structural: schemas.Structural | None
    error: str | None

    @classmethod
    def from_row(cls, row: Raw) -> Graded:
        graded, checks = row.get("grading_json"), row.get("structural_json")
        return cls(
            key=str(row["key"]),
            eval_id=int(row["eval_id"]),
            configuration=str(row["configuration"]),
            run_number=int(row["run_number"]),
            status=row["status"],
            score=row.get("score"),
            pass_rate=row.get("pass_rate"),
            rubric_normalized=row.get("rubric_normalized"),
            grading=grading(graded) if graded else None,
            structural=schemas.Structural.model_validate(
                json_object(checks, "gradings.structural_json")
            )
            if checks
            else None,
            error=row.get("error"),
        )


def get(store: Store, key: str) -> Graded | None:
    """The run's grading, or None before it was graded."""
    found = store.query("select * from gradings where key = ?", [key])
    return Graded.from_row(found[0]) if found else None


def commit(store: Store, row: GradingRow, preview: Preview) -> None:
    """A run's grading and what the report shows of it, in one transaction."""
    with store.atomic():
        store.upsert("gradings", row, pk="key")
        store.upsert("previews", {"key": row["key"], "preview_json": json.dumps(preview)}, pk="key")


def under(db: Reader, prefix: str) -> list[Graded]:
    """Every grading under `prefix` (e.g. "v2/"), by (eval, configuration, run number)."""
    return [
        Graded.from_row(r)
        for r in db.query(
            "select * from gradings where prefix = ? order by eval_id, configuration, run_number",
            [prefix],
        )
    ]


def scored_with_skill(db: Reader, prefix: str) -> list[ScoredTrial]:
    """(eval_id, run_number, score, pass_rate) of the scored with_skill runs under `prefix`, by
    (eval, run number); unscored runs and judge errors are left out (docs/design.md §7)."""
    rows = db.query(
        "select eval_id, run_number, score, pass_rate from gradings where prefix = ? and "
        f"configuration = 'with_skill' and status in {SCORED_SQL} "
        "order by eval_id, run_number",
        [prefix],
    )
    return [
        {
            "eval_id": int(r["eval_id"]),
            "run_number": int(r["run_number"]),
            "score": r["score"],
            "pass_rate": float(r["pass_rate"]),
        }
        for r in rows
    ]


def scored_gradings(db: Reader, prefix: str, eval_id: int) -> list[tuple[int, schemas.Grading]]:
    """(run number, grading) of the scored with_skill runs of one eval under `prefix`, by run
    number."""
    rows = db.query(
        "select run_number, grading_json from gradings where prefix = ? and "
        "eval_id = ? and configuration = 'with_skill' and grading_json is not null "
        f"and status in {SCORED_SQL} order by run_number",
        [prefix, eval_id],
    )
    return [(r["run_number"], grading(r["grading_json"])) for r in rows]


def with_tokens(db: Reader, prefix: str) -> list[TrialTokens]:
    """(eval_id, run_number, tokens, pass_rate) of every with_skill run under `prefix`."""
    rows = db.query(
        "select g.eval_id, g.run_number, r.tokens, g.pass_rate from gradings g join trials r "
        "on r.key = g.key where g.prefix = ? and g.configuration = 'with_skill'",
        [prefix],
    )
    return [
        {
            "eval_id": int(r["eval_id"]),
            "run_number": int(r["run_number"]),
            "tokens": r["tokens"],
            "pass_rate": r["pass_rate"],
        }
        for r in rows
    ]


def unscored_runs(db: Reader) -> list[UnscoredTrial]:
    """(prefix, eval_id, run_number) of every unscored run, in that order."""
    rows = db.query(
        "select prefix, eval_id, run_number from gradings where "
        "status = 'unscored' order by prefix, eval_id, run_number"
    )
    return [
        {
            "prefix": str(r["prefix"]),
            "eval_id": int(r["eval_id"]),
            "run_number": int(r["run_number"]),
        }
        for r in rows
    ]


def unscored_keys(db: Reader) -> list[UnscoredKey]:
    """(key, error) of every unscored run, by key."""
    rows = db.query("select key, error from gradings where status = 'unscored' order by key")
    return [{"key": str(r["key"]), "error": r["error"]} for r in rows]


def all_gradings(db: Reader) -> list[schemas.Grading]:
    """Every grading the judge wrote, by run key."""
    return [
        grading(r["grading_json"])
        for r in db.query(
            "select grading_json from gradings where grading_json is not null order by key"
        )
    ]


def shown_under(db: View, rel: str) -> dict[str, Committed] | None:
    """Every run state.db holds under `rel` ({run key: (grading, gate, preview)}), in one query:
    keys are the run folders' paths, so this is a range of the primary key. None when state.db
    cannot be read."""
    try:  # a state.db from before previews were kept has no such table
        kept = db.conn.execute("select 1 from sqlite_master where name = 'previews'").fetchone()
        rows = db.conn.execute(
            "select r.key, g.grading_json, g.gate_passed, "
            + ("p.preview_json" if kept else "null")
            + " from trials r left join gradings g on g.key = r.key"
            + (" left join previews p on p.key = r.key" if kept else "")
            + " where r.key >= ? and r.key < ?",
            (f"{rel}/", f"{rel}0"),
        )
        return {
            key: (
                lenient_object(graded) if graded is not None else None,
                gate if graded is not None else None,
                lenient_object(view) if view is not None else None,
            )
            for key, graded, gate, view in rows
        }
    except sqlite3.Error:
        return None


def lenient_object(text: str | bytes) -> JsonObject:
    """A JSON object read for a page, {} when it is none: a page shows what it can. orjson first,
    as a report reads thousands of these."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and the json module reads (a lone surrogate, NaN)
            data = json.loads(text)
        except ValueError:
            return {}
    return data if isinstance(data, dict) else {}
