import random

import pytest

from optimizer.config import Selection
from optimizer.search import sequential
from optimizer.search.select import ComparisonTally, decide, selection_json

NEW = Selection()  # the default rule is the sequential one
OLD = Selection(rule="bootstrap")


def scores(ds, runs=3, base=0.5):
    child = {e: [base + d] * runs for e, d in enumerate(ds)}
    parent = {e: [base] * runs for e in range(len(ds))}
    return child, parent


def tally(per_eval):
    """A tally from {eval: (child wins, parent wins)}."""
    t = ComparisonTally()
    for e, (w, lost) in per_eval.items():
        t.per_eval[e] = {"child_wins": w, "parent_wins": lost, "ties": 0, "inconsistent": 0,
                         "errors": 0, "pairs": w + lost}
        t.child_wins += w
        t.parent_wins += lost
        t.pairs += w + lost
    t.swap_consistency = 1.0 if t.pairs else None
    return t


def run(ds, t=None, runs=3, selection=NEW, first_runs=3):
    child, parent = scores(ds, runs)
    return decide(child, parent, t, selection=selection, rng=random.Random(0),
                  first_runs=first_runs)


EQUAL = [0.10, -0.12, 0.05, -0.04, 0.08, -0.09, 0.02, -0.03, 0.06, -0.05]  # mean −0.002


def test_spending_sums_to_alpha_over_the_looks():
    spent = [sequential.look_alpha(0.05, r, 6, 3) for r in range(3, 7)]
    assert sum(spent) == pytest.approx(0.05)
    assert spent == sorted(spent)  # later, better-informed looks may spend more
    assert sequential.look_alpha(0.05, 9, 6, 3) == spent[-1]  # past the cap: the last look


def test_an_equal_child_stops_adding_runs_by_futility():
    d = run(EQUAL, tally({e: (1, 1) for e in range(10)}))
    assert d.decision == "tie" and d.futile and not d.needs_more_runs
    assert "no more runs are added" in d.reason and "selection.futility" in d.reason
    # the earlier rule keeps adding runs up to its cap on the same evidence
    assert run(EQUAL, tally({e: (1, 1) for e in range(10)}), selection=OLD).needs_more_runs


def test_a_promising_child_gets_more_runs():
    d = run([0.08, 0.02, 0.06, -0.01, 0.09, 0.03, 0.05, 0.0, 0.07, 0.04],
            tally({e: (2, 1) for e in range(10)}))
    assert d.decision == "tie" and d.needs_more_runs and not d.futile
    assert d.promotion_power is not None and d.promotion_power >= NEW.futility


def test_three_evals_with_a_narrow_bootstrap_interval_are_not_promoted():
    ds = [0.045, 0.065, 0.085]
    old = run(ds, runs=6, selection=OLD)
    assert old.decision == "won" and old.ci_low > OLD.min_effect  # the bootstrap is too narrow
    new = run(ds, runs=6)
    assert new.decision == "tie" and new.ci_low < 0  # t with 2 df is honest about 3 points
    assert new.few_evals and "too few to generalise" in new.reason
    assert selection_json(new)["few_evals"] is True


def test_three_lucky_comparator_verdicts_do_not_promote():
    t = tally({0: (1, 0), 1: (1, 0), 2: (1, 0)})
    assert run([0.02, -0.01, 0.03], t, selection=OLD).decision == "won"
    assert run([0.02, -0.01, 0.03], t).decision != "won"


def test_a_clear_winner_wins_at_the_first_look():
    d = run([0.2, 0.15, 0.25, 0.1, 0.3, 0.2, 0.18, 0.22, 0.2, 0.17], tally({}))
    assert d.decision == "won" and "above the minimum effect" in d.reason
    assert d.runs == 3 and not d.needs_more_runs and not d.few_evals


def test_the_comparator_sign_test_promotes_with_enough_verdicts():
    ds = [0.06, -0.05, 0.04, -0.02, 0.05, 0.01, -0.04, 0.03, 0.02, -0.01]
    d = run(ds, tally({e: (4, 1) for e in range(10)}), runs=6)
    assert d.decision == "won" and "sign test" in d.reason
    assert d.comparator_p is not None and d.comparator_p < 1e-4


def test_verdicts_carried_by_one_eval_count_for_less():
    spread = sequential.comparator_test(20, 8, {e: {"child_wins": 5, "parent_wins": 2}
                                                for e in range(4)}, 3)
    lumped = sequential.comparator_test(20, 8, {0: {"child_wins": 17, "parent_wins": 1},
                                                1: {"child_wins": 1, "parent_wins": 3},
                                                2: {"child_wins": 1, "parent_wins": 2},
                                                3: {"child_wins": 1, "parent_wins": 2}}, 3)
    assert lumped.p_child > spread.p_child


def test_a_clearly_worse_child_loses():
    d = run([-0.2, -0.15, -0.25, -0.1, -0.3], tally({}))
    assert d.decision == "lost" and "below zero" in d.reason


def test_the_decision_ignores_the_rng_and_the_order_of_evals():
    child, parent = scores(EQUAL)
    t = tally({e: (1, 1) for e in range(10)})
    a = decide(child, parent, t, selection=NEW, rng=random.Random(1), first_runs=3)
    b = decide(dict(reversed(child.items())), parent, t, selection=NEW, rng=random.Random(2),
               first_runs=3)
    assert selection_json(a) == selection_json(b)
    assert selection_json(a)["rule"] == "sequential"
