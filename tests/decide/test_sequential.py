import random

import pytest

from optimizer.config import Selection
from optimizer.decide import comparison, sequential
from optimizer.decide.comparison import Asked, ComparisonTally, Measured
from optimizer.decide.step import decide

NEW = Selection()  # the default rule is the sequential one
OLD = Selection(rule="bootstrap")


def scores(ds, runs=3, base=0.5, jitter=0.05):
    """Runs that vary around their mean by ±jitter (the rule never promotes identical runs on
    their scores alone at the first look: they cannot show their own noise)."""
    wobble = [(-jitter, 0.0, jitter)[r % 3] for r in range(runs)]
    wobble = [w - sum(wobble) / runs for w in wobble]  # mean zero: d stays as given
    child = {e: [base + d + w for w in wobble] for e, d in enumerate(ds)}
    parent = {e: [base - w for w in wobble] for e in range(len(ds))}
    return child, parent


def tally(per_eval):
    """A tally from {eval: (child wins, parent wins)}."""
    t = ComparisonTally()
    for e, (w, lost) in per_eval.items():
        t.per_eval[e] = {
            "child_wins": w,
            "parent_wins": lost,
            "ties": 0,
            "inconsistent": 0,
            "errors": 0,
            "pairs": w + lost,
        }
        t.child_wins += w
        t.parent_wins += lost
        t.pairs += w + lost
    t.swap_consistency = 1.0 if t.pairs else None
    return t


def run(ds, t=None, runs=3, selection=NEW, first_runs=3):
    child, parent = scores(ds, runs)
    return decide(
        Measured(child, parent, t),
        Asked(first_runs=first_runs),
        selection=selection,
        rng=random.Random(0),
    )


EQUAL = [0.10, -0.12, 0.05, -0.04, 0.08, -0.09, 0.02, -0.03, 0.06, -0.05]  # mean −0.002


def test_an_equal_child_stops_adding_runs_by_futility():
    d = run(EQUAL, tally({e: (1, 1) for e in range(10)}))
    assert d.decision == "tie" and d.futile and not d.needs_more_runs
    assert "no more runs are added" in d.reason and "selection.futility" in d.reason
    # the earlier rule keeps adding runs up to its cap on the same evidence
    assert run(EQUAL, tally({e: (1, 1) for e in range(10)}), selection=OLD).needs_more_runs


def test_one_run_a_side_never_stops_by_futility_under_the_tasks_claim():
    # evals.runs_per_eval = 1: no run-to-run noise to judge the chance at the cap by. The same
    # evidence with repeated runs is futile, so the test fails if futility ignores the claim.
    ds = [0.0, 0.05, -0.05, 0.0]
    child = {e: [0.5 + d] for e, d in enumerate(ds)}
    parent = {e: [0.5] for e in range(len(ds))}
    one = decide(
        Measured(child, parent),
        Asked(first_runs=1, scope="tasks"),
        selection=NEW,
        rng=random.Random(0),
    )
    assert one.decision == "tie" and one.needs_more_runs and not one.futile
    assert one.next_runs == 2
    many = decide(
        Measured(*scores(ds * 3, runs=3)), Asked(scope="tasks"), selection=NEW, rng=random.Random(0)
    )
    assert many.futile and not many.needs_more_runs


def test_a_promising_child_gets_more_runs():
    d = run(
        [0.04, 0.01, 0.03, -0.005, 0.045, 0.015, 0.025, 0.0, 0.035, 0.02],
        tally({e: (2, 1) for e in range(10)}),
    )
    assert d.decision == "tie" and d.needs_more_runs and not d.futile
    assert d.promotion_power is not None and d.promotion_power >= NEW.futility


def test_three_evals_with_a_narrow_bootstrap_interval_are_not_promoted():
    ds = [0.045, 0.065, 0.085]
    old = run(ds, runs=6, selection=OLD)
    assert old.decision == "won" and old.ci_low > OLD.min_effect  # the bootstrap is too narrow
    child, parent = scores(ds, 6)
    general = decide(
        Measured(child, parent),
        Asked(first_runs=3, look=6, scope="general"),
        selection=NEW,
        rng=random.Random(0),
    )
    assert general.decision == "tie" and general.ci_low < 0  # t with 2 df is honest about 3 points
    new = run(ds, runs=6)  # the default scope at 3 evals: these tasks, nothing more
    assert new.scope == "tasks" and "a step on these tasks, not a claim" in new.reason
    assert new.few_evals and "too few to generalise" in new.reason
    assert new.model_dump(mode="json")["few_evals"] is True


