"""The budget is a ceiling (docs/design.md §19): a search whose next proposal is no longer worth its
cost stops, says where ("stopped at $1.20 of $4.00: 4 proposals without a step") in status and
summary.md, and keeps the rest of its budget; `--spend-all` (run, resume, schedule) spends it."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from inprocess import EXAMPLE, cli

from optimizer import words
from optimizer.report import status as views
from optimizer.search import stops

# Every proposal is neutral (no good, overfit or harmful edit), so no child ever steps: the search
# plateaus whatever the seed draws. A fluke win would only move the stop later.
NEUTRAL = (
    "--provider", "sim", "--set", "sim.proposal_quality=0", "--set", "sim.overfit_rate=0",
    "--set", "sim.harmful_rate=0", "--set", "evals.runs_per_eval=1",
    # a cheap step takes an equal child 40% of the time: the guarded rule keeps the world still
    "--set", "selection.step=guarded",
    "--budget-usd", "40", "--max-iterations", "6",
)  # fmt: skip
SAID = re.compile(r"stopped at \$(\d+\.\d\d) of \$40\.00: (\d+) proposals without a step")


def state(**kw) -> stops.LoopState:
    return stops.LoopState(spent_usd=1.2, **kw)


def test_the_stop_is_worded_once_with_its_dollars_and_count():
    assert words.not_worth_it(1.2, 4, 4) == "stopped at $1.20 of $4.00: 4 proposals without a step"
    assert words.not_worth_it(0.5, 4, 1).endswith(": 1 proposal without a step")
    assert words.after_stopped(words.not_worth_it(1.2, 4, 4)) == (
        "at $1.20 of $4.00: 4 proposals without a step"
    )


def test_the_rule_waits_for_its_minimum_of_proposals_without_a_step():
    rule = stops.worth_going_on(0.05, 4, 4.0)
    costly = {"proposals": 4, "search_usd": 1.0}  # $0.25 a proposal, no step yet
    assert rule(state(proposals_without_step=3, **costly)) is None
    assert rule(state(proposals_without_step=4, **costly)) == (
        "stopped at $1.20 of $4.00: 4 proposals without a step"
    )


def test_large_steps_from_cheap_proposals_are_worth_going_on_for():
    rule = stops.worth_going_on(0.05, 4, 4.0)
    # two steps of +0.20 at $0.10 a proposal: the next is expected to buy about +0.02 for $0.10
    rich = state(proposals=8, proposals_without_step=4, steps=(0.2, 0.2), search_usd=0.8)
    assert stops.expected_gain(rich) / stops.usd_per_proposal(rich) > 0.05  # type: ignore[operator]
    assert rule(rich) is None
    # the expected gain decays with every proposal without a step, until it is not worth it
    later = state(proposals=40, proposals_without_step=36, steps=(0.2, 0.2), search_usd=4.0)
    assert rule(later) is not None


def test_free_proposals_never_stop_on_their_price():
    rule = stops.worth_going_on(0.05, 4, 4.0)
    assert rule(state(proposals=9, proposals_without_step=9, search_usd=0.0)) is None


@pytest.fixture(scope="module")
def plateaued(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("plateau") / "run"
    with pytest.MonkeyPatch.context() as monkeypatch:
        cli(monkeypatch, None, "run", str(EXAMPLE), "--run-dir", str(run_dir), *NEUTRAL)
    return run_dir


def iterations(run_dir: Path) -> int:
    conn = sqlite3.connect(run_dir / "state.db")
    try:
        return conn.execute(
            "select count(*) from iterations where finished_at is not null"
        ).fetchone()[0]
    finally:
        conn.close()


def test_a_plateau_stops_before_the_limit_and_says_what_it_kept(plateaued, monkeypatch):
    info = views.status(plateaued)
    said = SAID.fullmatch(info["stop_reason"])
    assert said, info["stop_reason"]
    assert int(said.group(2)) >= 4 and float(said.group(1)) < 40
    assert iterations(plateaued) < 6
    assert info["ended"] == info["stop_reason"]
    shown = cli(monkeypatch, None, "status", str(plateaued))
    assert re.search(r"stopped\s+at \$\d+\.\d\d of \$40\.00: \d+ proposals without a step", shown)
    summary = (plateaued / "summary.md").read_text()
    assert f"— {info['stop_reason']}." in summary


def test_spend_all_goes_on_to_the_limit(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    cli(monkeypatch, None, "run", str(EXAMPLE), "--run-dir", str(run_dir), *NEUTRAL, "--spend-all")
    assert views.status(run_dir)["stop_reason"] == "reached 6 iterations"
    assert iterations(run_dir) == 6


def test_a_resume_with_spend_all_goes_on_where_the_plateau_stopped(
    plateaued, tmp_path, monkeypatch
):
    run_dir = Path(shutil.copytree(plateaued, tmp_path / "run"))
    before = iterations(run_dir)
    cli(monkeypatch, None, "resume", str(run_dir), "--spend-all")
    assert views.status(run_dir)["stop_reason"] == "reached 6 iterations"
    assert iterations(run_dir) == 6 > before


def test_schedule_spend_all_reaches_every_night(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "cron")
    monkeypatch.chdir(tmp_path)
    args = ("schedule", str(EXAMPLE), "--budget-usd", "4", "--provider", "sim", "--dry-run")
    assert "loop.spend_all" not in cli(monkeypatch, None, *args)
    assert "--set loop.spend_all=true" in cli(monkeypatch, None, *args, "--spend-all")


def test_a_resume_after_the_plateau_searches_again_and_says_so(plateaued, tmp_path, monkeypatch):
    run_dir = Path(shutil.copytree(plateaued, tmp_path / "run"))
    before = iterations(run_dir)
    said = cli(monkeypatch, None, "resume", str(run_dir))
    assert "the count of proposals without a step starts again here" in said
    assert iterations(run_dir) > before
    assert SAID.fullmatch(views.status(run_dir)["stop_reason"]) or iterations(run_dir) == 6


def test_a_step_below_min_step_does_not_put_the_plateau_off():
    from optimizer.store.iterations import Iteration

    finished = [
        Iteration(1, "v0", "done", {"0": {"label": "v1"}, "1": {"label": "v2"}}, None, "t"),
        Iteration(2, "v2", "done", {"0": {"label": "v3"}, "1": {"label": "v4"}}, None, "t"),
    ]
    versions = [
        {"label": "v0", "parent": None, "iteration": 0, "decision": "baseline", "score": 0.50},
        {"label": "v1", "parent": "v0", "iteration": 1, "decision": "lost", "score": 0.45},
        {"label": "v2", "parent": "v0", "iteration": 1, "decision": "won", "score": 0.70},
        {"label": "v3", "parent": "v2", "iteration": 2, "decision": "lost", "score": 0.60},
        {"label": "v4", "parent": "v2", "iteration": 2, "decision": "won", "score": 0.71},
    ]

    def without(min_step: float) -> int:
        return stops.from_ledger(
            finished=finished, versions=versions, spent={}, best="v4", spent_usd=1.0,
            min_step=min_step,
        ).proposals_without_step  # fmt: skip

    assert without(0.0) == 0  # v4's +0.01 is a step
    assert without(0.05) == 2  # it is not one worth its cost: v3 and v4 since v2's +0.20
