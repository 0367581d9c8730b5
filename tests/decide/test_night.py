"""A run's promotions as a family (decide/fdr.py): LORD++ levels from the recorded
decisions, in version order, whatever order the rows come in."""

import random

import pytest

from optimizer.decide import fdr


def test_the_levels_never_spend_more_than_the_wealth():
    # Without a promotion the levels sum to at most W0 = α/2 however long the night.
    levels = [fdr.lord([False] * t, 0.05).alpha for t in range(2000)]
    assert sum(levels) <= 0.025 + 1e-9
    assert levels == sorted(levels, reverse=True)  # a run of failures spends more and more thinly
    assert sum(fdr.gamma(j) for j in range(1, 200000)) == pytest.approx(1.0, abs=0.01)


def test_a_promotion_earns_later_decisions_alpha():
    before = fdr.lord([False, False], 0.05)
    after = fdr.lord([False, True], 0.05)
    assert after.alpha > before.alpha and after.promotions == 1 and after.index == 3
    two = fdr.lord([True, True], 0.05)
    assert two.alpha > fdr.lord([True, False], 0.05).alpha


def test_the_night_is_read_in_version_order_and_skips_screened_children():
    rows = [
        {"version": "v10", "phase": "benchmark", "decision": "won"},
        {"version": "v2", "phase": "benchmark", "decision": "lost"},
        {"version": "v3", "phase": "screening", "decision": "lost"},
        {"version": "v1", "phase": "benchmark", "decision": "won"},
        {"version": "v12", "phase": "benchmark", "decision": "won"},
    ]
    shuffled = list(rows)
    random.Random(3).shuffle(shuffled)
    a, b = fdr.night_of(rows, "v11", 0.05), fdr.night_of(shuffled, "v11", 0.05)
    assert a == b  # a pure function of the recorded decisions: a resume gets the same α
    assert a.index == 4 and a.promotions == 2  # v1, v2, v10 (v3 never reached the rule; v12 later)
    assert a.alpha == fdr.lord([True, False, True], 0.05).alpha


def test_the_summary_says_how_many_and_what_bounds_them():
    rows = [
        {"version": f"v{i}", "phase": "benchmark", "decision": d}
        for i, d in enumerate(["won", "lost", "won", "tie"], start=1)
    ]
    assert fdr.summary(rows, 0.05) == (
        "2 promotions in 4 decisions; at most 5% of such "
        "promotions are false on average (online "
        "false-discovery control, LORD++)."
    )
    assert "selection.night = none" in fdr.summary(rows, None, 0.05)


def test_without_a_night_control_the_count_of_chance_promotions_says_what_it_counts():
    rows = [
        {"version": f"v{i}", "phase": "benchmark", "decision": d}
        for i, d in enumerate(["won", "lost", "won", "tie", "tie", "lost", "tie"], start=1)
    ]
    assert fdr.summary(rows, None, 0.4) == (
        "2 promotions in 7 decisions, each at most 40% likely to promote a child no better than "
        "its parent; had all 7 children been no better, 2.8 promotions would be expected by "
        "chance, more than the 2 made, so this bounds nothing: any of them may be false "
        "(the night's promotions are not held to a false-discovery rate: selection.night = none)."
    )
    assert "so on average at most 0.4 of these 2 are false" in fdr.summary(rows, None, 0.05)


def test_status_lineage_and_report_word_the_claim_and_the_night():
    from optimizer.report import caveats
    from optimizer.report.view import Node

    rows = [
        {"label": "v0", "decision": "baseline", "phase": "benchmark"},
        {
            "label": "v1",
            "parent": "v0",
            "decision": "won",
            "phase": "benchmark",
            "scope": "tasks",
            "night": {"method": "lord", "fdr": 0.05},
        },
        {
            "label": "v2",
            "parent": "v1",
            "decision": "won",
            "phase": "benchmark",
            "scope": "general",
            "night": {"method": "lord", "fdr": 0.05},
        },
        {"label": "v3", "parent": "v2", "decision": "tie", "phase": "benchmark"},
        {"label": "v4", "parent": "v2", "decision": "lost", "phase": "screening"},
    ]
    nodes = [Node.model_validate(r) for r in rows]
    by_label = {n.label: n for n in nodes}
    # A step is never called better in a view: only an adoption claims that.
    assert caveats.verdict(nodes[1], by_label, "v2").startswith(
        "won against its parent v0 (a step on these tasks)"
    )
    assert "a step over evals like these" in caveats.verdict(nodes[2], by_label, "v2")
    assert all("better" not in caveats.verdict(n, by_label, "v2") for n in nodes)
    assert "sealed test checks it" in caveats.verdict(nodes[2], by_label, "v2")
    assert caveats.promotions(nodes) == (
        "2 promotions in 3 decisions; at most 5% of such "
        "promotions are false on average (online "
        "false-discovery control, LORD++)."
    )
    # decisions made before the rule recorded its α claim nothing about the night
    assert caveats.promotions([n.model_copy(update={"night": None}) for n in nodes]) is None