def test_three_lucky_comparator_verdicts_do_not_promote():
    t = tally({0: (1, 0), 1: (1, 0), 2: (1, 0)})
    assert run([0.02, -0.01, 0.03], t, selection=OLD).decision == "won"
    assert run([0.02, -0.01, 0.03], t).decision != "won"


def test_a_clear_winner_wins_at_the_first_look():
    d = run([0.2, 0.15, 0.25, 0.1, 0.3, 0.2, 0.18, 0.22, 0.2, 0.17], tally({}))
    assert d.decision == "won" and "above the minimum effect" in d.reason
    assert d.runs == 3 and not d.needs_more_runs and not d.few_evals


def test_the_comparator_alone_never_promotes_a_child_the_scores_do_not():
    # Scores that straddle zero, a comparator that favours the child on every eval: its test
    # is recorded (comparator_p) but spends no α, so the child is not promoted on it.
    ds = [0.06, -0.05, 0.04, -0.02, 0.05, 0.01, -0.04, 0.03, 0.02, -0.01]
    d = run(ds, tally({e: (4, 1) for e in range(10)}), runs=9)
    assert d.decision != "won" and d.ci_low is not None and d.ci_low <= 0
    assert d.comparator_p is not None and d.comparator_p < 0.01
    # The same verdicts with scores whose bound clears zero: the comparator's agreement counts.
    clear = run([d + 0.08 for d in ds], tally({e: (4, 1) for e in range(10)}), runs=9)
    assert clear.decision == "won"


def test_verdicts_carried_by_one_eval_count_for_less():
    spread = comparison.comparator_test(
        20, 8, {e: {"child_wins": 5, "parent_wins": 2} for e in range(4)}, 3
    )
    lumped = comparison.comparator_test(
        20,
        8,
        {
            0: {"child_wins": 17, "parent_wins": 1},
            1: {"child_wins": 1, "parent_wins": 3},
            2: {"child_wins": 1, "parent_wins": 2},
            3: {"child_wins": 1, "parent_wins": 2},
        },
        3,
    )
    assert lumped.p_child > spread.p_child


def test_a_clearly_worse_child_loses():
    d = run([-0.2, -0.15, -0.25, -0.1, -0.3], tally({}))
    assert d.decision == "lost" and "below zero" in d.reason


def test_the_decision_ignores_the_rng_and_the_order_of_evals():
    child, parent = scores(EQUAL)
    t = tally({e: (1, 1) for e in range(10)})
    a = decide(Measured(child, parent, t), Asked(first_runs=3), selection=NEW, rng=random.Random(1))
    reversed_child = dict(reversed(child.items()))
    b = decide(
        Measured(reversed_child, parent, t),
        Asked(first_runs=3),
        selection=NEW,
        rng=random.Random(2),
    )
    assert a.model_dump(mode="json") == b.model_dump(mode="json")
    assert a.model_dump(mode="json")["rule"] == "sequential"


def _table(rng, n_evals, runs, pass_fail):
    draw = (lambda: float(rng.random() < 0.5)) if pass_fail else rng.random
    return {e: [draw() for _ in range(runs)] for e in range(n_evals)}


@pytest.mark.parametrize("scope", ["tasks", "general"])
def test_identical_child_and_parent_tables_never_promote(scope):
    rng = random.Random(7)
    for trial in range(300):
        n, runs = rng.choice([3, 5, 10, 20]), rng.choice([3, 5, 8, 12])
        table = _table(rng, n, runs, pass_fail=trial % 2 == 0)
        t = tally({e: (w, w) for e, w in enumerate(rng.choices(range(4), k=n))})
        same = Measured(table, {e: list(v) for e, v in table.items()}, t)
        d = decide(
            same, Asked(first_runs=3, look=runs, scope=scope), selection=NEW, rng=random.Random(0)
        )
        assert d.decision != "won" and d.delta == 0


