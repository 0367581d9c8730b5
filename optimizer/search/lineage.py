"""The lineage of one run as read from state.db: versions, their scores and decisions, the
current best; and the two files other tools read (history.json, eval_feedback_aggregate.json).
Never decides anything: it renders what the loop recorded."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from optimizer import schemas
from optimizer.decide.keep import Probed
from optimizer.schemas import Json
from optimizer.store import adoptions, decisions, gradings, runs, versions
from optimizer.store.db import Store
from optimizer.store.files import Workspace, write_json
from optimizer.store.runs import Run

if TYPE_CHECKING:
    from optimizer.inputs.triggers import Query
    from optimizer.search.probe import ProbeMetrics
    from optimizer.store.decisions import DecisionRecord
    from optimizer.store.versions import Version


def current_best(store: Store) -> str:
    return (runs.row(store) or Run()).best


def history(store: Store, *, simulated: bool) -> schemas.History:
    """history.json in the seed 002 `iterations` form; decided versions only, plus our extras."""
    run = runs.row(store) or Run()
    best = run.best
    chosen = decisions.all_of(store)
    entries = []
    for v in versions.all_of(store):
        if v.decision is None:
            continue  # still being evaluated: it enters the file once decided
        d = chosen.get(v.label)
        sel = d.selection if d else {}
        entries.append(
            {
                "version": v.label,
                "parent": v.parent,
                "expectation_pass_rate": round(v.pass_rate or 0.0, 4),
                "grading_result": v.decision,
                "is_current_best": v.label == best,
                "overall_efficiency": None if v.score is None else round(v.score, 4),
                "delta": d.delta if d else None,
                "ci": [d.ci_low, d.ci_high] if d else None,
                "comparator": sel.get("comparator"),
                "decided_at_stage": v.phase,
                "reason": d.reason if d else None,
                "summary": v.summary,
                "iteration": v.iteration,
                "cost_usd": round(v.cost_usd, 6),
                "created_at": v.created_at,
                "step": _step(v.decision, sel) if v.parent else None,
            }
        )
    made = adoptions.all_of(store)
    data = {
        "started_at": run.started_at or "",
        "skill_name": run.skill_name or "",
        "current_best": best,
        "iterations": [
            {k: val for k, val in e.items() if val is not None or k == "parent"} for e in entries
        ],
        "simulated": simulated,
        "stop_reason": run.stop_reason or None,
        "test": run.test,
        "adopted": adoptions.adopted(store),
        "adoptions": [a.model_dump(mode="json") for a in made],
    }
    return schemas.History.model_validate({k: v for k, v in data.items() if v is not None})


def _step(decision: str, sel: dict) -> dict | None:
    """A step's evidence as the step had it: a move of the search, never a claim (§16)."""
    if not sel:
        return None
    return {
        "decision": decision,
        "delta": sel.get("delta"),
        "runs_per_eval": sel.get("runs_per_eval"),
        "evals": sel.get("evals"),
        "scope": sel.get("scope"),
        "alpha": sel.get("alpha"),
    }


# A split's metrics as a lineage entry lists them; an entry's own list starts at "f1".
_SHOWN = (
    "pass_rate",
    "precision",
    "recall",
    "f1",
    "ci",
    "queries",
    "probe_errors",
    "constant_signal",
)


@dataclass(frozen=True)
class _Probing:
    """How a description run's probes are scored: its queries by id, the query ids of each split
    (train, validation), and the bootstrap's samples and confidence from its selection settings."""

    queries: dict[int, Query]
    parts: dict[str, list[int]]
    samples: int
    confidence: float

    @classmethod
    def of(cls, run: Run) -> _Probing:
        """The run's split and its selection settings, with the defaults probe.metrics has."""
        from optimizer.inputs.triggers import Query

        split = run.split
        sel = run.settings.get("selection") or {}
        return cls(
            queries={q["id"]: Query(**q) for q in split.get("queries", [])},
            parts={"train": split.get("train", []), "validation": split.get("validation", [])},
            samples=sel.get("bootstrap_samples", 2000),
            confidence=sel.get("confidence", 0.95),
        )

    def metrics(self, outcomes: dict[int, dict[int, bool | None]], ids: list[int]) -> ProbeMetrics:
        """probe.metrics of one version's outcomes on the queries `ids`."""
        from optimizer.search import probe

        return probe.metrics(
            outcomes, self.queries, ids, samples=self.samples, confidence=self.confidence
        )


def history_versions(store: Store, ws: Workspace, *, simulated: bool) -> schemas.HistoryVersions:
    """history.json in the seed 001 `versions` form (description runs): per decided version its
    description and its trigger pass_rate, precision and recall over the train and validation
    queries together, plus our extras (per split, decision, F1, constant signal, probe errors)."""
    run = runs.row(store) or Run()
    split = run.split
    probing = _Probing.of(run)
    best, chosen = run.best, decisions.all_of(store)
    entries = []
    for v in versions.all_of(store):
        if v.decision is None:
            continue
        entries.append(_version_entry(store, ws, v, probing, chosen, best))
    data = {
        "versions": entries,
        "skill_name": run.skill_name or "",
        "started_at": run.started_at or "",
        "current_best": best,
        "target": "description",
        "split": {
            **{k: len(split.get(k, [])) for k in ("train", "validation", "test")},
            "note": split.get("note", ""),
        },
        "simulated": simulated,
        "stop_reason": run.stop_reason or None,
        "test": run.test,
    }
    return schemas.HistoryVersions.model_validate({k: v for k, v in data.items() if v is not None})


