"""The model-call ledger of state.db (the calls and cache_hits tables), as read: what was spent in
all, per scope, per role, before the search and during its iterations. Every sum of money spent
is here once, for the writer's Store and a read-only View alike (readonly.Reader); the ledger's
writes are Store.record_call and record_cache_hit (db.py), on every model call's path."""

from __future__ import annotations

import math
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from optimizer.store import money
from optimizer.store.readonly import Reader, View
from optimizer.store.rows import (
    Answered,
    CacheHit,
    CallRow,
    LedgerSummary,
    LedgerTotals,
    PricedCall,
    Raw,
    RoleLongest,
)

TOTAL_SQL = "select coalesce(sum(cost_usd), 0) as usd from calls"

# What each ledger scope (a version label, a proposal, a stage) cost: the rows to read for it.
SPENT_SQL = "select scope, cost_usd from calls where cost_usd is not null"

# What the finished iterations cost, for the pace of spending: every call from the first
# proposal on, up to the end of the last finished iteration (times are whole seconds, so a call
# of the next iteration in that same second counts too; a pace, not an account).
ITERATIONS_SPENT_SQL = (
    "select coalesce(sum(cost_usd), 0) as usd from calls where cost_usd is not null "
    "and coalesce(scope, '') not like 'adoption %' "
    "and rowid >= (select min(rowid) from calls where scope like 'proposal %') "
    "and created_at <= (select max(finished_at) from iterations where finished_at is not null)"
)


def iterations_usd(db: Reader) -> float:
    """What the finished iterations cost (ITERATIONS_SPENT_SQL)."""
    rows = db.query(ITERATIONS_SPENT_SQL)
    return float(rows[0]["usd"]) if rows else 0.0


def total_usd(db: Reader) -> float:
    """Every call's cost, paid or failed: what the budget is measured against."""
    rows = db.query(TOTAL_SQL)
    return float(rows[0]["usd"]) if rows else 0.0


def spent_by_scope(calls: Iterable[Mapping[str, Any]]) -> dict[str | None, float]:
    """Dollars per scope over SPENT_SQL's rows, summed exactly (math.fsum): the rows come in the
    order the calls finished, and a float sum in that order could move the last digit, so the
    lineage, history.json and the report would disagree between two identical runs."""
    costs: dict[str | None, list[float]] = defaultdict(list)
    for c in calls:
        costs[c["scope"]].append(float(c["cost_usd"]))
    return {scope: math.fsum(v) for scope, v in costs.items()}


def by_scope(db: Reader) -> dict[str | None, float]:
    """Dollars per scope, summed exactly (spent_by_scope): the lineage's and the report's."""
    return spent_by_scope(db.query(SPENT_SQL))


def summed_by_scope(db: Reader) -> dict[str | None, float]:
    """Dollars per scope as SQLite sums them (group by scope): what the stop rules read for the
    search's spend (stops.from_ledger), kept as it was so that no plateau moves by a last digit."""
    return {
        r["scope"]: r["usd"]
        for r in db.query(
            "select scope, sum(cost_usd) as usd from calls where cost_usd is not null "
            "group by scope"
        )
    }


def scope_usd(db: Reader, scope: str) -> float:
    """What the calls of one scope cost."""
    row = db.query("select coalesce(sum(cost_usd), 0) as usd from calls where scope = ?", [scope])
    return float(row[0]["usd"]) if row else 0.0


def executor_grader_usd(db: Reader, scope: str) -> float:
    """What the executor and grader calls of one scope (a version's runs) cost."""
    return float(
        db.query(
            "select coalesce(sum(cost_usd), 0) as usd from calls where scope = ? "
            "and role in ('executor', 'grader')",
            [scope],
        )[0]["usd"]
    )


def in_iterations_usd(db: Reader) -> float:
    """What the finished iterations cost (ITERATIONS_SPENT_SQL), for the pace of spending."""
    rows = db.query(ITERATIONS_SPENT_SQL)
    return rows[0]["usd"] if rows else 0.0


