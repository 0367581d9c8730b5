"""The adoptions table of state.db (migration m011): every statement that reads or writes it, as
typed methods over schemas.Adoption, whose row mapping lives here once. The adopted version is a
read of this table, never a column kept beside it, so the two cannot disagree."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from optimizer.decide import adopt as rule
from optimizer.schemas import Adoption, RuleDecision
from optimizer.store import ledger
from optimizer.store.db import Store, now
from optimizer.store.readonly import Reader


def _cost(store: Store, number: int) -> float:
    return ledger.scope_usd(store, scope(number))


def scope(number: int) -> str:
    """The ledger scope of adoption `number`'s calls: what its fresh runs cost is summed by it."""
    return f"adoption {number}"


def from_row(row: Mapping[str, Any], cost_usd: float) -> Adoption:
    """The row as the model, its JSON columns validated on read; the cost is the ledger's."""
    decision = json.loads(row["decision_json"] or "null")
    return Adoption(
        number=row["number"],
        version=row["version"],
        base=row["base"],
        scope=row["scope"],
        status=row["status"],
        evals=json.loads(row["evals_json"]),
        estimate_usd=row["estimate_usd"],
        cost_usd=cost_usd,
        decision=RuleDecision.model_validate(decision) if decision else None,
        next_step=row["next_step"] or "",
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


def from_rows(
    rows: Iterable[Mapping[str, Any]], spent: Mapping[str | None, float]
) -> list[Adoption]:
    """Rows of ROWS_SQL (a read-only view's), costs from the ledger's dollars per scope."""
    return [from_row(r, spent.get(scope(r["number"]), 0.0)) for r in rows]


ROWS_SQL = "select * from adoptions order by number"


def read(db: Reader, spent: Mapping[str | None, float]) -> list[Adoption]:
    """Every adoption, oldest first, through a read-only View (a run from before m011 reads no
    rows), the costs from the ledger's dollars per scope (ledger.by_scope)."""
    return from_rows(db.query(ROWS_SQL), spent)


def all_of(store: Store) -> list[Adoption]:
    """Every adoption, oldest first."""
    if "adoptions" not in store.db.table_names():  # a read-only view of a run from before m011
        return []
    return [from_row(r, _cost(store, r["number"])) for r in store.query(ROWS_SQL)]


def adopted(store: Store) -> str:
    """The version the user has now (decide/adopt.base_of)."""
    return rule.base_of(all_of(store))


@dataclass(frozen=True)
class Kept:
    """What a claim was opened with and has spent (m012): its looks (first and most fresh runs an
    eval), its α, and the fresh runs an eval of the last look it took (0 before the first)."""

    first_runs: int
    max_runs: int
    alpha: float
    looked: int


def claim_of(store: Store, version: str, base: str, scope_: str) -> Adoption | None:
    """The latest adoption of this claim (the same version against the same base, same scope)
    that certified nothing, running or finished: asking again spends from it, never anew."""
    for row in store.query(
        "select * from adoptions where status != 'certified' and version = ? and base = ? "
        "and scope = ? order by number desc limit 1",
        [version, base, scope_],
    ):
        return from_row(row, _cost(store, row["number"]))
    return None


def kept(store: Store, number: int, default: Kept) -> Kept:
    """Adoption `number`'s recorded schedule, α and last look; `default`'s for what a row from
    before m012 lacks (its last look: the decision's runs an eval, if it decided)."""
    (row,) = store.query("select * from adoptions where number = ?", [number])
    looked = row.get("looked")
    if looked is None:
        decision = json.loads(row["decision_json"] or "null")
        looked = decision["runs_per_eval"] if decision else 0
    alpha = row.get("alpha")
    return Kept(
        row.get("first_runs") or default.first_runs,
        row.get("max_runs") or default.max_runs,
        default.alpha if alpha is None else float(alpha),
        looked,
    )


def next_number(store: Store) -> int:
    return int(store.query("select coalesce(max(number), 0) as n from adoptions")[0]["n"]) + 1


def open_for(
    store: Store,
    version: str,
    base: str,
    scope_: str,
    evals: list[int],
    estimate_usd: float,
    schedule: Kept,
) -> Adoption:
    """The adoption of this very claim that certified nothing, reopened (a resume after a kill, or
    the user asking again: its fresh runs are in the ledger, so nothing is paid twice, and its α
    is the one it was opened with), else a new one numbered after the last, its schedule and α
    recorded."""
    found = claim_of(store, version, base, scope_)
    if found is not None:
        if found.status != "running":
            with store.atomic():
                store.table("adoptions").update(
                    found.number, {"status": "running", "finished_at": None}
                )
        (row,) = store.query("select * from adoptions where number = ?", [found.number])
        return from_row(row, _cost(store, found.number))
    row = {
        "number": next_number(store),
        "version": version,
        "base": base,
        "scope": scope_,
        "status": "running",
        "evals_json": json.dumps(evals),
        "estimate_usd": estimate_usd,
        "decision_json": None,
        "next_step": "",
        "started_at": now(),
        "finished_at": None,
        "first_runs": schedule.first_runs,
        "max_runs": schedule.max_runs,
        "alpha": schedule.alpha,
        "looked": 0,
    }
    with store.atomic():
        store.table("adoptions").insert(row)
    return from_row(row, 0.0)


def looked(store: Store, number: int, runs: int) -> None:
    """Adoption `number` took its look at `runs` fresh runs an eval: the α of every look up to it
    is spent, and asking again goes on from the next."""
    with store.atomic():
        store.table("adoptions").update(number, {"looked": runs})


def finish(store: Store, number: int, decision: RuleDecision, next_step: str) -> Adoption:
    status = "certified" if decision.decision == "won" else "not certified"
    with store.atomic():
        store.table("adoptions").update(
            number,
            {
                "status": status,
                "decision_json": decision.model_dump_json(),
                "next_step": next_step,
                "finished_at": now(),
            },
        )
    (row,) = store.query("select * from adoptions where number = ?", [number])  # just written
    return from_row(row, _cost(store, number))


def per_run_usd(store: Reader, label: str = "v0") -> float | None:
    """What one run of `label` on a train eval cost (its executor and grader calls), measured: the
    price of every fresh run an estimate counts. None before the version ran."""
    spent = ledger.executor_grader_usd(store, label)
    runs = store.query(
        "select count(*) as n from gradings g join trials r on r.key = g.key "
        "where g.prefix = ? and g.configuration = 'with_skill' and r.split = 'train'",
        [f"{label}/"],
    )[0]["n"]
    return spent / runs if runs else None
