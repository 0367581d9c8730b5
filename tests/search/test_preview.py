"""The cost preview: `run --dry-run` shows it and writes nothing; the estimate follows the settings
and the price table, discounts only the batched roles, compares itself with the budget, is shown
and stored at every real start, and `estimate_vs_actual` sets it against the ledger afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer import config
from optimizer.budget import estimate as preview
from optimizer.inputs.evals import load_evals
from optimizer.model.budget import Budget, Reserve
from optimizer.report import spend

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "fixtures" / "csv-report"
FAST_BATCH = ("--set", "llm.batch_settle_s=0.02", "--set", "llm.batch_poll_s=0.01")


def estimate(prices: dict | None = None, **sections) -> dict:
    """The preview of csv-report under these settings; steps guarded unless said (the counts of
    comparator calls and looks below are the guarded rule's; the cheap step has neither)."""
    sections = {**sections, "selection": {"step": "guarded", **sections.get("selection", {})}}
    evalset = load_evals(EXAMPLE)
    flat = [f"{s}.{k}={v}" for s, values in sections.items() for k, v in values.items()]
    settings = config.load(None, eval_config=evalset.eval_config, env={}, overrides=flat).settings
    if prices:
        table = {**settings.prices, **{m: config.Price(**p) for m, p in prices.items()}}
        settings = settings.model_copy(update={"prices": table})
    return preview.estimate(settings, evalset, EXAMPLE)


def test_dry_run_prints_the_estimate_and_writes_nothing(tmp_path, cli):
    run_dir = tmp_path / "never"
    proc = cli(
        "run",
        EXAMPLE,
        "--provider",
        "sim",
        "--max-iterations",
        "3",
        "--run-dir",
        run_dir,
        "--dry-run",
        "--budget-usd",
        "1",
    )
    assert proc.exit_code == 0, proc.output
    line = next(x for x in proc.stdout.splitlines() if x.startswith("estimate"))
    for part in (
        "model calls",
        "tokens",
        "per iteration",
        "for the run (3 iterations",
        "with --batch",
        "budget $1.00 covers about",
    ):
        assert part in line, (part, line)
    assert "baseline and v0" in proc.stdout and not run_dir.exists()
    batched = cli("run", EXAMPLE, "--provider", "sim", "--dry-run", "--batch", "--run-dir", run_dir)
    assert batched.exit_code == 0 and "estimate (batch mode):" in batched.stdout
    assert "without batch mode" in batched.stdout and not run_dir.exists()


def test_the_estimate_follows_the_settings():
    base = estimate()
    per = base["per_iteration"]
    assert per["by_role"]["proposer"]["calls"] == 2 and per["by_role"]["analyzer"]["calls"] == 2
    train = base["train_evals"]
    # csv-report claims `tasks`: the first run pair of each eval, 2 proposals, both orders.
    assert per["by_role"]["comparator"]["calls"] == 2 * 2 * train * 1
    every = estimate(selection={"compare_pairs": "all"})
    assert every["per_iteration"]["by_role"]["comparator"]["calls"] == 2 * 2 * train * 3
    assert every["per_iteration_max"]["usd"] > base["per_iteration_max"]["usd"]
    more_runs = estimate(
        evals={"runs_per_eval": 6}, selection={"max_runs_per_eval": 6, "compare_pairs": "all"}
    )
    assert (
        more_runs["per_iteration"]["by_role"]["comparator"]["calls"]
        == 2 * every["per_iteration"]["by_role"]["comparator"]["calls"]
    )
    assert estimate(loop={"proposals_per_iteration": 1})["per_iteration"]["usd"] == pytest.approx(
        per["usd"] / 2, rel=1e-3
    )
    assert estimate(evals={"baseline_comparison": False})["setup"]["usd"] < base["setup"]["usd"]
    assert estimate(loop={"screen_evals": 0})["per_iteration"]["calls"] < per["calls"]
    assert base["per_iteration_max"]["usd"] > per["usd"]
    assert base["run"]["usd"] == pytest.approx(
        base["setup"]["usd"] + base["iterations"] * per["usd"] + base["sealed_test"]["usd"],
        rel=1e-3,
    )
    # The batch discount applies to the grader, comparator and analyzer only.
    judged = sum(per["by_role"][r]["usd"] for r in ("grader", "comparator", "analyzer"))
    assert per["usd"] - per["usd_batch"] == pytest.approx(judged / 2, rel=1e-3)
    # The price table is used: a dearer grader makes grading dearer, nothing else.
    dear = estimate(
        prices={
            "claude-opus-5-5": {  # the default grader's price, ten times over
                "input": 40.0,
                "output": 200.0,
                "cache_write": 50.0,
                "cache_read": 2.0,
            }
        }
    )
    assert dear["per_iteration"]["by_role"]["grader"]["usd"] > 9 * per["by_role"]["grader"]["usd"]
    assert dear["per_iteration"]["by_role"]["executor"]["usd"] == per["by_role"]["executor"]["usd"]


def test_a_cheap_step_is_priced_as_one_run_an_eval_without_the_comparator():
    cheap = estimate(selection={"step": "cheap"})["per_iteration"]["by_role"]
    guarded = estimate()["per_iteration"]["by_role"]
    assert "comparator" not in cheap and guarded["comparator"]["calls"] > 0
    # 1.5 proposals judged × (2 screening runs + 1 run of each of 4 train evals + 1 more of the
    # parent on each, selection.parent_runs), against 2 × 3
    assert cheap["grader"]["calls"] == round(1.5 * (2 + 4 + 4)) < guarded["grader"]["calls"]
    reread = estimate(selection={"step": "cheap", "parent_runs": 0})["per_iteration"]["by_role"]
    assert reread["grader"]["calls"] == round(1.5 * (2 + 4))


def test_the_budget_is_compared_with_the_estimate():
    capped = estimate(budget={"usd": 1000}, loop={"max_iterations": 2})
    assert spend.budget_note(capped).endswith("covers it")
    # No iteration limit (the default): the budget bounds the run, at what it covers.
    free = estimate(budget={"usd": 10})
    assert free["iterations"] == free["iterations_in_budget"] > 2
    assert spend.budget_note(free) == (
        f"budget $10.00 bounds it: about {free['iterations']} iterations at the typical cost, "
        "fewer when runs are added"
    )
    low = estimate(budget={"usd": 0.1})
    assert "below the baseline and v0" in spend.budget_note(low)
    some = estimate(budget={"usd": 3.0}, loop={"max_iterations": 5})
    # The sealed test's reserve is not the search's to spend (docs/design.md §19).
    assert some["reserve_usd"] == pytest.approx(1.25 * some["sealed_test"]["usd"], abs=1e-4)
    assert some["iterations_in_budget"] == int(
        (3.0 - some["setup"]["usd"] - some["reserve_usd"]) // some["per_iteration"]["usd"]
    )
    assert f"covers about {some['iterations_in_budget']} of 5 iterations" in spend.budget_note(some)
    assert spend.budget_note(estimate(budget={"usd": 0})) == "no budget set"


def lineage(run_dir: Path) -> list:
    history = json.loads((run_dir / "history.json").read_text())
    return [
        (i["version"], i["grading_result"], i.get("overall_efficiency"))
        for i in history["iterations"]
    ]


@pytest.mark.slow
def test_the_adoptions_reserve_is_estimated_shown_and_named_where_the_budget_stops_the_search():
    """A night with --adopt weekly and $3 ran no iteration, its stop saying "$2.95 of it kept for
    the sealed test" when that test's reserve was $0.69: the rest was the adoption's. Both reserves
    are estimated at the start, shown in the preview, counted in what the budget covers, and
    named apart where the budget stops the search."""
    from optimizer.budget import stops

    plain = estimate(budget={"usd": 3.0}, loop={"max_iterations": 5})
    adopting = estimate(budget={"usd": 3.0}, loop={"max_iterations": 5}, adopt={"at_end": "weekly"})
    assert "adoption_reserve_usd" not in plain
    # Its first two looks, 4 fresh runs an eval each side, on the 4 train evals: 8 × 4 runs.
    per_run = adopting["sealed_test"]["usd"] / (2 * adopting["test_evals"] * 3)
    assert adopting["adoption_reserve_usd"] == pytest.approx(1.25 * 32 * per_run, rel=0.05)
    note = spend.reserve_note(adopting)
    assert (
        f"for the adoption at the end (its first looks): ${adopting['adoption_reserve_usd']:.2f}"
        in note
    )
    left = (
        3.0 - adopting["setup"]["usd"] - adopting["reserve_usd"] - adopting["adoption_reserve_usd"]
    )
    assert adopting["iterations_in_budget"] == max(0, int(left // adopting["per_iteration"]["usd"]))
    assert adopting["iterations_in_budget"] < plain["iterations_in_budget"]
    budget = Budget(3.0, counted_usd=0.050001)
    budget.keep(Reserve(test_usd=0.69, adoption_usd=2.26))
    said = stops.OverBudget(budget)(stops.LoopState())
    assert said == (
        "spent $0.05 of the $3.00 budget ($0.69 of it kept for the sealed test, $2.26 for the "
        "adoption at the end)"
    )


@pytest.mark.slow
def test_a_batch_run_shows_and_keeps_its_estimate_and_decides_as_a_direct_run(tmp_path, cli):
    batch_dir, direct_dir = tmp_path / "batch", tmp_path / "direct"
    proc = cli(
        "run",
        EXAMPLE,
        "--provider",
        "sim",
        "--max-iterations",
        "1",
        "--run-dir",
        batch_dir,
        "--batch",
        *FAST_BATCH,
    )
    assert proc.exit_code == 0, proc.output
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("estimate (batch mode): ~"), lines[:3]  # before the run starts
    direct = cli(
        "run", EXAMPLE, "--provider", "sim", "--max-iterations", "1", "--run-dir", direct_dir
    )
    assert direct.exit_code == 0, direct.output
    assert lineage(batch_dir) == lineage(direct_dir), (
        "batch mode changes the price, not the answers"
    )

    info = spend.estimate_vs_actual(batch_dir)
    assert info["estimate"]["batch"] is True and info["actual"]["iterations"] == 1
    # The estimate assumes every candidate passes screening, so a run whose candidates stop
    # there costs far less; what must never happen is a large underestimate.
    assert info["actual"]["batched_calls"] > 0 and 0 < info["ratio"] < 3, info
    assert info["line"].startswith("cost: $") and "estimated for 1 iteration" in info["line"]
    plain = spend.estimate_vs_actual(direct_dir)
    assert plain["actual"]["batched_calls"] == 0
    assert info["actual"]["usd"] < 0.8 * plain["actual"]["usd"], "the batched roles cost half"
    status = cli("status", batch_dir, "--json")
    assert status.exit_code == 0, status.output
    shown = json.loads(status.stdout)["estimate"]
    assert shown["line"] == info["line"] and shown["ratio"] == info["ratio"]
    text = cli("status", batch_dir).stdout
    assert "estimate" in text and " ".join(info["line"].split()[:4]) in " ".join(text.split())


def test_an_iteration_that_ends_at_its_first_step_is_priced_for_the_proposals_it_judges():
    assert preview.expected_judged(2, "all", "cheap") == 2
    assert preview.expected_judged(2, "first", "guarded") == 2
    assert preview.expected_judged(2, "first", "cheap") == pytest.approx(1.5)
    cheap = estimate(selection={"step": "cheap"})
    assert cheap["assumptions"]["proposals_judged"].startswith("1.5 of 2")


@pytest.mark.slow
def test_an_iteration_a_stop_cut_short_is_counted_as_begun(simulated):
    """After Ctrl-C in the first iteration status read "$1.49 spent against ~$0.69 estimated for
    0 iterations": the cut iteration spent part of its cost, so the estimate counts it."""
    import sqlite3

    with sqlite3.connect(simulated / "state.db") as db:
        db.execute("update iterations set finished_at = null")
        begun = db.execute("select count(*) from iterations").fetchone()[0]
    info = spend.estimate_vs_actual(simulated)
    est = info["estimate"]
    assert begun >= 1 and info["line"] is not None
    assert f"for {begun} iteration" in info["line"] and "unfinished" in info["line"]
    per = est["per_iteration"]["usd"]
    assert info["expected_usd"] == pytest.approx(est["setup"]["usd"] + begun * per, abs=1e-6)