def longest_by_role(db: Reader) -> list[RoleLongest]:
    """Per role, the longest answer in output tokens and how many answers were measured
    (role, longest, n): what a resumed run's client prices its next answers by."""
    rows = db.query(
        "select role, max(output_tokens) as longest, count(output_tokens) as n from calls "
        "where outcome = 'ok' group by role order by role"
    )
    return [{"role": str(r["role"]), "longest": r["longest"], "n": int(r["n"])} for r in rows]


def executor_answers(db: Reader, sample: int, scope: str | None) -> list[CallRow]:
    """The answered executor calls of one sample under one scope: what a remote run may replay."""
    rows = db.query(
        "select * from calls where outcome = 'ok' and role = 'executor' and sample = ? "
        "and scope is ? order by rowid",
        [sample, scope],
    )
    return [_call(r) for r in rows]


def all_calls(db: Reader) -> list[CallRow]:
    """Every row of the ledger, in the order it was recorded."""
    return [_call(r) for r in db.query("select * from calls order by rowid")]


def _call(r: Raw) -> CallRow:
    """A calls row as written (rows.CallRow), column by column: a missing one is a KeyError here,
    not a surprise where the row is recorded again."""
    return {
        "hash": r["hash"],
        "role": r["role"],
        "model": r["model"],
        "sample": r["sample"],
        "outcome": r["outcome"],
        "response_json": r["response_json"],
        "input_tokens": r["input_tokens"],
        "output_tokens": r["output_tokens"],
        "cache_write_tokens": r["cache_write_tokens"],
        "cache_read_tokens": r["cache_read_tokens"],
        "cost_usd": r["cost_usd"],
        "latency_ms": r["latency_ms"],
        "attempts": r["attempts"],
        "error": r["error"],
        "scope": r.get("scope"),
        "batch_id": r.get("batch_id"),
        "created_at": r["created_at"],
    }


def cache_hits(db: Reader) -> list[CacheHit]:
    """(hash, role, saved_usd) of every call served from the ledger."""
    rows = db.query("select hash, role, saved_usd from cache_hits order by rowid")
    return [
        {"hash": str(r["hash"]), "role": str(r["role"]), "saved_usd": r["saved_usd"]} for r in rows
    ]


def summary(db: Reader) -> LedgerSummary:
    """The answered calls' count, cost, tokens and retries, and the cache hits and their saving."""
    calls = db.query(
        "select count(*) as n, coalesce(sum(cost_usd),0) as cost, "
        "coalesce(sum(input_tokens),0) as input_tokens, "
        "coalesce(sum(output_tokens),0) as output_tokens, "
        "coalesce(sum(cache_write_tokens),0) as cache_write_tokens, "
        "coalesce(sum(cache_read_tokens),0) as cache_read_tokens, "
        "coalesce(sum(attempts - 1),0) as retries from calls where outcome = 'ok'"
    )[0]
    hits = db.query("select count(*) as n, coalesce(sum(saved_usd),0) as saved from cache_hits")[0]
    return {
        "n": int(calls["n"]),
        "cost": float(calls["cost"]),
        "input_tokens": int(calls["input_tokens"]),
        "output_tokens": int(calls["output_tokens"]),
        "cache_write_tokens": int(calls["cache_write_tokens"]),
        "cache_read_tokens": int(calls["cache_read_tokens"]),
        "retries": int(calls["retries"]),
        "cache_hits": int(hits["n"]),
        "saved_usd": float(hits["saved"]),
    }


