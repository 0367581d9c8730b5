"""Benchmark arithmetic against a small hand-built set of graded runs: means over evals of per-eval
means, stddev over runs, intervals, deltas, consistency, judge_error exclusion, order independence,
analyst notes and benchmark.md."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest

from optimizer import schemas as s
from optimizer.config import Scoring
from optimizer.decide import stats
from optimizer.grade import scoring
from optimizer.grade.aggregate import aggregate
from optimizer.grade.config_stats import config_of, delta_string
from optimizer.grade.markdown import render_markdown
from optimizer.grade.notes import analyst_notes
from optimizer.grade.outcome import GradeOutcome
from optimizer.inputs.evals import Eval

DIM = s.RubricDimension(id="Q1", name="clarity", description="Clear", weight=1.0)
E1 = Eval(id=1, name="One", prompt="p1", expectations=["A", "B"])
E2 = Eval(id=2, name="Two", prompt="p2", expectations=["A2", "B2"], rubric=[DIM])


@dataclass
class Rec:
    configuration: str
    run_number: int
    duration_s: float
    tokens: int
    skill_invoked: bool | None = None
    status: str = "ok"


def outcome(
    ev: Eval, results: list[bool], *, clarity: int | None = None, status: str = "ok"
) -> GradeOutcome:
    items = [
        s.GradedExpectation(text=t, passed=p, evidence="e")
        for t, p in zip(ev.expectations, results, strict=True)
    ]
    passed = sum(results)
    rate = passed / len(results)
    rubric = None
    normalized = None
    if ev.rubric and status != "judge_error":
        normalized = (clarity or 0) / 5
        rubric = s.RubricSummary(weighted_mean=clarity or 0, normalized=normalized)
    grading = s.Grading(
        expectations=items,
        summary=s.PassSummary(
            passed=passed, failed=len(results) - passed, total=len(results), pass_rate=rate
        ),
        rubric_scores={"clarity": s.RubricScore(score=clarity, evidence="x")} if clarity else None,
        rubric_summary=rubric,
    )
    score = (
        None
        if status == "judge_error"
        else scoring.run_score(rate, normalized, bool(ev.rubric), Scoring())
    )
    return GradeOutcome(
        status,
        grading,
        s.Structural(
            expectations=[],
            summary=s.PassSummary(passed=0, failed=0, total=0, pass_rate=0),
            gate_passed=True,
        ),
        rate,
        normalized,
        score,
        "bad reply" if status == "judge_error" else None,
    )


def run(ev, config, n, results, time, tokens, **kw):
    invoked = kw.pop("invoked", True if config == "with_skill" else None)
    return (ev, Rec(config, n, time, tokens, invoked), outcome(ev, results, **kw))


def dataset() -> dict[str, list]:
    return {
        "with_skill": [
            run(E1, "with_skill", 1, [True, True], 10, 100),
            run(E1, "with_skill", 2, [True, False], 20, 300, invoked=False),
            run(E2, "with_skill", 1, [True, False], 30, 200, clarity=4),
            run(E2, "with_skill", 2, [True, True], 40, 400, clarity=5, status="judge_error"),
        ],
        "without_skill": [
            run(E1, "without_skill", 1, [True, False], 5, 50),
            run(E1, "without_skill", 2, [True, False], 5, 50),
            run(E2, "without_skill", 1, [False, False], 10, 100, clarity=2),
            run(E2, "without_skill", 2, [True, False], 10, 100, clarity=2),
        ],
    }


def bench(data=None) -> s.Benchmark:
    return aggregate(
        "demo",
        [E1, E2],
        data or dataset(),
        skill_path="/skills/demo",
        executor_model="m1",
        analyzer_model="m2",
        timestamp="2026-11-21T00:00:00Z",
        runs_per_configuration=2,
        simulated=True,
    )


def test_summary_numbers_match_hand_computation():
    b = bench()
    ws, wo = b.run_summary.with_skill, b.run_summary.without_skill
    # pass rate: per-eval means (0.75, 0.5) -> 0.625; the judge_error run is out
    assert ws.pass_rate.mean == 0.625
    assert ws.pass_rate.stddev == pytest.approx(math.sqrt(1 / 12), abs=1e-4)  # runs 1, .5, .5
    assert (ws.pass_rate.min, ws.pass_rate.max) == (0.5, 1.0)
    assert wo.pass_rate.mean == 0.375 and wo.pass_rate.stddev == 0.25
    low, high = stats.mean_ci([0.75, 0.5], bounds=(0.0, 1.0))
    assert (
        ws.pass_rate.model_extra["ci_low"] == round(low, 4) == 0.0
    )  # t(1 df) reaches past 0 and 1
    assert ws.pass_rate.model_extra["ci_high"] == round(high, 4) == 1.0
    assert ws.pass_rate.model_extra["ci_evals"] == 2
    # time and tokens keep the judge_error run: the executor spent them
    assert ws.time_seconds.mean == 25.0 and wo.time_seconds.mean == 7.5
    assert ws.tokens.mean == 250 and wo.tokens.mean == 75
    # overall efficiency: E1 (1 + .5)/2, E2 .4*.5 + .6*.8 = .68
    assert ws.overall_efficiency.mean == pytest.approx(0.715, abs=1e-4)
    assert wo.overall_efficiency.mean == pytest.approx((0.5 + 0.34) / 2, abs=1e-4)
    sd = stats.stddev([1.0, 0.5, 0.68])
    assert ws.overall_efficiency.stddev == pytest.approx(sd, abs=1e-4)
    assert ws.consistency == pytest.approx(1 - sd / 0.715, abs=1e-3)
    assert ws.rubric_normalized.mean == 0.8 and wo.rubric_normalized.mean == 0.4
    assert ws.rubric_dimensions["clarity"].mean == 4 and wo.rubric_dimensions["clarity"].mean == 2
    assert b.run_summary.delta == {
        "pass_rate": "+0.25",
        "time_seconds": "+17.5",
        "tokens": "+175",
        "rubric_normalized": "+0.40",
        "overall_efficiency": "+0.29",  # .715 - .42 = .2949…
    }


def test_runs_counts_and_per_eval_table():
    b = bench()
    extra = b.model_extra
    assert extra["judge_errors"] == 1 and extra["exec_errors"] == 0
    assert [(r.eval_id, r.configuration, r.run_number) for r in b.runs] == [
        (1, "with_skill", 1),
        (1, "with_skill", 2),
        (1, "without_skill", 1),
        (1, "without_skill", 2),
        (2, "with_skill", 1),
        (2, "with_skill", 2),
        (2, "without_skill", 1),
        (2, "without_skill", 2),
    ]
    first = b.runs[0]
    assert first.result.model_dump() == {
        "pass_rate": 1.0,
        "passed": 2,
        "failed": 0,
        "total": 2,
        "time_seconds": 10.0,
        "tokens": 100,
        "tool_calls": 0,
        "errors": 0,
    }
    assert b.runs[5].model_extra["status"] == "judge_error" and b.runs[5].notes[0].startswith(
        "judge_error"
    )
    per = {row["eval_id"]: row for row in extra["per_eval"]}
    assert per[1]["with_skill"] == {
        "mean": 0.75,
        "pass_rate": 0.75,
        "runs": 2,
        "judge_errors": 0,
        "unscored": 0,
    }
    assert per[2]["with_skill"] == {
        "mean": 0.68,
        "pass_rate": 0.5,
        "runs": 2,
        "judge_errors": 1,
        "unscored": 0,
    }
    assert per[1]["delta"] == "+0.25" and per[2]["delta"] == "+0.34"
    assert b.metadata.evals_run == [1, 2] and b.metadata.model_extra["simulated"] is True
    s.Benchmark.model_validate(b.model_dump(mode="json"))  # what write_json checks


def test_delta_does_not_depend_on_order():
    base = bench().model_dump(mode="json")
    for seed in range(5):
        data = dataset()
        rng = random.Random(seed)
        for runs in data.values():
            rng.shuffle(runs)
        reordered = dict(reversed(list(data.items())))  # without_skill first
        got = aggregate(
            "demo",
            [E2, E1],
            reordered,
            skill_path="/skills/demo",
            executor_model="m1",
            analyzer_model="m2",
            timestamp="2026-11-21T00:00:00Z",
            runs_per_configuration=2,
            simulated=True,
        )
        assert got.model_dump(mode="json") == base


def test_delta_strings():
    assert delta_string("pass_rate", 0.5) == "+0.50"
    assert delta_string("time_seconds", 13) == "+13.0"
    assert delta_string("tokens", 1700) == "+1700"
    assert delta_string("tokens", -250.4) == "-250"
    assert delta_string("pass_rate", -0.0001) == "+0.00"  # no direction that rounding erased


def test_analyst_notes():
    notes = analyst_notes([E1, E2], dataset())
    kinds = [(n.kind, n.eval_id, n.expectation) for n in notes]
    assert ("judge_error", None, None) in kinds
    assert ("non_discriminating", 1, "A") in kinds  # passes everywhere it was judged
    assert ("flaky", 1, "B") in kinds  # with_skill: pass then fail
    assert ("flaky", 2, "A2") in kinds  # without_skill: fail then pass
    assert ("skill_not_invoked", 1, None) in kinds
    assert ("skill_hurts", 1, None) not in kinds
    cost = next(n for n in notes if n.kind == "cost")
    assert cost.text == (
        "The skill costs +17.5 s and +175 tokens per run on average, and changes the "
        "pass rate by +0.25"
    )
    assert bench().notes == [n.text for n in notes]


def test_a_note_that_lists_ten_runs_of_twelve_says_how_many_more():
    many = [
        run(E1, "with_skill", n, [True, True], 1, 1, status="judge_error") for n in range(1, 13)
    ]
    note = next(n for n in analyst_notes([E1], {"with_skill": many}) if n.kind == "judge_error")
    assert note.text.startswith("12 runs had a judge error, excluded from the means: ")
    assert note.text.endswith("eval 1 with_skill run 10, and 2 more"), note.text


def test_skill_hurts_and_exec_errors():
    data = {
        "with_skill": [
            run(E1, "with_skill", 1, [False, False], 1, 1),
            (
                E1,
                Rec("with_skill", 2, 1, 1, True, "error"),
                GradeOutcome(
                    "exec_error",
                    outcome(E1, [False, False]).grading,
                    outcome(E1, [False, False]).structural,
                    0.0,
                    None,
                    0.0,
                    "run failed: x",
                ),
            ),
        ],
        "without_skill": [run(E1, "without_skill", 1, [True, False], 1, 1)],
    }
    b = aggregate("demo", [E1], data, timestamp="t")
    assert b.model_extra["exec_errors"] == 1
    assert b.run_summary.with_skill.pass_rate.mean == 0.0  # the failed run counts, as 0
    kinds = [n.kind for n in analyst_notes([E1], data)]
    assert "skill_hurts" in kinds and "exec_error" in kinds
    assert any("the skill hurts" in n for n in b.notes)


def test_without_baseline():
    b = aggregate("demo", [E1], {"with_skill": dataset()["with_skill"][:2]}, timestamp="t")
    assert b.run_summary.without_skill is None and b.run_summary.delta == {}
    assert b.model_extra["per_eval"][0]["without_skill"] is None
    assert "Without skill" in render_markdown(b)


def test_render_markdown():
    md = render_markdown(bench())
    assert md.startswith("# Skill benchmark: demo")
    assert "SIMULATION" in md
    assert "| Pass rate | 62% ± 29%" in md and "| +0.25 |" in md
    assert "| 1: One | 0.75 (2 runs) | 0.50 (2 runs) | +0.25 |" in md
    assert "| 2: Two | 0.68 (2 runs, 1 judge error) |" in md
    assert "(s)" not in md  # counts agree with their nouns
    assert "## Notes" in md and "does not discriminate" in md


def test_scoring_helpers():
    assert stats.stat([]) == {"mean": 0.0, "stddev": 0.0, "min": 0.0, "max": 0.0}
    assert stats.stat([3.0])["stddev"] == 0.0
    assert stats.consistency([0.8, 0.8]) == 1.0
    assert stats.consistency([0.0, 0.0]) == 1.0
    assert stats.consistency([0.0, 1.0]) == 0.0  # clamped at 0
    assert scoring.run_score(0.5, 0.8, True, Scoring()) == pytest.approx(0.68)
    assert scoring.run_score(0.5, None, False, Scoring()) == 0.5
    low, high = stats.mean_ci([0.5, 0.7, 0.9])
    assert (low, high) == pytest.approx(
        (0.7 - 4.3027 * 0.2 / math.sqrt(3), 0.7 + 4.3027 * 0.2 / math.sqrt(3)), abs=1e-3
    )
    assert stats.mean_ci([0.4]) == (0.4, 0.4)
    assert stats.t_quantile(0.975, 1) == pytest.approx(12.7062, abs=1e-3)


def test_intervals_stay_inside_what_a_metric_can_take_and_say_how_many_evals():
    """A report once showed a score of 0.315 [-0.922, 1.552] and 95% CI -79.2 s–109.0 s."""
    e3 = Eval(id=3, name="Three", prompt="p3", expectations=["A3", "B3"], rubric=[DIM])
    data = {
        "with_skill": [
            run(E1, "with_skill", 1, [True, True], 1, 10),
            run(E2, "with_skill", 1, [False, False], 180, 9000, clarity=1),
            run(e3, "with_skill", 1, [True, True], 2, 20, clarity=5),
        ]
    }
    b = aggregate(
        "demo",
        [E1, E2, e3],
        data,
        skill_path="/s",
        executor_model="m",
        analyzer_model="m",
        timestamp="2026-11-21T00:00:00Z",
        runs_per_configuration=1,
        simulated=False,
    )
    ws = b.run_summary.with_skill
    for name, (low, high) in {
        "pass_rate": (0, 1),
        "overall_efficiency": (0, 1),
        "rubric_normalized": (0, 1),
        "time_seconds": (0, math.inf),
        "tokens": (0, math.inf),
    }.items():
        extra = getattr(ws, name).model_extra
        assert low <= extra["ci_low"] <= extra["ci_high"] <= high, name
    raw_low = stats.mean_ci([1.0, 180.0, 2.0])[0]
    assert raw_low < 0 and ws.time_seconds.model_extra["ci_low"] == 0.0
    assert (
        ws.pass_rate.model_extra["ci_evals"] == 3
        and ws.rubric_normalized.model_extra["ci_evals"] == 2
    )
    dim = ws.rubric_dimensions["clarity"].model_extra
    assert 1 <= dim["ci_low"] <= dim["ci_high"] <= 5
    assert ws.pass_rate.mean == pytest.approx(2 / 3, abs=1e-4)  # the mean itself is untouched
    md = render_markdown(b)
    assert "n=3 evals" in md and "CI -" not in md and "–-" not in md


def test_one_eval_gives_no_interval_rather_than_a_zero_wide_one():
    b = bench(
        {
            "with_skill": [
                run(E1, "with_skill", 1, [True, False], 10, 100),
                run(E1, "with_skill", 2, [True, True], 20, 100),
            ]
        }
    )
    assert "ci_low" not in b.run_summary.with_skill.overall_efficiency.model_extra
    assert "CI" not in render_markdown(b)


def test_means_equal_as_printed_are_no_harm(monkeypatch):
    # "the skill hurts - with_skill 0.20, without_skill 0.20" contradicted its own numbers.
    from optimizer.grade import notes

    data = {
        "with_skill": [run(E1, "with_skill", 1, [True, False], 1, 1)],
        "without_skill": [run(E1, "without_skill", 1, [True, False], 1, 1)],
    }
    means = {"with_skill": 0.198, "without_skill": 0.2}
    monkeypatch.setattr(
        notes, "eval_means", lambda items: {1: (means[config_of(items[0])],)} if items else {}
    )
    assert "skill_hurts" not in [n.kind for n in notes.analyst_notes([E1], data)]
    means["with_skill"] = 0.19
    hurt = next(n for n in notes.analyst_notes([E1], data) if n.kind == "skill_hurts")
    assert "with_skill scores 0.19 on average, without_skill 0.20" in hurt.text
