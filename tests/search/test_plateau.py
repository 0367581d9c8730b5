"""The budget is a ceiling (docs/design.md §9): a search whose next proposal, with the noise taken
out of its evidence, is no longer worth its cost stops, says where ("stopped at $2.10 of $25.00:
the last 8 proposals are worth +0.002 expected; resume to go on") in status and summary.md, and
keeps the rest of its budget; `--spend-all` (run, resume, schedule) spends it."""

from __future__ import annotations

import random
import re
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from inprocess import EXAMPLE, cli

from optimizer import words
from optimizer.budget import stops, worth
from optimizer.decide.stats import t_quantile
from optimizer.report import status as views
from optimizer.store.iterations import Iteration
from optimizer.store.versions import DecisionNumbers, Version

# Every proposal is neutral (no good, overfit or harmful edit), so no child ever steps: the search
# plateaus whatever the seed draws. A fluke win would only move the stop later.
NEUTRAL = (
    "--provider", "sim", "--set", "sim.proposal_quality=0", "--set", "sim.overfit_rate=0",
    "--set", "sim.harmful_rate=0", "--set", "evals.runs_per_eval=1",
    # a cheap step takes an equal child 40% of the time: the guarded rule keeps the world still
    "--set", "selection.step=guarded",
    "--budget-usd", "40", "--max-iterations", "6", "--set", "loop.stop_window=4",
)  # fmt: skip
SAID = re.compile(
    r"stopped at \$(\d+\.\d\d) of \$40\.00: the last (\d+) proposals are worth "
    r"([+-]\d\.\d{3}) expected; resume to go on"
)
# A cheap step's interval: two-sided 20% (the 60% one-sided bound) over 4 evals, t with 3 df.
T = t_quantile(0.6, 3)
USD = 0.40  # a proposal's cost: the simulator's csv-report costs about this much


