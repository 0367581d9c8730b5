"""Where a look's extra runs go (decide/allot.py): a pure function of the scores and
the run counts, ties by eval id."""

import random

from optimizer.config import Selection
from optimizer.decide import spending
from optimizer.decide.allot import allot, identical, nothing_to_add, uneven_note
from optimizer.decide.comparison import Asked, Measured
from optimizer.decide.step import decide
from optimizer.schemas import SelectionFile

CHILD = {1: [1.0, 1.0, 1.0], 2: [0.2, 0.8, 0.5], 3: [0.5, 0.6, 0.55], 4: [0.0, 0.0, 0.0]}
PARENT = {1: [1.0, 1.0, 1.0], 2: [0.3, 0.6, 0.4], 3: [0.5, 0.5, 0.6], 4: [1.0, 1.0, 1.0]}
COUNTS = dict.fromkeys(CHILD, 3)


def test_an_eval_whose_child_and_parent_runs_are_all_identical_gets_no_extra_run():
    more = allot(CHILD, PARENT, COUNTS, look=3, mode="informative", share=1.0)
    assert more.to == {2: 4, 3: 4} and more.look == 4
    assert more.skipped_identical == (1, 4)  # d = 0 and d = −1, each with no spread at all
    assert identical([0.7, 0.7], [0.2, 0.2]) and not identical([0.7, 0.7], [0.2, 0.3])


def test_the_earlier_rule_adds_a_run_to_every_eval():
    assert allot(CHILD, PARENT, COUNTS, look=3, mode="all", share=0.5).to == dict.fromkeys(CHILD, 4)


def test_a_share_goes_to_the_largest_variance_of_d_first_ties_by_eval_id():
    more = allot(CHILD, PARENT, COUNTS, look=3, mode="informative", share=0.5)
    assert more.to == {2: 4} and more.skipped_low_variance == (3,)
    tied = {e: [0.1, 0.9, 0.5] for e in (9, 2, 5)}
    more = allot(tied, tied, dict.fromkeys(tied, 3), look=3, mode="informative", share=0.34)
    assert more.to == {2: 4, 5: 4}  # ceil(0.34 · 3) = 2, equal variances: the lowest ids


def test_the_allotment_does_not_depend_on_the_order_of_the_evals():
    keys = list(CHILD)
    random.Random(1).shuffle(keys)
    shuffled = allot(
        {k: CHILD[k] for k in keys},
        {k: PARENT[k] for k in reversed(keys)},
        {k: 3 for k in keys},
        look=3,
        mode="informative",
        share=0.5,
    )
    assert shuffled == allot(CHILD, PARENT, COUNTS, look=3, mode="informative", share=0.5)


def test_an_eval_without_scores_on_both_sides_is_the_least_settled():
    more = allot(
        {1: [0.5, 0.6], 2: []},
        {1: [0.5, 0.7], 2: [0.4]},
        {1: 2, 2: 2},
        look=2,
        mode="informative",
        share=0.5,
    )
    assert more.to == {2: 3}


def test_the_look_numbers_the_alpha_spent_not_the_fewest_runs():
    child = {**CHILD, 2: CHILD[2] + [0.6], 3: CHILD[3] + [0.6]}
    parent = {**PARENT, 2: PARENT[2] + [0.5], 3: PARENT[3] + [0.5]}
    scores = Measured(child, parent)
    at3 = decide(scores, Asked(first_runs=3), selection=Selection(), rng=random.Random(0))
    at4 = decide(scores, Asked(first_runs=3, look=4), selection=Selection(), rng=random.Random(0))
    assert at3.runs == at4.runs == 3 and at4.max_runs == 4
    # the second look's share, not the first's again
    alpha = 1 - Selection().confidence
    assert at4.look_alpha == spending.look_alpha(alpha, 4, 12, 3) != at3.look_alpha


def test_runs_grow_to_the_next_look():
    more = allot(CHILD, PARENT, COUNTS, look=4, mode="all", share=1.0, to_runs=6)
    assert more.to == dict.fromkeys(CHILD, 5) and more.look == 6  # from 3 runs: two more each
    assert allot(
        CHILD, PARENT, dict.fromkeys(CHILD, 4), look=4, mode="all", share=1.0, to_runs=6
    ).to == dict.fromkeys(CHILD, 6)


def test_selection_json_says_where_runs_went_and_validates():
    from optimizer.schemas import AddedRuns

    more = allot(CHILD, PARENT, COUNTS, look=3, mode="informative", share=1.0)
    d = decide(
        Measured(CHILD, PARENT), Asked(first_runs=3), selection=Selection(), rng=random.Random(0)
    )
    d = d.model_copy(update={"added_runs": [AddedRuns.model_validate(more.as_json())]})
    data = d.model_dump(mode="json")
    assert data["added_runs"] == [
        {"runs": 4, "to": [2, 3], "skipped_identical": [1, 4], "skipped_low_variance": []}
    ]
    SelectionFile.model_validate({**data, "stage": "benchmark", "parent": "v0"})
    note = uneven_note({1: 3, 2: 4, 3: 4, 4: 3}, [more])
    assert "from 3 to 4" in note and "evals 1, 4 had all runs identical" in note
    stopped = nothing_to_add(d.model_copy(update={"needs_more_runs": True}))
    assert not stopped.needs_more_runs and "No runs were added" in stopped.reason
