"""Whether a night keeps a child (docs/design.md §8): the one home of that decision. A target drives
it and never decides itself:

- the body target runs what `plan` asks (each eval's runs for the next look), asks the step rule
  (step.py) at that look and hands the rule's decision back to `plan`, until `plan` gives the
  verdict instead of a next look;
- `promotes` says whether a child that won becomes the current best;
- `queries` is the description target's rule: the body's step rule with the trigger queries as
  the evals and their probes as the runs, in one look, worded for queries (words.QUERY_WORDING).

The cheap screen before the first look is screen.py; which evals get the added runs, allot.py.
Pure functions of their inputs and a seeded random.Random: no files, clocks or globals."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypedDict

from optimizer import words
from optimizer.config import Selection
from optimizer.decide import allot, step
from optimizer.decide.comparison import Asked, E, Measured
from optimizer.schemas import AddedRuns, Json, RuleDecision

_EPS = 1e-12


@dataclass(frozen=True)
class Looking(Generic[E]):
    """Where a step's looks stand: the look's runs per eval (the loop's count, the rule's schedule
    numbers it), each eval's runs asked so far (allot.py may give some evals fewer) and the runs
    each earlier undecided look added."""

    runs: int
    counts: Mapping[E, int]
    added: tuple[allot.Allotment[E], ...] = ()


def first_look(evals: Sequence[E], runs: int) -> Looking[E]:
    """The first look: every eval at the step's first runs."""
    return Looking(runs, dict.fromkeys(evals, runs))


def plan(
    looking: Looking[E],
    decision: RuleDecision,
    child: Mapping[E, list[float]],
    parent: Mapping[E, list[float]],
    selection: Selection,
) -> Looking[E] | RuleDecision:
    """After the step rule's decision at a look: the next look to run (each eval up to its count,
    then ask the rule again) when the rule wants more runs and the cap allows them (the rule's
    next look, else one more run; allot.py chooses the evals that get them); else the verdict,
    with the runs it rests on said. A look that wants runs no eval could gain from ends the step
    with the decision it had."""
    if not (decision.needs_more_runs and looking.runs < selection.max_runs_per_eval):
        return _said(decision, looking)
    upto = decision.next_runs or looking.runs + 1
    more = allot.allot(
        child,
        parent,
        looking.counts,
        look=looking.runs,
        mode=selection.runs_to,
        share=selection.runs_share,
        to_runs=upto,
    )
    if not more.to:
        return _said(allot.nothing_to_add(decision), looking)
    return Looking(upto, {**looking.counts, **more.to}, (*looking.added, more))


def _said(decision: RuleDecision, looking: Looking[E]) -> RuleDecision:
    """The verdict with what its looks added: the evals that ran fewer times and why, and each
    look's added runs as selection.json keeps them."""
    return decision.model_copy(
        update={
            "reason": decision.reason + allot.uneven_note(looking.counts, list(looking.added)),
            "added_runs": [AddedRuns.model_validate(a.as_json()) for a in looking.added],
        }
    )


def promotes(verdict: str, parent: str, best: str, child_score: float, best_score: float) -> bool:
    """A child that won becomes the current best when its parent is the best, or when its train
    score is above the best's (under Pareto parent selection a child of another version can win
    its step and still score below the best)."""
    return verdict == "won" and (parent == best or child_score > best_score)


class QueryProbes(TypedDict, total=False):
    """One query's probes (search/probe.metrics): the share that fired over its probes and
    whether it should fire; a caller with pass/fail only gives `passed`, one probe."""

    rate: float
    runs: int
    passed: bool
    should_trigger: bool


class Probed(TypedDict):
    """What the rule reads of a description's probe metrics on a split (search/probe.metrics)."""

    pass_rate: float | None
    precision: float | None
    recall: float | None
    f1: float | None
    constant_signal: str | bool
    per_query: Mapping[str, QueryProbes]


