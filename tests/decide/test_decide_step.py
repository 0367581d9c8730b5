import random
from collections import Counter

import pytest

from optimizer.config import Selection
from optimizer.decide.comparison import (
    MIN_CONSISTENT_VERDICTS,
    ComparisonTally,
    Measured,
    paired_differences,
)
from optimizer.decide.parents import VersionScores, pareto_front, select_parent
from optimizer.decide.screen import choose_minibatch, screen
from optimizer.decide.step import decide

# The earlier rule, selected explicitly: these tests pin its behaviour
# (tests/decide/test_sequential.py covers the default rule).
RULE = Selection(
    rule="bootstrap",
    min_effect=0.03,
    confidence=0.95,
    bootstrap_samples=1000,
    max_runs_per_eval=6,
    comparator_majority=0.75,
    max_judge_error_rate=0.25,
)
STRADDLING = [0.10, -0.08, 0.05, -0.04, 0.06, 0.0, -0.06, 0.04]  # mean +0.00875


def scores(ds, runs=3, base=0.5):
    """Per-eval run scores whose paired differences are exactly ds."""
    child = {e: [base + d] * runs for e, d in enumerate(ds)}
    parent = {e: [base] * runs for e in range(len(ds))}
    return child, parent


def tally(child=0, parent=0, ties=0, inconsistent=0):
    judged = child + parent + ties + inconsistent
    return ComparisonTally(
        child_wins=child,
        parent_wins=parent,
        ties=ties,
        inconsistent=inconsistent,
        pairs=judged,
        swap_consistency=(judged - inconsistent) / judged if judged else None,
    )


def run(ds, t=None, runs=3, judge_errors=0, total_runs=0):
    child, parent = scores(ds, runs)
    measured = Measured(child, parent, t, judge_errors=judge_errors, total_runs=total_runs)
    return decide(measured, selection=RULE, rng=random.Random(0))


def test_paired_differences_use_evals_both_have():
    child = {1: [0.5, 0.7], 2: [1.0], 3: [0.2]}
    parent = {1: [0.4], 2: [0.5, 0.5], 4: [0.9], 3: []}
    assert paired_differences(child, parent) == pytest.approx({1: 0.2, 2: 0.5})


def test_won_by_interval():
    d = run([0.2, 0.15, 0.25, 0.1, 0.3, 0.2], tally(parent=9))
    assert d.decision == "won"
    assert d.ci_low > RULE.min_effect
    assert "above the minimum effect" in d.reason and "comparator" not in d.reason
    assert d.needs_more_runs is False and d.evals == 6 and d.runs == 3


def test_won_by_comparator_tie_break():
    d = run(STRADDLING, tally(child=8, parent=1, ties=2, inconsistent=3), runs=6)
    assert d.ci_low < 0 < d.ci_high and d.delta >= 0
    assert d.decision == "won"
    assert "comparator favoured the child in 8 of 9" in d.reason
    assert d.needs_more_runs is False  # the cap is reached


def test_lost_by_interval():
    d = run([-0.2, -0.15, -0.25, -0.1], tally(child=9))
    assert d.decision == "lost" and d.ci_high < 0
    assert "below zero" in d.reason


def test_lost_by_comparator():
    d = run(STRADDLING, tally(child=1, parent=6), runs=6)
    assert d.decision == "lost"
    assert "comparator favoured the parent in 6 of 7" in d.reason


def test_tie_without_majority_and_needs_more_runs_below_the_cap():
    d = run(STRADDLING, tally(child=3, parent=3, ties=4), runs=3)
    assert d.decision == "tie"
    assert d.needs_more_runs is True
    assert "more runs are needed (3 of at most 6 per eval)" in d.reason
    assert run(STRADDLING, tally(child=3, parent=3), runs=6).needs_more_runs is False


def test_comparator_needs_a_minimum_of_decisive_verdicts():
    few = MIN_CONSISTENT_VERDICTS - 1
    d = run(STRADDLING, tally(child=few, ties=10), runs=6)
    assert d.decision == "tie" and "too few decisive" in d.reason


def test_comparator_cannot_promote_a_negative_delta():
    ds = [x - 0.03 for x in STRADDLING]
    d = run(ds, tally(child=9), runs=6)
    assert d.delta < 0 and d.ci_high > 0
    assert d.decision == "tie" and "Δ is negative" in d.reason


def test_position_biased_comparator_leaves_the_decision_to_the_interval():
    # A judge that always says "A" disagrees with itself on every swapped pair.
    biased = tally(inconsistent=24)
    assert run(STRADDLING, biased, runs=6).decision == "tie"
    assert run([0.2, 0.15, 0.25, 0.1], biased).decision == "won"
    assert run([-0.2, -0.15, -0.25, -0.1], biased).decision == "lost"


def test_too_many_judge_errors_make_a_tie():
    d = run([0.2, 0.15, 0.25, 0.1], tally(child=9), judge_errors=9, total_runs=24)
    assert d.decision == "tie" and d.needs_more_runs is False
    assert "9 of 24 runs (38%) had judge errors" in d.reason
    assert d.judge_error_rate == pytest.approx(0.375)
    ok = run([0.2, 0.15, 0.25, 0.1], tally(child=9), judge_errors=6, total_runs=24)
    assert ok.decision == "won"