def report_totals(db: Reader) -> LedgerTotals:
    """The ledger's numbers the views show, as SQLite returns them: answered calls and their
    cost, all spending, cache hits and what they saved, and what the finished iterations cost."""
    calls = db.query(
        "select count(*) as n, coalesce(sum(cost_usd), 0) as cost from calls where outcome = 'ok'"
    ) or [{"n": 0, "cost": 0.0}]
    hits = db.query(
        "select count(*) as n, coalesce(sum(saved_usd), 0) as saved from cache_hits"
    ) or [{"n": 0, "saved": 0.0}]
    total = db.query("select coalesce(sum(cost_usd), 0) as s from calls") or [{"s": 0.0}]
    in_iterations = db.query(ITERATIONS_SPENT_SQL) or [{"usd": 0.0}]
    return {
        "calls": calls[0]["n"],
        "calls_usd": calls[0]["cost"],
        "spent_usd": total[0]["s"],
        "budgeted_usd": money.account(db).budgeted_usd,
        "cache_hits": hits[0]["n"],
        "saved_usd": hits[0]["saved"],
        "iterations_usd": in_iterations[0]["usd"],
    }


def priced_calls(db: Reader) -> list[PricedCall]:
    """Every priced call (created_at, cost_usd, scope, role) in the order they were recorded."""
    rows = db.query(
        "select created_at, cost_usd, scope, role from calls "
        "where cost_usd is not null order by created_at, rowid"
    )
    return [
        {
            "created_at": r["created_at"],
            "cost_usd": float(r["cost_usd"]),
            "scope": r["scope"],
            "role": str(r["role"]),
        }
        for r in rows
    ]


def cumulative(db: View, points: int) -> list[list]:
    """Cumulative spend over time in at most `points` + 1 points, streamed from the ledger: a long
    run has 100,000 calls, and holding them all only to drop most costs 10s of MB. [] for an
    older run folder without the column."""
    where = "from calls where cost_usd is not null"
    with db.reading():
        try:
            dated = db.conn.execute(
                f"select count(*) {where} and created_at is not null and created_at != ''"
            ).fetchone()[0]
            rows = db.conn.execute(
                f"select created_at, cost_usd {where} order by created_at, rowid"
            )
            # keep the shape, drop points; the last one is the total
            keep = {int(i * dated / points) for i in range(points)} if dated > points else None
            total, series, k = 0.0, [], 0
            for at, cost in rows:
                total += cost or 0.0
                if at:
                    if keep is None or k in keep or k == dated - 1:
                        series.append([at, round(total, 6)])
                    k += 1
        except sqlite3.OperationalError:
            return []
    return series


def answered(db: View) -> Answered:
    """The answered calls (outcome ok): how many, their tokens, their cost, and how many came
    through a Message Batch (0 before batches were recorded)."""
    with db.reading():
        columns = {r[1] for r in db.conn.execute("pragma table_info(calls)")}
        batched = "sum(batch_id is not null)" if "batch_id" in columns else "0"
        found = db.conn.execute(
            "select count(*) as calls, coalesce(sum(input_tokens + output_tokens + "
            "cache_write_tokens + cache_read_tokens), 0) as tokens, coalesce(sum(cost_usd), 0) "
            f"as usd, {batched} as batched from calls where outcome = 'ok'"
        ).fetchone()
    calls, tokens, usd, batched_n = found
    return {"calls": int(calls), "tokens": int(tokens), "usd": float(usd), "batched": batched_n}


def setup_usd(db: View, total: float) -> float:
    """What the answered calls recorded before the first proposal cost (rows are numbered as
    written); `total` when no proposal was made yet."""
    with db.reading():
        first = db.conn.execute("select min(rowid) from calls where scope like 'proposal %'")
        at = first.fetchone()[0]
    return _answered_usd(db, "rowid < ?", [at]) if at is not None else total


def runs_usd(db: View) -> float:
    """What the answered executor and grader calls cost, all runs together."""
    return _answered_usd(db, "role in ('executor', 'grader')", [])


def _answered_usd(db: View, where: str, params: list[Any]) -> float:
    with db.reading():
        row = db.conn.execute(
            f"select coalesce(sum(cost_usd), 0) from calls where outcome = 'ok' and {where}", params
        ).fetchone()
    return float(row[0])