def _side(metrics: Probed) -> dict[str, Json]:
    """The side's metrics as selection.json keeps them (schemas.TriggerSide)."""
    return {
        "pass_rate": metrics["pass_rate"],
        "precision": metrics["precision"],
        "recall": metrics["recall"],
        "f1": metrics["f1"],
        "constant_signal": metrics["constant_signal"],
    }


def queries(
    child: Probed,
    parent: Probed,
    child_dev: float | None,
    parent_dev: float | None,
    *,
    selection: Selection,
    rng: random.Random,
    alpha: float | None = None,
) -> dict[str, Json]:
    """won / lost / tie of a child description against its parent on the validation queries, by
    the body's step rule (step.decide) with the queries as the evals and their probes as the runs:
    d per query = child share of right probes − parent share, over queries observed for both; Δ
    their mean (the accuracy difference), under the claim selection.scope gives for that many
    queries (`auto`: "better on these queries" below selection.few_evals), in one look at the
    decision's whole α (no probes are added). An inconclusive interval is a `tie`: the parent
    stays. A child that wins on validation while its accuracy on train and validation together
    dropped is a `tie` too (the check against luck)."""
    both = sorted(set(child["per_query"]) & set(parent["per_query"]), key=int)
    out: dict[str, Json] = {
        "delta": None,
        "interval": None,
        "queries": len(both),
        "split": "validation",
        # Named apart from "parent", which selection.json uses for the parent's label.
        "child_metrics": _side(child),
        "parent_metrics": _side(parent),
        "dev_pass_rate": {"child": child_dev, "parent": parent_dev},
        "min_effect": selection.min_effect,
    }
    if not both:
        return {
            **out,
            "decision": "tie",
            "reason": "tie: no validation query has probe results "
            "for both the child and the parent.",
        }
    made = _one_look(probes(child, both), probes(parent, both), selection, rng, alpha)
    rounded = made.model_dump(mode="json", include={"delta", "interval", "scope", "alpha"})
    out.update(
        rounded,
        interval=None if made.ci_low is None else rounded["interval"],
        rule="sequential",
        comparator_p=None,
    )
    verdict, why = made.decision, words.reworded(made.reason, words.QUERY_WORDING)
    kept = child_dev is not None and parent_dev is not None and child_dev >= parent_dev - _EPS
    if verdict == "won" and not kept:
        verdict, why = (
            "tie",
            (
                f"tie: {why[len('won: ') :]} But the accuracy on train and "
                f"validation together dropped ({parent_dev} → {child_dev}), so the "
                "parent stays."
            ),
        )
    if child["constant_signal"]:
        why += f" The child's signal is constant (it triggers {child['constant_signal']})."
    return {**out, "decision": verdict, "reason": why}


def _one_look(
    child: dict[str, list[float]],
    parent: dict[str, list[float]],
    selection: Selection,
    rng: random.Random,
    alpha: float | None,
) -> RuleDecision:
    """The step rule over the queries' probes: each query was probed `runs` times, so one look
    at the whole α, with no runs to add."""
    runs = min(len(r) for r in (*child.values(), *parent.values()))
    one_look = selection.model_copy(update={"rule": "sequential", "max_runs_per_eval": runs})
    asked = Asked(first_runs=runs, look=runs, alpha=alpha)
    return step.decide(Measured(child, parent), asked, selection=one_look, rng=rng)


def probes(side: Probed, queries: list[str]) -> dict[str, list[float]]:
    """Each probe of a query as a unit score: 1 when the router did what the query wants. The
    metrics keep a query's trigger rate over its probes; the probes are rebuilt from it."""
    out = {}
    for q in queries:
        row = side["per_query"][q]
        n = max(1, int(row.get("runs") or 1))
        if "rate" not in row:  # a caller with pass/fail only: one probe
            out[q] = [float(row["passed"])]
            continue
        fired = round(float(row["rate"]) * n)
        right = fired if row.get("should_trigger", True) else n - fired
        out[q] = [1.0] * right + [0.0] * (n - right)
    return out