@pytest.mark.parametrize("scope", ["tasks", "general"])
@pytest.mark.parametrize(
    "child_runs, parent_runs",
    [
        ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0]),  # every run identical: no noise to be seen
        ([0.7, 0.7, 0.7], [0.6, 0.6, 0.6]),
        ([1.0, 1.0, 0.0], [1.0, 0.0, 0.0]),  # pass/fail with d = +1/3 on every eval: s_d = 0
    ],
)
def test_a_zero_variance_table_never_promotes_on_scores_alone_at_the_first_look(
    scope, child_runs, parent_runs
):
    for n in (3, 5, 10):
        child = {e: list(child_runs) for e in range(n)}
        parent = {e: list(parent_runs) for e in range(n)}
        d = decide(
            Measured(child, parent),
            Asked(first_runs=3, scope=scope),
            selection=NEW,
            rng=random.Random(0),
        )
        assert d.decision != "won", d.reason
        # never a zero-width interval (the pseudo-observation; 0.027 wide at 10 evals × 3 runs)
        assert d.delta - d.ci_low > 0.02


def test_intervals_stay_inside_what_a_difference_of_scores_can_take():
    child = {0: [1.0, 0.0, 1.0], 1: [0.0, 1.0, 0.0], 2: [1.0, 1.0, 0.0]}
    parent = {0: [0.0, 1.0, 0.0], 1: [1.0, 0.0, 1.0], 2: [0.0, 0.0, 1.0]}
    for scope in ("tasks", "general"):
        d = decide(
            Measured(child, parent),
            Asked(first_runs=3, scope=scope),
            selection=NEW,
            rng=random.Random(0),
        )
        assert -1 <= d.ci_low <= d.ci_high <= 1


def test_the_comparator_over_three_evals_is_tested_with_their_degrees_of_freedom():
    # 3 evals whose verdicts agree: a normal reference would call this certain; t(2) does not
    c = comparison.comparator_test(
        24, 6, {e: {"child_wins": 8, "parent_wins": 2} for e in range(3)}, 3
    )
    assert c.df == 2 and c.p_child > 0.01
    assert (
        comparison.comparator_test(24, 6, {0: {"child_wins": 24, "parent_wins": 6}}, 3).p_child == 1
    )


def test_the_claim_defaults_by_suite_size_and_is_written():
    few = run([0.1, 0.12, 0.08], tally({}))
    many = run([0.1] * 12, tally({}))
    assert few.scope == "tasks" and many.scope == "general"
    assert "a step on these tasks" in few.reason and "a step over evals like these" in many.reason
    # a step is a move: only an adoption's reason says "better" (docs/design.md §16)
    assert "better" not in few.reason + many.reason
    assert few.model_dump(mode="json")["scope"] == "tasks"
    asked = decide(
        Measured(*scores([0.1, 0.12, 0.08])),
        Asked(first_runs=3, scope="general"),
        selection=NEW,
        rng=random.Random(0),
    )
    assert asked.scope == "general"


def test_at_three_evals_the_tasks_claim_finds_what_the_general_one_cannot():
    rng = random.Random(3)
    # the child's advantage differs from eval to eval (+0.05, +0.2, +0.45): real on these three,
    # but three such points say little about evals in general
    child = {
        e: [min(1.0, m + rng.gauss(0, 0.1)) for _ in range(9)]
        for e, m in enumerate((0.5, 0.65, 0.9))
    }
    parent = {e: [max(0.0, 0.45 + rng.gauss(0, 0.1)) for _ in range(9)] for e in range(3)}
    measured = Measured(child, parent)
    tasks, general = (
        decide(measured, Asked(first_runs=3, look=9, scope=s), selection=NEW, rng=random.Random(0))
        for s in ("tasks", "general")
    )
    assert tasks.decision == "won" and general.decision != "won"


def test_runs_off_the_schedule_ask_for_the_next_look_and_spend_nothing():
    d = run(EQUAL, tally({}), runs=5)
    assert d.needs_more_runs and d.look_alpha == 0 and d.next_runs == 6
    assert d.decision == "tie"


