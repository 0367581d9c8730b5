"""The versions table of state.db: every version of the skill a run made (its parent, iteration,
decision, scores), as typed reads and writes. A version's cost is never a column: it is the
ledger's sum over the version's scope (ledger.by_scope)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from optimizer.store import ledger
from optimizer.store.db import Store, now
from optimizer.store.readonly import Reader
from optimizer.store.rows import Raw, json_object


@dataclass(frozen=True)
class DecisionNumbers:
    """What the stop rules read of a version's decision (decisions.selection_json's interval
    confidence, evals and scope, with the row's Δ and interval)."""

    delta: float | None
    low: float | None
    high: float | None
    confidence: float | None
    evals: int | None
    scope: str | None


@dataclass(frozen=True)
class Version:
    """One row of the versions table, its JSON column decoded: the one shape of a version."""

    label: str
    hash: str
    parent: str | None
    iteration: int  # 0 for v0
    created_at: str
    status: str | None
    decision: str | None
    phase: str | None
    summary: str
    rationale: str
    score: float | None
    pass_rate: float | None
    per_eval: dict[int, float]  # split_scores_json: the mean score per train eval (or per query)
    error: str | None
    # Not columns: what the version's ledger scope cost (all_of), its decision's numbers (outcomes).
    cost_usd: float = 0.0
    decided: DecisionNumbers | None = None

    @classmethod
    def from_row(cls, row: Raw) -> Version:
        return cls(
            label=str(row["label"]),
            hash=str(row.get("hash") or ""),
            parent=row.get("parent") or None,
            iteration=int(row.get("iteration") or 0),
            created_at=row.get("created_at") or "",
            status=row.get("status"),
            decision=row.get("decision"),
            phase=row.get("phase"),
            summary=row.get("summary") or "",
            rationale=row.get("rationale") or "",
            score=row.get("score"),
            pass_rate=row.get("pass_rate"),
            per_eval=_per_eval(row["label"], row.get("split_scores_json")),
            error=row.get("error"),
        )


def _per_eval(label: str, raw: str | None) -> dict[int, float]:
    scores = json_object(raw, f"versions.split_scores_json of {label}")
    return {int(k): v for k, v in scores.items()}


def all_of(db: Reader) -> list[Version]:
    """Every version in the order it was registered, with what its scope cost."""
    spent = ledger.by_scope(db)
    return [
        replace(v, cost_usd=spent.get(v.label, 0.0))
        for v in map(Version.from_row, db.query("select * from versions order by rowid"))
    ]


def outcomes(db: Reader) -> list[Version]:
    """Every version with its decision's Δ, interval and what the interval's width rests on
    (`decided`, None when undecided): what the stop rules read."""
    found = db.query(
        "select v.*, d.version as decided, d.delta, d.ci_low as low, d.ci_high as high, "
        "json_extract(d.selection_json, '$.interval.confidence') as confidence, "
        "json_extract(d.selection_json, '$.evals') as evals, "
        "json_extract(d.selection_json, '$.scope') as scope "
        "from versions v left join decisions d on d.version = v.label order by v.rowid"
    )
    return [replace(Version.from_row(r), decided=_numbers(r)) for r in found]


def _numbers(row: Raw) -> DecisionNumbers | None:
    if row.get("decided") is None:
        return None
    evals = row.get("evals")
    return DecisionNumbers(
        delta=row.get("delta"),
        low=row.get("low"),
        high=row.get("high"),
        confidence=row.get("confidence"),
        evals=int(evals) if evals is not None else None,
        scope=row.get("scope"),
    )


def find(db: Reader, label: str) -> Version | None:
    """The version, or None when the run has no such version."""
    found = db.query("select * from versions where label = ?", [label])
    return Version.from_row(found[0]) if found else None


def score(store: Store, label: str) -> float | None:
    version = find(store, label)
    return version.score if version else None


def decision(store: Store, label: str) -> str | None:
    version = find(store, label)
    return version.decision if version else None


def per_eval(store: Store, label: str) -> dict[int, float]:
    """The version's mean score per train eval (or per query), as its target recorded it."""
    version = find(store, label)
    return version.per_eval if version else {}


def by_hash(store: Store, digest: str) -> Version | None:
    """The version whose skill folder has this content hash."""
    same = store.query("select * from versions where hash = ? order by rowid limit 1", [digest])
    return Version.from_row(same[0]) if same else None


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


def mark_baseline(store: Store, phase: str) -> None:
    """v0 enters the lineage as the baseline every child is measured against, once."""
    if decision(store, "v0") is None:
        with store.atomic():
            store.table("versions").update(
                "v0", {"decision": "baseline", "phase": phase, "status": "evaluated"}
            )


def mark_failed(store: Store, label: str, error: str) -> None:
    """A failure of ours while the version was judged: recorded on it, undecided."""
    with store.atomic():
        store.table("versions").update(label, {"status": "failed", "error": error})
