"""Whether a night keeps a child, every case in one place (optimizer/decide/keep.py): the looks of
a step (plan: the next look's runs or the verdict), the promotion to current best (promotes), and
the description target's rule over trigger queries (queries)."""

from __future__ import annotations

import random

import pytest

from optimizer.config import Selection
from optimizer.decide import keep
from optimizer.decide.comparison import Asked, Measured
from optimizer.decide.step import Sequential, decide
from optimizer.schemas import RuleDecision

# -- plan: the next look, or the verdict -----------------------------------------------------


def _decision(**update) -> RuleDecision:
    """A step rule's decision at a look, as the rule would give it (decided on real scores)."""
    made = decide(Measured({1: [1.0]}, {1: [0.0]}), selection=Selection(), rng=random.Random(0))
    return made.model_copy(update={"needs_more_runs": False, "next_runs": None, **update})


def test_a_decided_look_is_the_verdict_and_adds_no_runs():
    looking = keep.first_look([1, 2], 3)
    said = keep.plan(looking, _decision(decision="won"), {}, {}, Selection())
    assert isinstance(said, RuleDecision)
    assert said.decision == "won" and said.added_runs == []


def test_an_undecided_look_asks_the_next_look_of_the_rules_schedule():
    looking = keep.first_look([1, 2], 3)
    child = {1: [0.2, 0.9, 0.5], 2: [0.1, 0.8, 0.4]}
    parent = {1: [0.3, 0.6, 0.1], 2: [0.0, 0.7, 0.2]}
    undecided = _decision(decision="tie", needs_more_runs=True, next_runs=4)
    more = keep.plan(looking, undecided, child, parent, Selection(runs_to="all"))
    assert isinstance(more, keep.Looking)
    assert more.runs == 4 and dict(more.counts) == {1: 4, 2: 4} and len(more.added) == 1
    # without a schedule's next look, one more run
    plain = keep.plan(
        looking, _decision(needs_more_runs=True), child, parent, Selection(runs_to="all")
    )
    assert isinstance(plain, keep.Looking) and plain.runs == 4


def test_the_cap_ends_the_looks_even_when_the_rule_wants_more():
    looking = keep.first_look([1], 6)
    said = keep.plan(
        looking,
        _decision(needs_more_runs=True),
        {1: [0.5] * 6},
        {1: [0.4] * 6},
        Selection(max_runs_per_eval=6),
    )
    assert isinstance(said, RuleDecision) and said.needs_more_runs


def test_no_eval_that_could_gain_a_run_ends_the_step_with_its_decision_said():
    looking = keep.first_look([1, 2], 3)
    same = {1: [1.0, 1.0, 1.0], 2: [0.0, 0.0, 0.0]}  # every run of both sides identical
    said = keep.plan(
        looking,
        _decision(decision="tie", needs_more_runs=True),
        same,
        same,
        Selection(runs_to="informative"),
    )
    assert isinstance(said, RuleDecision)
    assert not said.needs_more_runs and "No runs were added" in said.reason


def test_the_verdict_says_which_evals_ran_fewer_times_and_keeps_each_looks_added_runs():
    child = {1: [1.0, 1.0, 1.0], 2: [0.2, 0.9, 0.4], 3: [0.1, 0.7, 0.3]}
    parent = {1: [0.0, 0.0, 0.0], 2: [0.5, 0.1, 0.3], 3: [0.6, 0.2, 0.0]}
    selection = Selection(runs_to="informative", runs_share=1.0)
    looking = keep.plan(
        keep.first_look([1, 2, 3], 3),
        _decision(needs_more_runs=True, next_runs=4),
        child,
        parent,
        selection,
    )
    assert isinstance(looking, keep.Looking) and dict(looking.counts) == {1: 3, 2: 4, 3: 4}
    said = keep.plan(looking, _decision(decision="lost"), child, parent, selection)
    assert isinstance(said, RuleDecision)
    assert (
        "Runs per eval went from 3 to 4" in said.reason
        and "eval 1 had all runs identical" in said.reason
    )
    assert [a.to for a in said.added_runs] == [[2, 3]]