def _at_cap(d, jitter, per_eval=None, scope="tasks"):
    child, parent = scores([d] * 8, runs=12, jitter=jitter)
    measured = Measured(child, parent, tally(per_eval) if per_eval else None)
    return decide(
        measured, Asked(first_runs=3, look=12, scope=scope), selection=NEW, rng=random.Random(0)
    )


def test_a_win_on_the_scores_needs_the_bound_above_zero_and_delta_at_the_minimum_effect():
    small = _at_cap(0.02, 0.01)  # bound above zero, Δ below min_effect, no comparator
    assert small.ci_low > 0 and small.delta < NEW.min_effect and small.decision == "tie"
    # The same evidence wins when the comparator agrees: its only role under `tasks`.
    agreed = _at_cap(0.02, 0.01, {e: (1, 0) for e in range(8)})
    assert agreed.decision == "won" and "below the minimum effect" in agreed.reason
    # A bound between 0 and min_effect with Δ at or above it wins on the scores alone.
    clear = _at_cap(0.04, 0.08)
    assert 0 < clear.ci_low < NEW.min_effect <= clear.delta and clear.decision == "won"


def test_each_claim_stops_by_its_own_futility_threshold():
    tasks = run(EQUAL, tally({e: (1, 1) for e in range(10)}), selection=Selection(scope="tasks"))
    assert tasks.futile and "selection.futility_tasks = 20%" in tasks.reason
    general = run(
        EQUAL, tally({e: (1, 1) for e in range(10)}), selection=Selection(scope="general")
    )
    assert general.futile and "selection.futility = 40%" in general.reason
    # A threshold of 0 never stops: the setting is what decides, for each claim on its own.
    keep = Selection(scope="tasks", futility_tasks=0.0)
    assert run(EQUAL, tally({e: (1, 1) for e in range(10)}), selection=keep).needs_more_runs


def test_one_noisy_eval_does_not_lend_the_steady_ones_degrees_of_freedom():
    steady = [[1.0, 1.0, 1.0]] * 8
    few = sequential.score_test(
        [[1.0, 0.0, 1.0], *steady], [[0.0, 1.0, 0.0], *steady], 0.05, "tasks"
    )
    # One eval's 4 degrees of freedom, not the 36 of every run.
    assert few.df <= 5
    even = sequential.score_test([[0.4, 0.5, 0.6]] * 9, [[0.5, 0.4, 0.6]] * 9, 0.05, "tasks")
    assert even.df == 36  # noise spread evenly keeps every run's degree of freedom


def test_the_degrees_of_freedom_do_not_jump_when_one_run_moves_a_hair():
    child, parent = [[0.58] * 4] * 3, [[0.5] * 4] * 3
    nudged = [[0.58, 0.58, 0.58, 0.581], *child[1:]]
    a = sequential.score_test(child, parent, 0.0034, "tasks")
    b = sequential.score_test(nudged, parent, 0.0034, "tasks")
    # The pseudo-observation, not the hair, is nearly all of the pooled variance.
    assert abs(a.low - b.low) < 0.002 and b.df >= a.df - 1


def test_no_tie_beside_an_interval_wholly_below_zero():
    # A cheap step (one look at α 0.4, a 20% CI): the interval it shows lies below zero while the
    # 60% one reaches it; the word beside it was "tie".
    from optimizer.decide import step

    ds = [-0.1, 0.05, -0.08, 0.0]
    child = {e: [0.5 + d] for e, d in enumerate(ds)}
    parent = {e: [0.5] for e in range(len(ds))}
    selection = step.for_steps(Selection())
    d = decide(
        Measured(child, parent), Asked(first_runs=1), selection=selection, rng=random.Random(0)
    )
    assert d.ci_high is not None and d.ci_high < 0
    assert d.decision == "lost" and "20% CI [-0.061, -0.004] (Student-t)" in d.reason
    assert "lies below zero" in d.reason


def test_every_view_reads_a_recorded_tie_below_zero_as_lost():
    from optimizer.decide import verdict

    assert verdict.word("tie", -0.066, -0.029) == "lost"
    assert verdict.word("tie", -0.066, 0.01) == "tie"
    assert verdict.word("tie", 0.01, 0.05) == "tie"  # its reason says what it lacked
    assert verdict.word("won", 0.01, 0.05) == "won" and verdict.word("tie", None, None) == "tie"
