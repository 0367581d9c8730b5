"""The versions table of state.db: every version of the skill a run made (its parent, iteration,
decision, scores), as typed reads and writes. A version's cost is never a column: it is the
ledger's sum over the version's scope (ledger.by_scope)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

from optimizer.store import ledger
from optimizer.store.db import Store, now
from optimizer.store.readonly import Reader
from optimizer.store.rows import VersionOrigin, VersionOutcome, VersionRow


@dataclass
class Version:
    label: str
    hash: str
    parent: str | None
    iteration: int
    decision: str | None
    stage: str | None
    summary: str
    score: float | None
    pass_rate: float | None
    cost_usd: float
    created_at: str


def all_of(db: Reader) -> list[Version]:
    """Every version in the order it was registered, with what its scope cost."""
    spent = ledger.by_scope(db)
    return [
        Version(
            r["label"],
            r["hash"],
            r["parent"] or None,
            r["iteration"] or 0,
            r["decision"],
            r["stage"],
            r["summary"] or "",
            r["score"],
            r["pass_rate"],
            spent.get(r["label"], 0.0),
            r["created_at"] or "",
        )
        for r in rows(db)
    ]


def rows(db: Reader) -> list[VersionRow]:
    """Every version's row, in the order it was registered."""
    return cast(list[VersionRow], db.query("select * from versions order by rowid"))


def outcomes(db: Reader) -> list[VersionOutcome]:
    """(label, parent, iteration, decision, score) of every version, with its decision's Δ, interval
    and what the interval's width rests on: what the stop rules read."""
    return cast(
        list[VersionOutcome],
        db.query(
            "select v.label, v.parent, v.iteration, v.decision, v.score, d.delta, "
            "d.ci_low as low, d.ci_high as high, "
            "json_extract(d.selection_json, '$.interval.confidence') as confidence, "
            "json_extract(d.selection_json, '$.evals') as evals, "
            "json_extract(d.selection_json, '$.scope') as scope, "
            "v.split_scores_json as per_eval "
            "from versions v left join decisions d on d.version = v.label"
        ),
    )


def find(store: Store, label: str) -> VersionRow | None:
    """The version's row, or None when the run has no such version."""
    found = store.query("select * from versions where label = ?", [label])
    return cast(VersionRow, found[0]) if found else None


def score(store: Store, label: str) -> float | None:
    row = find(store, label)
    return row["score"] if row else None


def decision(store: Store, label: str) -> str | None:
    row = find(store, label)
    return row["decision"] if row else None


def per_eval(store: Store, label: str) -> dict[int, float]:
    """The version's mean score per train eval (or per query), as its target recorded it."""
    row = find(store, label)
    raw = row["split_scores_json"] if row else None
    scores = json.loads(raw) if raw else {}
    if not isinstance(scores, dict):
        raise ValueError(f"versions.split_scores_json of {label} is not an object: {raw!r}")
    return {int(k): v for k, v in scores.items()}


def by_hash(store: Store, digest: str) -> VersionOrigin | None:
    """(label, parent, iteration) of the version whose skill folder has this content hash."""
    same = store.query("select label, parent, iteration from versions where hash = ?", [digest])
    return cast(VersionOrigin, same[0]) if same else None


def count(store: Store) -> int:
    return store.table("versions").count


def any_decided(db: Reader) -> bool:
    return bool(db.query("select 1 from versions where decision is not null limit 1"))


def decided_children(db: Reader, parent: str) -> list[str]:
    """The labels of the parent's decided children, the latest first."""
    return [
        r["label"]
        for r in db.query(
            "select label from versions where parent = ? and decision is not null "
            "order by rowid desc",
            [parent],
        )
    ]


def lost_children(db: Reader, parent: str) -> list[tuple[str, str]]:
    """(summary, the decision's reason) of the parent's children that lost or tied, in order."""
    return [
        (r["summary"], r["reason"])
        for r in db.query(
            "select v.summary, d.reason from versions v join decisions d on d.version = v.label "
            "where v.parent = ? and v.decision in ('lost', 'tie') order by v.rowid",
            [parent],
        )
    ]


def register(
    store: Store,
    label: str,
    *,
    digest: str,
    parent: str,
    iteration: int,
    summary: str,
    rationale: str,
) -> None:
    """A proposed version, undecided."""
    with store.atomic():
        store.table("versions").insert(
            {
                "label": label,
                "hash": digest,
                "parent": parent,
                "iteration": iteration,
                "created_at": now(),
                "status": "proposed",
                "summary": summary,
                "rationale": rationale,
            }
        )


def record_scores(
    store: Store,
    label: str,
    *,
    score: float | None,
    pass_rate: float | None,
    per_eval: dict[Any, float],
) -> None:
    """The version's score, pass rate and per-eval (or per-query) scores, as its target made them."""
    with store.atomic():
        store.table("versions").update(
            label,
            {"score": score, "pass_rate": pass_rate, "split_scores_json": json.dumps(per_eval)},
        )


def mark_baseline(store: Store, stage: str) -> None:
    """v0 enters the lineage as the baseline every child is measured against, once."""
    if decision(store, "v0") is None:
        with store.atomic():
            store.table("versions").update(
                "v0", {"decision": "baseline", "stage": stage, "status": "evaluated"}
            )


def mark_failed(store: Store, label: str, error: str) -> None:
    """A failure of ours while the version was judged: recorded on it, undecided."""
    with store.atomic():
        store.table("versions").update(label, {"status": "failed", "error": error})