def test_a_step_driven_by_plan_ends_at_the_rules_verdict():
    """The loop a target runs: ask the rule at each look, then plan; a child clearly better on
    every eval is promoted within the cap, at a look of the rule's schedule."""
    selection = Selection()
    rule = Sequential(selection)
    looking = keep.first_look([1, 2, 3, 4], 3)
    for _ in range(10):
        n = dict(looking.counts)
        child = {e: [0.9 - 0.01 * (r % 3) for r in range(k)] for e, k in n.items()}
        parent = {e: [0.5 + 0.01 * (r % 2) for r in range(k)] for e, k in n.items()}
        made = rule.decide(Measured(child, parent), Asked(3, looking.runs), random.Random(0))
        planned = keep.plan(looking, made, child, parent, selection)
        if isinstance(planned, RuleDecision):
            break
        looking = planned
    assert isinstance(planned, RuleDecision) and planned.decision == "won"


# -- promotes: the current best ---------------------------------------------------------------


@pytest.mark.parametrize(
    "verdict, parent, best, child_score, best_score, promoted",
    [
        ("won", "v1", "v1", 0.5, 0.9, True),  # a child of the best that won its step
        ("won", "v0", "v1", 0.95, 0.9, True),  # a child of another parent, above the best
        ("won", "v0", "v1", 0.85, 0.9, False),  # won its step, still below the best
        ("won", "v0", "v1", 0.9, 0.9, False),  # level with the best: the best stays
        ("tie", "v1", "v1", 0.99, 0.5, False),
        ("lost", "v1", "v1", 0.99, 0.5, False),
    ],
)
def test_only_a_won_child_above_the_best_or_of_it_becomes_the_best(
    verdict, parent, best, child_score, best_score, promoted
):
    assert keep.promotes(verdict, parent, best, child_score, best_score) is promoted


# -- the description target's rule: queries as the evals ------------------------------------


def metrics(passes: list[bool]) -> dict:
    return {
        "per_query": {str(i): {"passed": p} for i, p in enumerate(passes)},
        "pass_rate": None,
        "precision": None,
        "recall": None,
        "f1": None,
        "constant_signal": False,
    }


@pytest.mark.parametrize(
    "child, parent, child_dev, parent_dev, verdict",
    [
        ([True] * 8, [False] * 8, 1.0, 0.5, "won"),  # the bound is above zero, Δ ≥ min_effect
        ([True] * 8, [False] * 8, 0.4, 0.5, "tie"),  # won on validation, but dev dropped
        ([False] * 8, [True] * 8, 0.5, 1.0, "lost"),  # the interval is below zero
        # Δ > 0 with an inconclusive interval: the earlier rule promoted it on Δ alone; the body's
        # rule, queries as the units, keeps the parent (issue 27: no promotion without error control)
        ([True, True, False, False], [True, False, False, False], 0.8, 0.7, "tie"),
        (
            [True, False, False, False],
            [True, True, False, False],
            0.9,
            0.7,
            "tie",
        ),  # Δ < 0, unclear
        ([True, False], [True, False], 0.9, 0.7, "tie"),  # validation cannot tell them apart
    ],
)
def test_the_description_selection_rule(child, parent, child_dev, parent_dev, verdict):
    out = keep.queries(
        metrics(child),
        metrics(parent),
        child_dev,
        parent_dev,
        selection=Selection(),
        rng=random.Random(0),
    )
    assert out["decision"] == verdict, out["reason"]
    assert out["reason"].startswith(verdict)


def test_the_description_rule_is_the_body_rule_with_queries_as_units():
    out = keep.queries(
        metrics([True] * 8),
        metrics([False] * 8),
        1.0,
        0.5,
        selection=Selection(),
        rng=random.Random(0),
        alpha=0.001,
    )
    assert out["rule"] == "sequential" and out["scope"] == "general" and out["alpha"] == 0.001
    assert (
        "8 validation queries" in out["reason"]
        and "a step over queries like these" in out["reason"]
    )
    # identical answers never promote, and an all-agreeing table keeps a non-zero width
    same = keep.queries(
        metrics([True, False] * 6),
        metrics([True, False] * 6),
        1.0,
        0.5,
        selection=Selection(),
        rng=random.Random(0),
    )
    assert same["decision"] == "tie" and same["interval"]["high"] > same["interval"]["low"]
