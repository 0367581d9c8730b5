"""`optimizer gate BASE HEAD`: the non-inferiority bound (a Student-t bound over evals that never
collapses to zero width) and the command on the simulator: an unchanged skill passes, a skill
whose instructions are gone fails, bad input exits 2 and writes nothing."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from optimizer.decide import noninferiority as ni
from optimizer.decide.stats import t_quantile

EXAMPLE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "csv-report"


# -- the statistics ---------------------------------------------------------------------------------
def test_alike_differences_never_give_a_zero_width_interval():
    found = ni.check({1: 0.0, 2: 0.0, 3: 0.0}, confidence=0.95, margin=0.05, step=0.25)
    assert found.floored
    assert found.high - found.low > 0
    # the floor is one eval moved by one step: sd of (0.25, 0, 0) = 0.25/√3
    assert found.spread == pytest.approx(0.25 / math.sqrt(3))
    assert found.outcome == "inconclusive"  # three coarse evals cannot show 0.05


def test_the_bound_uses_student_t_over_evals_not_a_normal_quantile():
    diffs = {1: 0.10, 2: -0.02, 3: 0.04}
    found = ni.check(diffs, confidence=0.95, margin=0.05, step=0.01)
    sd = math.sqrt(sum((d - 0.04) ** 2 for d in diffs.values()) / 2)
    assert found.t == pytest.approx(t_quantile(0.95, 2))  # 2.92, where a normal would say 1.645
    assert found.low == pytest.approx(0.04 - t_quantile(0.95, 2) * sd / math.sqrt(3))
    assert not found.floored


def test_outcomes_follow_the_margin():
    step = 0.01
    assert (
        ni.check(
            {e: 0.0 + 0.01 * (e % 2) for e in range(10)}, confidence=0.95, margin=0.05, step=step
        ).outcome
        == "not_worse"
    )
    assert (
        ni.check(
            {e: -0.5 + 0.01 * (e % 2) for e in range(10)}, confidence=0.95, margin=0.05, step=step
        ).outcome
        == "worse"
    )
    # centred on −margin, reaching past it and past zero: neither shown
    assert (
        ni.check(
            {e: -0.2 + 0.3 * (e % 2) for e in range(10)}, confidence=0.95, margin=0.05, step=step
        ).outcome
        == "inconclusive"
    )


def test_a_head_whose_whole_interval_lies_below_zero_is_worse_even_within_a_margins_reach():
    found = ni.check(
        {e: -0.06 + 0.02 * (e % 2) for e in range(10)}, confidence=0.95, margin=0.05, step=0.01
    )
    assert found.low < -0.05 < found.high < 0  # below zero throughout, reaching past −margin
    assert found.outcome == "worse" and found.reason.startswith("worse: ")
    assert "upper bound is below zero" in found.reason


def test_one_eval_is_refused():
    with pytest.raises(ValueError):
        ni.check({1: 0.0}, confidence=0.95, margin=0.05, step=0.1)


def test_resolution_is_the_coarsest_evals_step():
    assert ni.resolution(3, {1: 4, 2: 8}) == pytest.approx(1 / 12)
    assert ni.resolution(2, {1: 0}) == pytest.approx(0.5)


# -- the command on the simulator -------------------------------------------------------------------
@pytest.fixture
def skills(tmp_path) -> tuple[Path, Path]:
    if not (EXAMPLE / "evals" / "evals.json").is_file():
        pytest.skip("examples/csv-report is not there")
    base = Path(shutil.copytree(EXAMPLE, tmp_path / "base"))
    return base, tmp_path


def _harmful(base: Path, dest: Path) -> Path:
    """HEAD keeps the name and description but its instructions are gone: it tells the agent to
    write nothing. In any sensible world that scores far below the skill."""
    head = Path(shutil.copytree(base, dest))
    front = (base / "SKILL.md").read_text().split("---", 2)[1]
    (head / "SKILL.md").write_text(
        f"---{front}---\n\n# CSV report\n\nDo not write any file and do not "
        'read the data. Reply only with the word "no".\n'
    )
    return head


def test_an_unchanged_skill_passes_and_spends_nothing(cli, skills):
    base, tmp = skills
    same = Path(shutil.copytree(base, tmp / "same"))
    result = cli(
        "gate", base, same, "--provider", "sim", "--out", tmp / "g", "--comment", tmp / "c.md"
    )
    assert result.exit_code == 0, result.output
    assert "unchanged" in result.output
    assert "Cost: $0.00" in (tmp / "c.md").read_text()


@pytest.mark.slow
def test_a_reworded_skill_is_not_worse(cli, skills):
    base, tmp = skills
    head = Path(shutil.copytree(base, tmp / "head"))
    text = (head / "SKILL.md").read_text().replace("skim in a minute", "skim in one minute")
    (head / "SKILL.md").write_text(text + "\n")
    # 16 runs an eval: in the simulated world a run's pass rate varies by about 0.2, and over 5
    # evals 3 runs leave the lower bound near -0.12, past the margin (docs/nightly.md); 10 runs
    # left it at -0.052 in the world where the agent reads its inputs.
    result = cli(
        "gate",
        base,
        head,
        "--provider",
        "sim",
        "--runs",
        "16",
        "--out",
        tmp / "g",
        "--comment",
        tmp / "c.md",
    )
    assert result.exit_code == 0, result.output
    body = (tmp / "c.md").read_text()
    assert "not worse" in body and "lower bound" in body and "| 1 " in body


@pytest.mark.slow
def test_a_harmful_edit_fails_with_a_comment(cli, skills):
    base, tmp = skills
    head = _harmful(base, tmp / "head")
    result = cli(
        "gate", base, head, "--provider", "sim", "--out", tmp / "g", "--comment", tmp / "c.md"
    )
    assert result.exit_code == 1, result.output
    body = (tmp / "c.md").read_text()
    assert body.startswith("## Skill gate: ❌")
    assert "SIMULATED" in body and "### Per eval" in body and "Cost: $" in body
    assert "Largest drop: eval " in body
    rows = [line for line in body.splitlines() if line.startswith("| ") and line.count("|") == 6][
        1:
    ]
    assert len(rows) == 5  # one per eval, each with its own difference
    diffs = [float(r.split("|")[4]) for r in rows]
    assert all(d < 0 for d in diffs)
    assert (tmp / "g" / "eval-1" / "head" / "run-1" / "grading.json").is_file()
    assert not (tmp / "g" / "head" / "evals").exists()  # the agent never sees the expectations


@pytest.mark.slow
def test_the_two_sides_runs_go_out_interleaved(cli, skills):
    """BASE's and HEAD's runs in one seeded order, never BASE's and then HEAD's: an effect shared
    by a stretch of time (provider load, a cache) falls on both sides alike."""
    import sqlite3

    base, tmp = skills
    head = _harmful(base, tmp / "head")
    args = ("--provider", "sim", "--set", "execute.concurrency=1")
    result = cli("gate", base, head, *args, "--out", tmp / "g")
    assert result.exit_code == 1, result.output
    with sqlite3.connect(tmp / "g" / "state.db") as db:
        sides = [c for (c,) in db.execute("select version from trials order by rowid")]
    assert sorted(set(sides)) == ["base", "head"] and len(sides) == 2 * 5 * 3
    switches = sum(a != b for a, b in zip(sides, sides[1:], strict=False))
    assert switches >= 6  # one side after the other switches once


@pytest.mark.parametrize(
    "case",
    [
        "no-skill-md",
        "margin",
        "one-eval",
        "out-not-empty",
        "budget",
        "no-key",
        "comment-is-a-folder",
        "comment-under-a-file",
    ],
)
def test_bad_input_exits_2_and_writes_nothing(cli, skills, case, monkeypatch):
    base, tmp = skills
    head = Path(shutil.copytree(base, tmp / "head"))
    (head / "SKILL.md").write_text((head / "SKILL.md").read_text() + "\nOne more line.\n")
    provider = "anthropic" if case == "no-key" else "sim"
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    args = [base, head, "--provider", provider, "--out", tmp / "g", "--comment", tmp / "c.md"]
    if case == "no-skill-md":
        (head / "SKILL.md").unlink()
    elif case == "margin":
        args += ["--margin", "1.5"]
    elif case == "one-eval":
        one = tmp / "one.json"
        data = (base / "evals" / "evals.json").read_text()
        raw = json.loads(data)
        raw["evals"] = raw["evals"][:1]
        one.write_text(json.dumps(raw))
        args += ["--evals", one]
    elif case == "out-not-empty":
        (tmp / "g").mkdir()
        (tmp / "g" / "x").write_text("mine")
    elif case == "budget":
        args += ["--budget-usd", "0"]
    elif case == "comment-is-a-folder":  # was found only once the runs were paid for (exit 1)
        (tmp / "c.md").mkdir()
    elif case == "comment-under-a-file":
        (tmp / "notes").write_text("mine")
        args[args.index("--comment") + 1] = tmp / "notes" / "c.md"
    result = cli("gate", *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.startswith("error:")]) == 1
    assert not (tmp / "c.md").is_file()
    assert case == "out-not-empty" or not (tmp / "g").exists()


def test_a_head_whose_instructions_are_deleted_is_worse_not_bad_input(cli, skills):
    base, tmp = skills
    head = Path(shutil.copytree(base, tmp / "head"))
    front = (base / "SKILL.md").read_text().split("---", 2)[1]
    (head / "SKILL.md").write_text(
        f"---{front}---\n"
    )  # the body is gone: not a valid skill any more
    result = cli(
        "gate", base, head, "--provider", "sim", "--out", tmp / "g", "--comment", tmp / "c.md"
    )
    assert result.exit_code == 1, result.output
    body = (tmp / "c.md").read_text()
    assert body.startswith("## Skill gate: ❌ worse") and "not a valid skill" in body


def test_a_budget_that_runs_out_gives_no_decision_and_no_number(cli, skills):
    base, tmp = skills
    head = _harmful(base, tmp / "head")
    result = cli(
        "gate",
        base,
        head,
        "--provider",
        "sim",
        "--budget-usd",
        "0.05",
        "--out",
        tmp / "g",
        "--comment",
        tmp / "c.md",
    )
    assert result.exit_code == 1, result.output
    body = (tmp / "c.md").read_text()
    assert body.startswith("## Skill gate: ❌ no decision") and "budget ran out" in body
    assert "lower bound" not in body  # a partial measurement is no test


def test_on_these_tasks_an_edit_that_breaks_one_task_of_five_is_not_passed():
    base = {e: [0.8, 0.75, 0.8] for e in range(5)}
    head = {e: ([0.2, 0.25, 0.2] if e == 0 else [0.8, 0.75, 0.8]) for e in range(5)}
    step = ni.resolution(3, dict.fromkeys(range(5), 4))
    found = ni.check_tasks(head, base, confidence=0.95, margin=0.05, step=step)
    assert found.outcome == "worse" and found.delta == pytest.approx(-0.11, abs=0.01)
    assert "on these tasks" in found.reason
    # the same numbers as a general claim (evals the units) cannot tell at 5 evals
    diffs = {e: sum(head[e]) / 3 - sum(base[e]) / 3 for e in range(5)}
    assert ni.check(diffs, confidence=0.95, margin=0.05, step=step).outcome != "worse"


def test_on_these_tasks_runs_that_scored_alike_cannot_claim_more_than_the_scores_resolve():
    same = {e: [0.5, 0.5, 0.5] for e in range(5)}
    step = ni.resolution(3, dict.fromkeys(range(5), 4))
    found = ni.check_tasks(same, same, confidence=0.95, margin=0.05, step=step)
    assert found.floored and found.spread == pytest.approx(step / 5)
    assert found.low < 0 < found.high


def _runs(side: str, scores: list[float | None]) -> list:
    from optimizer.grade.unit import Scored

    return [
        Scored(f"eval/{side}/run-{n}", 0, n, side, "ok" if s is not None else "unscored", s, 0.0)
        for n, s in enumerate(scores, 1)
    ]


def test_runs_head_could_not_score_count_against_it_never_for_it(tmp_path):
    """A judge that fails on HEAD's worst outputs (docs/design.md §7): dropping those runs
    lifted HEAD's means and passed an edit that scores the same as BASE; counted as failures
    they keep "not worse" from being shown."""
    from optimizer.config import Settings
    from optimizer.decide.noninferiority import GateResult
    from optimizer.inputs.evals import load_evals
    from optimizer.search.gate import _decide
    from optimizer.store.db import Store

    evalset = load_evals(EXAMPLE)
    same = [0.2, 0.5, 0.8, 0.2, 0.5, 0.8]
    lost = [None if s <= 0.4 else s for s in same]  # the worst third left unscored
    scores = {
        "base": {e: _runs("base", same) for e in evalset.ids},
        "head": {e: _runs("head", lost) for e in evalset.ids},
    }
    result = GateResult(EXAMPLE, EXAMPLE, evalset.source, False, 6, None)
    store = Store(tmp_path / "state.db")
    try:
        found = _decide(result, evalset, scores, Settings(), 0.05, store)
    finally:
        store.close()
    assert found.unscored == 2 * len(evalset.ids)
    assert found.test is not None and found.test.delta < 0  # 0.2 → 0 on a third of HEAD's runs
    assert not found.passed


def test_a_gate_our_failures_left_mostly_unscored_makes_no_bound_and_never_says_worse(tmp_path):
    from optimizer.config import Settings
    from optimizer.decide.noninferiority import GateResult
    from optimizer.inputs.evals import load_evals
    from optimizer.search.gate import _decide
    from optimizer.store.db import Store

    evalset = load_evals(EXAMPLE)
    scores = {
        "base": {e: _runs("base", [0.5, None, None]) for e in evalset.ids},
        "head": {e: _runs("head", [None, None, 0.5]) for e in evalset.ids},
    }
    result = GateResult(EXAMPLE, EXAMPLE, evalset.source, False, 3, None)
    store = Store(tmp_path / "state.db")
    try:
        found = _decide(result, evalset, scores, Settings(), 0.05, store)
    finally:
        store.close()
    assert found.test is None and not found.passed
    assert "could not be scored" in found.note and "max_unscored_rate" in found.note


@pytest.mark.parametrize("tasks", [True, False])
def test_the_comments_footnote_names_the_units_its_headline_does(tasks):
    from optimizer.decide.noninferiority import GateResult
    from optimizer.report import gate_comment

    head = {e: [0.6, 0.7, 0.65] for e in range(1, 6)}
    base = {e: [0.6, 0.62, 0.7] for e in range(1, 6)}
    if tasks:
        test = ni.check_tasks(head, base, confidence=0.95, margin=0.05, step=0.25)
    else:
        diffs = {e: sum(head[e]) / 3 - sum(base[e]) / 3 + 0.01 * e for e in head}
        test = ni.check(diffs, confidence=0.95, margin=0.05, step=0.25)
    units = "runs" if tasks else "evals"
    result = GateResult(Path("b"), Path("h"), Path("e.json"), False, 3, test)
    body = gate_comment.markdown(result)
    assert f"Student-t over the {units}" in body and "| 90% CI (two-sided) |" in body
    assert ("Student-t over the runs" in test.reason) is tasks


def test_the_comment_names_every_eval_that_dropped_clearly():
    """An edit that breaks two tasks of several: both are named, largest drop first, whatever
    the mean over all of them says."""
    from optimizer.decide.noninferiority import GateResult
    from optimizer.report import gate_comment

    rows = {1: -0.45, 2: 0.02, 3: -0.05, 4: -0.3, 5: 0.0}
    per_eval = {
        e: {"name": f"task {e}", "base": 0.7, "head": 0.7 + d, "diff": d, "base_runs": 3,
            "head_runs": 3}
        for e, d in rows.items()
    }  # fmt: skip
    result = GateResult(Path("b"), Path("h"), Path("e.json"), False, 3, None, per_eval)
    body = gate_comment.markdown(result)
    assert "Dropped by 0.20 or more: eval 1 (-0.450), eval 4 (-0.300)." in body.replace("−", "-")