def ledger(thetas: list[float], *, se: float = 0.1, seed: int = 0, mirrored: bool = False):
    """A synthetic run: proposal n from v0 with true gain thetas[n], its Δ that gain plus noise of
    standard error `se`, decided as a cheap step decides (won when the 60% bound is above zero).
    `mirrored`: the noise comes in ± pairs, so equal children's Δs average exactly zero."""
    rng = random.Random(seed)
    noise = [rng.gauss(0, se) for _ in range((len(thetas) + 1) // 2)]
    if mirrored:
        noise = [x for e in noise for x in (e, -e)]
    else:
        noise += [rng.gauss(0, se) for _ in range(len(thetas))]
    finished, spent = [], {}
    versions = [
        Version.from_row(
            {"label": "v0", "parent": None, "iteration": 0, "decision": "baseline", "score": 0.6}
        )
    ]
    for n, theta in enumerate(thetas, 1):
        d = theta + noise[n - 1]
        low, high = d - T * se, d + T * se
        verdict = "won" if low > 0 else "lost" if high < 0 else "tie"
        versions.append(
            replace(
                Version.from_row(
                    {
                        "label": f"v{n}",
                        "parent": "v0",
                        "iteration": n,
                        "decision": verdict,
                        "score": 0.6 + d,
                    }
                ),
                decided=DecisionNumbers(d, low, high, 0.2, 4, "general"),
            )  # fmt: skip
        )
        finished.append(Iteration(n, "v0", "done", {"0": {"label": f"v{n}"}}, None, "t"))
        spent[f"v{n}"] = USD
    return finished, versions, spent


def first_stop(thetas: list[float], budget: float = 25.0, **kw) -> tuple[int | None, str | None]:
    """After which proposal the rule first stops the synthetic run (None: it never does)."""
    finished, versions, spent = ledger(thetas, **kw)
    rule = stops.WorthGoingOn(None, 8, budget)
    for k in range(1, len(finished) + 1):
        state = stops.from_ledger(
            finished=finished[:k], versions=versions, spent=spent, best="v0", spent_usd=USD * k
        )
        if said := rule(state):
            return k, said
    return None, None


def test_the_stop_is_worded_once_with_its_dollars_time_and_worth():
    assert words.not_worth_it(2.1, 25, 9, 0.002, 7 * 3600 + 41 * 60) == (
        "stopped at $2.10 of $25.00 with 7h41m left: the last 9 proposals are worth +0.002 "
        "expected; resume to go on"
    )
    assert words.not_worth_it(0.5, 4, 1, 0.0).startswith("stopped at $0.50 of $4.00: the last 1 ")
    assert words.after_stopped(words.not_worth_it(1.2, 4, 8, 0.01)).startswith("at $1.20 of $4.00")


def test_a_run_of_equal_children_stops_after_its_window():
    # Noise in ± pairs: the children are equal to their parent and their Δs say so exactly.
    for seed in range(10):
        stopped, said = first_stop([0.0] * 24, seed=seed, mirrored=True)
        assert stopped is not None and stopped <= 24, seed
        assert said and said.startswith("stopped at $") and "the last 8 proposals are worth" in said


def test_equal_children_stop_though_40_percent_of_them_step():
    # Plain noise: an equal child steps 40% of the time; the rule still stops nearly every run
    # within 24 proposals, never before its window of 8.
    stopped = [first_stop([0.0] * 24, seed=seed)[0] for seed in range(40)]
    wins = sum(v.decision == "won" for seed in range(40) for v in ledger([0.0] * 24, seed=seed)[1])
    assert 0.3 < wins / (40 * 24) < 0.5  # the equal child's false steps are there
    assert all(k is None or k >= 8 for k in stopped)
    assert sum(k is not None for k in stopped) >= 36


def test_a_run_of_real_gains_does_not_stop():
    # Every other proposal gains +0.15 (0.19 of score a dollar): worth going on in every seed.
    for seed in range(20):
        assert first_stop([0.15, 0.0] * 20, seed=seed) == (None, None), seed


def test_a_run_that_stops_gaining_stops():
    stopped, _ = first_stop([0.15] * 8 + [0.0] * 40, seed=3, mirrored=True)
    assert stopped is not None and stopped > 8


def test_the_value_of_a_point_is_the_users_or_the_headroom_over_the_budget():
    assert stops.value_of_gain(0.05, 0.6, 25.0) == 0.05
    assert stops.value_of_gain(None, 0.6, 25.0) == pytest.approx(0.016)
    assert stops.value_of_gain(None, None, 25.0) is None  # v0 not measured: no stop
    # the user's value decides: a high one stops a run the derived value lets go on
    finished, versions, spent = ledger([0.15, 0.0] * 8, seed=1)
    state = stops.from_ledger(
        finished=finished, versions=versions, spent=spent, best="v0", spent_usd=USD * 16
    )
    assert stops.WorthGoingOn(None, 8, 25.0)(state) is None
    assert stops.WorthGoingOn(5.0, 8, 25.0)(state) is not None


def test_the_rule_reads_the_ledger_not_its_order():
    finished, versions, spent = ledger([0.15, 0.0, 0.0] * 6, seed=2)

    def state(rows):
        return stops.from_ledger(
            finished=finished, versions=rows, spent=spent, best="v0", spent_usd=USD * 18
        )

    shuffled = list(versions)
    random.Random(9).shuffle(shuffled)
    assert stops.outlook(state(versions)) == stops.outlook(state(list(reversed(shuffled))))


def test_the_noise_of_a_step_is_read_from_its_interval():
    se = worth.standard_error(0.05, 0.05 - T * 0.1, 0.05 + T * 0.1, 0.2, 3)
    assert se == pytest.approx(0.1)
    assert worth.false_step(0.2) == pytest.approx(0.4)  # a cheap step takes an equal child 40%
    # steps whose spread is all noise are worth the run's mean; a real spread keeps them apart
    quiet = worth.Prior(mean=0.0, spread=0.0)
    assert worth.shrunk(worth.Judged(True, 0.2, 0.1, 0.4), quiet) == 0.0
    loud = worth.Prior(mean=0.0, spread=0.01)
    assert worth.shrunk(worth.Judged(True, 0.2, 0.1, 0.4), loud) == pytest.approx(0.1)


def test_free_proposals_never_stop_on_their_price():
    rule = stops.WorthGoingOn(0.05, 8, 4.0)
    finished, versions, _ = ledger([0.0] * 12, seed=0)
    state = stops.from_ledger(
        finished=finished, versions=versions, spent={}, best="v0", spent_usd=0
    )
    assert rule(state) is None


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


@pytest.mark.slow
def test_a_plateau_stops_before_the_limit_and_says_what_it_kept(plateaued, monkeypatch):
    info = views.status(plateaued)
    said = SAID.fullmatch(info["stop_reason"])
    assert said, info["stop_reason"]
    assert int(said.group(2)) >= 4 and float(said.group(1)) < 40
    assert iterations(plateaued) < 6
    assert info["ended"] == info["stop_reason"]
    shown = cli(monkeypatch, None, "status", str(plateaued))
    assert re.search(r"stopped\s+at \$\d+\.\d\d of \$40\.00: the last \d+ proposals", shown)
    summary = (plateaued / "summary.md").read_text()
    assert f"— {info['stop_reason']}." in summary


@pytest.mark.slow
def test_spend_all_goes_on_to_the_limit(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    cli(monkeypatch, None, "run", str(EXAMPLE), "--run-dir", str(run_dir), *NEUTRAL, "--spend-all")
    assert views.status(run_dir)["stop_reason"] == "reached 6 iterations"
    assert iterations(run_dir) == 6


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_resume_after_the_plateau_searches_again_and_says_so(plateaued, tmp_path, monkeypatch):
    run_dir = Path(shutil.copytree(plateaued, tmp_path / "run"))
    before = iterations(run_dir)
    said = cli(monkeypatch, None, "resume", str(run_dir))
    assert "the stop rule's count of proposals starts again here" in said
    assert iterations(run_dir) > before
    assert SAID.fullmatch(views.status(run_dir)["stop_reason"]) or iterations(run_dir) == 6


def test_a_steps_noise_is_measured_from_its_per_eval_differences():
    child, parent = (
        {"1": 0.9, "2": 0.7, "3": 0.8, "4": 0.6},
        {"1": 0.7, "2": 0.7, "3": 0.7, "4": 0.7},
    )
    # d = +0.2, 0, +0.1, -0.1: variance 0.01667 over 4 evals
    assert worth.measured_se(child, parent) == pytest.approx((0.016667 / 4) ** 0.5, rel=1e-3)
    assert worth.measured_se({"1": 0.9, "2": 0.7}, parent) is None  # too few evals: the interval


def test_the_rule_reads_measured_proposals_and_counts_the_others_in_between():
    measured, unmeasured = worth.Judged(False, 0.0, 0.1, 0.4), worth.Judged()
    judged = [measured, unmeasured, measured, unmeasured, unmeasured, measured]
    assert worth.last_measured(judged, 2) == judged[2:]
    assert worth.last_measured(judged, 4) is None