def _version_entry(
    store: Store,
    ws: Workspace,
    v: Version,
    probing: _Probing,
    chosen: dict[str, DecisionRecord],
    best: str,
) -> dict[str, Json]:
    """One decided version's entry: its description, its metrics over the train and validation
    queries together and per split, and its decision."""
    from optimizer.inputs.skillmd import parse_skill_md
    from optimizer.search import probe

    parts = probing.parts
    outcomes = probe.recorded(store, v.label)
    dev = probing.metrics(outcomes, parts["train"] + parts["validation"])
    d = chosen.get(v.label)
    text = (ws.skill(v.label) / "SKILL.md").read_text(encoding="utf-8")
    return {
        "description": parse_skill_md(text).description,
        "pass_rate": dev["pass_rate"] or 0.0,
        "precision": dev["precision"],
        "recall": dev["recall"],
        "iteration": v.iteration,
        "version": v.label,
        "parent": v.parent,
        "decision": v.decision,
        "is_current_best": v.label == best,
        **_picked(dev, _SHOWN[3:]),
        "missing_queries": dev["missing_queries"],
        "splits": {
            name: _picked(probing.metrics(outcomes, ids), _SHOWN) for name, ids in parts.items()
        },
        "delta": d.delta if d else None,
        "reason": d.reason if d else None,
        "summary": v.summary,
        "cost_usd": round(v.cost_usd, 6),
        "created_at": v.created_at,
    }


_WORD = re.compile(r"[a-z0-9]+")


def _reason_key(reason: str) -> str:
    # "Similar reason": the same leading content words, so rewordings by a noisy judge group.
    return " ".join([w for w in _WORD.findall(reason.lower()) if len(w) > 3][:6])


def _action(assertion: str | None, reason: str) -> str:
    lowered = reason.lower()
    if assertion is None:
        return "Add an expectation that checks this."
    if "vague" in lowered or "discriminat" in lowered or "would also pass" in lowered:
        return f"Make '{assertion}' specific enough that a wrong output fails it."
    return f"Revise '{assertion}' so that it checks what this names."


def feedback_aggregate(
    store: Store,
    *,
    skill_name: str,
    iteration: int,
    extra_notes: Sequence[tuple[str | None, str, str]] = (),
) -> schemas.EvalFeedbackAggregate:
    """Every eval_feedback suggestion of every grading, grouped, with analyst notes appended
    as (assertion, reason, action) triples."""
    groups: dict[tuple[str | None, str], list[str]] = defaultdict(list)
    total = 0
    # By key, and each group's reason by count then text: the file never depends on which run
    # finished first.
    for grading in gradings.all_gradings(store):
        total += 1
        for s in grading.eval_feedback.suggestions if grading.eval_feedback else []:
            assertion = s.assertion or None
            groups[(assertion, _reason_key(s.reason))].append(s.reason)
    suggestions: list[dict[str, Any]] = []
    for (assertion, _), reasons in groups.items():
        reason = min(Counter(reasons).items(), key=lambda kv: (-kv[1], kv[0]))[0]
        suggestions.append(
            {
                "frequency": len(reasons),
                "assertion": assertion,
                "reason": reason,
                "action": _action(assertion, reason),
            }
        )
    suggestions.sort(key=lambda s: (-s["frequency"], s["assertion"] or "", s["reason"]))
    for assertion, reason, action in extra_notes:
        suggestions.append(
            {
                "frequency": 1,
                "assertion": assertion,
                "reason": reason,
                "action": action,
                "source": "analyst",
            }
        )
    return schemas.EvalFeedbackAggregate.model_validate(
        {
            "skill_name": skill_name,
            "iteration": iteration,
            "total_runs": total,
            "suggestions": suggestions,
        }
    )


def write_files(
    ws: Workspace,
    store: Store,
    *,
    simulated: bool,
    skill_name: str,
    iteration: int,
    extra_notes: Sequence[tuple[str | None, str, str]] = (),
) -> None:
    if versions.any_decided(store):
        if (runs.row(store) or Run()).target == "description":
            write_json(ws.history, history_versions(store, ws, simulated=simulated))
        else:
            write_json(ws.history, history(store, simulated=simulated))
    write_json(
        ws.feedback_aggregate,
        feedback_aggregate(
            store, skill_name=skill_name, iteration=iteration, extra_notes=extra_notes
        ),
    )


def _picked(metrics: Probed, names: Sequence[str]) -> dict[str, Json]:
    """A split's metrics by the names a lineage entry lists (probe metrics hold JSON values)."""
    by_name = cast("Mapping[str, Json]", metrics)
    return {k: by_name[k] for k in names}