def test_no_shared_evals_is_a_tie():
    d = decide(Measured({1: [0.5]}, {2: [0.5]}), selection=RULE, rng=random.Random(0))
    assert d.decision == "tie" and d.evals == 0 and d.delta is None


def test_decisions_are_seeded():
    a = run(STRADDLING, tally(child=2, parent=2))
    b = run(STRADDLING, tally(child=2, parent=2))
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)


def test_selection_json_carries_every_number():
    d = run(STRADDLING, tally(child=8, parent=1, ties=2, inconsistent=3), runs=6)
    data = d.model_dump(mode="json")
    assert data["decision"] == "won" and data["reason"] == d.reason
    assert data["delta"] == pytest.approx(d.delta, abs=1e-6)
    assert data["interval"]["low"] == pytest.approx(d.ci_low, abs=1e-6)
    assert data["interval"]["confidence"] == 0.95
    assert data["evals"] == 8 and data["runs_per_eval"] == 6
    assert data["comparator"]["child_wins"] == 8 and data["comparator"]["inconsistent"] == 3
    assert data["swap_consistency"] == pytest.approx(11 / 14, abs=1e-6)
    assert data["needs_more_runs"] is False and data["judge_error_rate"] == 0


def test_screen_stops_a_clearly_worse_candidate():
    parent = {1: 0.8, 2: [0.6, 0.6], 3: 0.9}
    passed, reason = screen({1: 0.5, 2: [0.3], 3: 0.6}, parent, margin=0.15)
    assert passed is False and "-0.300" in reason
    passed, reason = screen({1: 0.75, 2: 0.55, 3: 0.8}, parent, margin=0.15)
    assert passed is True and "passed" in reason
    assert screen({}, parent, margin=0.15)[0] is True


TABLE = [
    VersionScores("v0", {1: 0.4, 2: 0.4, 3: 0.4}),  # dominated by v3
    VersionScores("v1", {1: 1.0, 2: 0.0, 3: 0.5}),
    VersionScores("v2", {1: 0.0, 2: 1.0, 3: 0.5}, is_best=True),
    VersionScores("v3", {1: 0.5, 2: 0.5, 3: 0.5}),
    VersionScores("v4", {1: 1.0, 2: 0.0, 3: 0.4}),  # dominated by v1
]


def test_pareto_front_on_a_hand_built_table():
    assert pareto_front(TABLE) == ["v1", "v2", "v3"]
    # Equal on everything: neither dominates the other.
    assert pareto_front([VersionScores("a", {1: 0.5}), VersionScores("b", {1: 0.5})]) == ["a", "b"]


def test_select_parent_pareto_is_weighted_by_evals_led():
    rng = random.Random(11)
    picks = Counter(select_parent(TABLE, strategy="pareto", rng=rng) for _ in range(5000))
    assert set(picks) == {"v1", "v2", "v3"}
    # v1 leads evals 1 and 3, v2 leads 2 and 3, v3 leads 3 (a tie counts for each): 2:2:1
    assert picks["v3"] / 5000 == pytest.approx(0.2, abs=0.03)
    assert picks["v1"] / 5000 == pytest.approx(0.4, abs=0.03)
    again = [select_parent(TABLE, strategy="pareto", rng=random.Random(5)) for _ in range(3)]
    assert len(set(again)) == 1


def test_select_parent_best_is_the_current_best():
    assert select_parent(TABLE, strategy="best", rng=random.Random(0)) == "v2"
    unflagged = [VersionScores(v.label, v.per_eval) for v in TABLE]
    assert select_parent(unflagged, strategy="best", rng=random.Random(0)) == "v1"


def test_minibatch_favours_failing_evals():
    train = list(range(1, 11))
    parent = {e: 0.9 for e in train} | {3: 0.0, 7: 0.0, 5: 0.1}
    chosen = choose_minibatch(train, parent, 3, random.Random(0))
    assert len(chosen) == 3 and len(set(chosen)) == 3 and {3, 7} <= set(chosen)
    chosen = choose_minibatch(train, parent, 4, random.Random(0))
    assert {3, 5, 7} <= set(chosen) and len(chosen) == 4
    # Ties among the weakest are broken by the rng, reproducibly.
    flat = dict.fromkeys(train, 0.0)
    draws = {tuple(choose_minibatch(train, flat, 2, random.Random(s))) for s in range(20)}
    assert len(draws) > 1
    assert choose_minibatch(train, flat, 2, random.Random(4)) == choose_minibatch(
        train, flat, 2, random.Random(4)
    )
    assert choose_minibatch(train, parent, 20, random.Random(0)) == train
    assert choose_minibatch(train, parent, 0, random.Random(0)) == []


def test_no_comparator_pair_is_judged_when_steps_decide_on_scores_alone():
    from optimizer.decide.step import compared_runs

    assert compared_runs(Selection(compare_pairs="none"), 3) == 0
    assert compared_runs(Selection(), 3) == 1
    assert compared_runs(Selection(compare_pairs="all"), 3) == 3


def test_a_negative_screen_margin_asks_the_child_to_improve_on_the_minibatch():
    parent = {1: 0.5, 2: 0.5}
    held, why = screen({1: 0.5, 2: 0.5}, parent, margin=-0.01)
    assert not held and "not better than the parent" in why
    assert screen({1: 0.6, 2: 0.5}, parent, margin=-0.01)[0]
    assert screen({1: 0.4, 2: 0.5}, parent, margin=0.15)[
        0
    ]  # the default stops only the clearly worse
