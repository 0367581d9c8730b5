"""The adoption is the claim (docs/design.md §16): `optimizer adopt` shows its
cost before paying, certifies a version against the one the user has on runs no step drew, records
the outcome (state.db, history.json) and refuses bad input with one sentence and nothing written."""

from __future__ import annotations

import json
import math
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from inprocess import EXAMPLE, cli

from optimizer import words
from optimizer.config import Adopt, Selection
from optimizer.decide import adopt as rule
from optimizer.decide import spending
from optimizer.report import adopted

RUN = ("run", str(EXAMPLE), "--provider", "sim", "--set", "sim.seed=4", "--max-iterations", "2")


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("adopt") / "run"
    with pytest.MonkeyPatch.context() as mp:
        cli(mp, None, *RUN, "--run-dir", str(folder))
    return folder


@pytest.fixture
def run_dir(searched, tmp_path) -> Path:
    return Path(shutil.copytree(searched, tmp_path / "run"))


def rows(run_dir: Path, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(run_dir / "state.db") as db:
        return db.execute(sql, params).fetchall()


def adopt(monkeypatch, run_dir: Path, *args: str) -> tuple[int, str]:
    """`optimizer adopt RUN ARGS` in this process: its exit code and all it printed."""
    from typer.testing import CliRunner

    from optimizer import logs
    from optimizer.cli import app

    try:
        done = CliRunner().invoke(app, ["adopt", str(run_dir), *args], catch_exceptions=False)
    finally:
        logs.reset()
    return done.exit_code, done.output


def paid_calls(run_dir: Path) -> int:
    return rows(run_dir, "select count(*) from calls where outcome = 'ok'")[0][0]


# -- the rule, pure -------------------------------------------------------------------------------


def test_fresh_samples_of_each_adoption_are_apart_from_every_step_and_each_other():
    assert rule.first_sample(1) > Adopt.model_fields["max_runs"].metadata[1].le
    assert rule.first_sample(2) - rule.first_sample(1) >= Adopt().max_runs


def test_the_rule_certifies_a_clear_gain_and_not_an_equal_version():
    rng = random.Random(3)
    evals = range(6)
    equal = {e: [rng.choice((0.0, 1.0)) for _ in range(6)] for e in evals}
    same = {e: list(v) for e, v in equal.items()}
    decided = rule.decide(
        same, equal, selection=Selection(), adopt=Adopt(), look=6, rng=random.Random(0)
    )
    assert decided.decision != "won"
    better = {e: [1.0] * 6 for e in evals}
    worse = {e: [0.0, 1.0, 0.0, 0.0, 1.0, 0.0] for e in evals}
    won = rule.decide(
        better, worse, selection=Selection(), adopt=Adopt(), look=6, rng=random.Random(0)
    )
    assert won.decision == "won"
    assert won.alpha == pytest.approx(Adopt().alpha)  # the adoption's α, not the step's
    assert won.scope == "tasks"
    assert won.comparator.pairs == 0  # no comparator vote in a claim the user acts on


def test_the_estimate_counts_both_sides_at_each_look():
    found = rule.Estimate(evals=4, looks=spending.schedule(3, 12), per_run_usd=0.05)
    assert found.first_usd == pytest.approx(2 * 4 * 3 * 0.05)
    assert found.most_usd == pytest.approx(2 * 4 * 12 * 0.05)
    said = adopted.estimate_line(found)
    assert "$1.20" in said and "$4.80" in said


def test_a_version_below_the_one_you_have_is_told_that_more_runs_will_not_help():
    low = rule.decide(
        {e: [0.0] * 6 for e in range(5)},
        {e: [1.0] * 6 for e in range(5)},
        selection=Selection(),
        adopt=Adopt(),
        look=6,
        rng=random.Random(0),
    )
    said = words.what_would_decide(rule.next_step(low, adopt=Adopt(), evals=5, estimate=None))
    assert low.decision == "lost" and "more runs would not certify it" in said


def test_the_version_you_have_is_the_last_certified_one():
    from optimizer.schemas import Adoption

    def made(*outcomes: tuple[str, bool]) -> list[Adoption]:
        return [
            Adoption(
                number=k, version=v, base="v0", scope="tasks", evals=[1],
                status="certified" if ok else "not certified", started_at="t",
            )
            for k, (v, ok) in enumerate(outcomes, 1)
        ]  # fmt: skip

    assert rule.base_of([]) == "v0"
    assert rule.base_of(made(("v2", True), ("v5", False))) == "v2"
    assert rule.base_of(made(("v2", True), ("v5", True), ("v7", False))) == "v5"


# -- the command ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_adoption_runs_fresh_samples_and_leaves_the_steps_evidence_alone(run_dir, monkeypatch):
    scores = rows(run_dir, "select label, score from versions order by label")
    best = rows(run_dir, "select current_best from runs")[0][0]
    code, said = adopt(monkeypatch, run_dir, "--yes")
    assert f"adopt {best} over v0 (better on these tasks, α 0.05)" in said
    assert "at the first look: at most $" in said  # the estimate, printed before the outcome
    (number, version, base, status, decision) = rows(
        run_dir, "select number, version, base, status, decision_json from adoptions"
    )[0]
    assert (number, version, base) == (1, best, "v0")
    assert status in ("certified", "not certified")
    assert code == (0 if status == "certified" else 1)
    assert json.loads(decision)["alpha"] == pytest.approx(0.05)
    # The adoption's reason makes the claim; the steps' reasons never did.
    assert "the claim: better on these tasks" in json.loads(decision)["reason"]
    steps = rows(run_dir, "select reason from decisions where reason is not null")
    assert steps and not any("better" in reason for (reason,) in steps)
    fresh = rows(
        run_dir,
        "select prefix, min(run_number) from gradings where prefix like 'adoption-1/%' "
        "group by prefix order by prefix",
    )
    assert [p for p, _ in fresh] == sorted([f"adoption-1/{best}/", "adoption-1/v0/"])
    assert all(first == rule.first_sample(1) for _, first in fresh)
    # No step's score moved: the fresh runs are the adoption's alone.
    assert rows(run_dir, "select label, score from versions order by label") == scores
    spent = rows(
        run_dir, "select coalesce(sum(cost_usd), 0) from calls where scope = 'adoption 1'"
    )[0][0]
    assert spent > 0
    history = json.loads((run_dir / "history.json").read_text())
    assert history["adoptions"][0]["version"] == best
    assert history["adopted"] == (best if status == "certified" else "v0")


@pytest.mark.slow
def test_a_killed_adoption_continues_from_the_ledger_without_paying_twice(run_dir, monkeypatch):
    adopt(monkeypatch, run_dir, "--yes")
    decided = rows(run_dir, "select status, decision_json from adoptions")
    paid = paid_calls(run_dir)
    # As a kill leaves it: the runs committed, the outcome not yet written.
    with sqlite3.connect(run_dir / "state.db") as db:
        db.execute("update adoptions set status = 'running', decision_json = null")
    adopt(monkeypatch, run_dir, "--yes")
    assert rows(run_dir, "select count(*) from adoptions")[0][0] == 1
    assert rows(run_dir, "select status, decision_json from adoptions") == decided
    assert paid_calls(run_dir) == paid


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, sentence",
    [
        (("v9", "--yes"), "has no version v9"),
        (("v0", "--yes"), "v0 is the version you have already"),
        ((), "pass --yes to pay the estimate"),
        (("--yes", "--set", "adopt.alpha=2"), "adopt.alpha"),
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_sentence_and_writes_nothing(run_dir, monkeypatch, args, sentence):
    before = paid_calls(run_dir)
    code, said = adopt(monkeypatch, run_dir, *args)
    assert code == 2
    assert sentence in said
    assert "Traceback" not in said
    assert rows(run_dir, "select count(*) from adoptions")[0][0] == 0
    assert paid_calls(run_dir) == before


@pytest.mark.slow
def test_every_view_names_the_adopted_version_and_export_hands_it_over(run_dir, monkeypatch):
    from optimizer.report import summary

    best = rows(run_dir, "select current_best from runs")[0][0]
    before = json.loads(cli(monkeypatch, None, "status", str(run_dir), "--json"))
    assert before["adopted"] == "v0" and before["adoptions"] == []
    assert (
        f"`optimizer adopt {run_dir}` certifies the search's best, {best}"
        in (before["adopted_line"])
    )
    code, _ = adopt(monkeypatch, run_dir, "--yes", "--set", "adopt.min_effect=0")
    adopted = best if code == 0 else "v0"
    status = json.loads(cli(monkeypatch, None, "status", str(run_dir), "--json"))
    assert status["adopted"] == adopted and len(status["adoptions"]) == 1
    tree = json.loads(cli(monkeypatch, None, "lineage", str(run_dir), "--json"))
    marked = [n["label"] for n in _nodes(tree["tree"]) if n["is_adopted"]]
    assert marked == [adopted]
    headline = summary.build(run_dir).headline
    assert ("adopted: certified on fresh runs" in headline) == (code == 0)
    said = cli(monkeypatch, None, "export", str(run_dir), "--out", str(run_dir.parent / "out"))
    assert f"exported {adopted} " in said  # the version the user has, never an uncertified step
    assert (f"{best} was not certified" in said) == (code != 0)


def _nodes(tree: list[dict]) -> list[dict]:
    out, stack = [], list(tree)
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n["children"])
    return out


@pytest.mark.slow
def test_a_search_without_the_comparator_asks_it_nothing(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    cli(monkeypatch, None, *RUN, "--run-dir", str(folder), "--set", "selection.compare_pairs=none")
    assert rows(folder, "select count(*) from decisions where decision is not null")[0][0] > 0
    assert rows(folder, "select count(*) from calls where role = 'comparator'") == [(0,)]


@pytest.mark.slow
def test_a_run_asked_to_adopt_reserves_its_first_looks_and_adopts_at_its_end(tmp_path, monkeypatch):
    plain, adopting = tmp_path / "plain", tmp_path / "adopting"
    cli(monkeypatch, None, *RUN, "--run-dir", str(plain))
    cli(monkeypatch, None, *RUN, "--run-dir", str(adopting), "--adopt")

    def kept(folder: Path) -> float:
        """What the search left aside once v0's price was measured (the run's second reserve)."""
        lines = (folder / "optimizer.log").read_text().splitlines()
        said = [json.loads(x) for x in lines if "budget.kept_for_sealed_test" in x]
        return said[1]["usd"]

    assert kept(adopting) > kept(plain) > 0
    assert rows(plain, "select count(*) from adoptions") == [(0,)]
    made = rows(adopting, "select version, base, status from adoptions")
    best = rows(adopting, "select current_best from runs")[0][0]
    assert made and made[0][:2] == (best, "v0") and made[0][2] != "running"


@pytest.mark.slow
def test_under_false_discovery_control_adoptions_test_at_their_lord_level(run_dir, monkeypatch):
    from optimizer.decide import fdr

    adopt(monkeypatch, run_dir, "--yes", "--set", "adopt.fdr=lord")
    alpha = json.loads(rows(run_dir, "select decision_json from adoptions")[0][0])["alpha"]
    assert alpha == pytest.approx(fdr.lord([], 0.05).alpha, abs=1e-6)
    assert alpha < 0.05  # the first of a family spends a share of α, not all of it


@pytest.mark.slow
def test_an_adoption_its_limit_stops_says_so_exits_1_and_a_second_call_continues_it(
    run_dir, monkeypatch
):
    code, said = adopt(monkeypatch, run_dir, "--yes", "--max-usd", "0.05")
    assert code == 1 and "stopped before it decided" in said and "--max-usd" in said
    assert rows(run_dir, "select status from adoptions") == [("running",)]
    paid = paid_calls(run_dir)
    code, _ = adopt(monkeypatch, run_dir, "--yes")
    assert code in (0, 1)
    assert rows(run_dir, "select count(*) from adoptions") == [(1,)]  # the same adoption, finished
    assert rows(run_dir, "select status from adoptions")[0][0] != "running"
    assert paid_calls(run_dir) > paid


@pytest.mark.slow
def test_an_adoption_stops_within_the_estimate_it_printed_and_the_run_never_reads_as_overspent(
    run_dir, monkeypatch
):
    """`adopt` estimated "$4.79 if every look is needed" and spent $4.89, and the summary then
    read "Cost $8.43 of $8.00": the estimate is an upper bound the adoption stops at, and what a
    run spent shows each adoption apart, against the estimate it showed."""
    import re

    stage = json.loads(cli(monkeypatch, None, "status", str(run_dir), "--json"))["activity"]
    code, said = adopt(monkeypatch, run_dir, "--yes", "--set", "adopt.min_effect=0")
    most = re.search(r"at most \$([\d.]+) if every look is needed", said)
    assert most is not None, said
    assert f"it stops at ${most.group(1)}" in said
    cost = rows(run_dir, "select sum(cost_usd) from calls where scope = 'adoption 1'")[0][0]
    assert 0 < cost <= float(most.group(1)) + 0.005
    budget = json.loads(cli(monkeypatch, None, "status", str(run_dir), "--json"))["budget_usd"]
    apart = f"on the search and its sealed test, ${cost:.2f} on adoption #1 (its estimate: $"
    status = " ".join(cli(monkeypatch, None, "status", str(run_dir)).split())
    assert f"of the ${budget:.2f} budget {apart}" in status, status
    assert f"${cost:.2f} on adoptions, apart" in status  # not counted against the run's estimate
    after = json.loads(cli(monkeypatch, None, "status", str(run_dir), "--json"))
    assert after["activity"] == stage  # the adoption's last activity is not the run's
    assert apart in (run_dir / "summary.md").read_text()


@pytest.mark.slow
def test_a_renamed_run_folder_is_adopted_from_as_the_daemon_resumes_it(run_dir, monkeypatch):
    """Its row is keyed by the folder's old name: `adopt` ended in a traceback at its first stage."""
    renamed = run_dir.rename(run_dir.parent / "renamed")
    code, said = adopt(monkeypatch, renamed, "--yes", "--max-usd", "0.05")
    assert code == 1 and "stopped before it decided" in said, said
    assert rows(renamed, "select id from runs") == [("renamed",)]


@pytest.mark.slow
def test_fresh_runs_our_failures_left_unscored_never_decide_an_adoption(run_dir, monkeypatch):
    # Every grader call fails after its retries: the runs are unscored, not scored 0.
    # (A streak limit above the runs: their retries would otherwise read as an outage and stop.)
    failing = ("--set", "sim.fail_role=grader", "--set", "llm.max_attempts=1")
    failing += ("--set", "llm.failure_streak=1000")
    code, said = adopt(monkeypatch, run_dir, "--yes", *failing)
    assert code == 1 and "could not be scored" in said and "nothing was adopted" in said
    assert rows(run_dir, "select status, decision_json from adoptions") == [("running", None)]


# -- a claim counts what it could not score, interleaves its sides, has one α (DESIGN.md §24) ----


def _claim_runs(run_dir: Path, number: int) -> dict[str, dict[int, list[float | None]]]:
    """Each side's fresh runs of adoption `number` per eval (None: not scored), by run number."""
    out: dict[str, dict[int, list[float | None]]] = {}
    for prefix, e, score in rows(
        run_dir,
        "select prefix, eval_id, score from gradings where prefix like ? "
        "order by prefix, eval_id, run_number",
        f"adoption-{number}/%",
    ):
        out.setdefault(prefix.split("/")[1], {}).setdefault(e, []).append(score)
    return out


@pytest.mark.slow
def test_runs_the_judge_failed_on_count_against_the_version_claimed(run_dir, monkeypatch):
    """The judge fails on the candidate's worst outputs (scores ≤ 0.4): left out, its mean would
    rise with every failure; counted as failures, the claim can only get harder."""
    from optimizer.grade import judge
    from optimizer.grade import outcome as outcomes

    best = rows(run_dir, "select current_best from runs")[0][0]
    real = judge.grade_run

    async def failing_on_the_worst(client, eval, run_dir_, record, **kw):
        found = await real(client, eval, run_dir_, record, **kw)
        mine = f"adoption-1/{best}/" in str(run_dir_)
        if mine and found.score is not None and found.score <= 0.4:
            return outcomes.unscored(eval, found.structural, "the judge failed on this output")
        return found

    monkeypatch.setattr(judge, "grade_run", failing_on_the_worst)
    # A minimum effect no step reaches: never certified, so the claim says what it lost.
    adopt(
        monkeypatch, run_dir, "--yes", "--set", "selection.max_unscored_rate=1",
        "--set", "adopt.min_effect=0.9",
    )  # fmt: skip
    runs = _claim_runs(run_dir, 1)
    missing = sum(s is None for scores in runs[best].values() for s in scores)
    assert missing > 0  # the judge did fail on some of the candidate's runs
    (decision,) = rows(run_dir, "select decision_json from adoptions")[0]
    found = json.loads(decision)
    looked = found["runs_per_eval"]

    def counted(side: str, instead: float) -> dict[int, float]:
        return {
            e: sum(instead if s is None else s for s in v[:looked]) / looked
            for e, v in runs[side].items()
        }

    mine, theirs = counted(best, 0.0), counted("v0", 1.0)
    claimed = sum(mine[e] - theirs[e] for e in mine) / len(mine)
    assert found["delta"] == pytest.approx(claimed, abs=1e-6)
    assert "counts against its side" in found["reason"]
    # Not certified, the claim says how many runs of each side were lost to failures and what
    # to fix; certified, it has nothing to excuse.
    (status, next_step) = rows(run_dir, "select status, next_step from adoptions")[0]
    assert status == "not certified"
    lost = sum(s is None for scores in runs[best].values() for s in scores[:looked])
    assert f"{lost} of {len(runs[best]) * looked} of {best}'s" in next_step, next_step
    assert "the judge failed on this output" in next_step and "the judge model" in next_step


@pytest.mark.slow
def test_both_sides_fresh_runs_go_out_interleaved_in_a_seeded_order(
    searched, tmp_path, monkeypatch
):
    """One randomised order for both sides, so nothing a stretch of time or a batch shares (load,
    a cache) favours one; the order is the run's seed, the adoption and the look, so a second copy
    of the run sends the same."""
    orders = []
    for copy in ("a", "b"):
        folder = Path(shutil.copytree(searched, tmp_path / copy / "run"))
        adopt(monkeypatch, folder, "--yes", "--set", "execute.concurrency=1")
        keys = [
            k
            for (k,) in rows(
                folder, "select key from trials where key like 'adoption-1/%' order by rowid"
            )
        ]
        orders.append(keys)
    first_look = [k.split("/")[1] for k in orders[0][: 2 * 4 * Adopt().first_runs]]
    switches = sum(a != b for a, b in zip(first_look, first_look[1:], strict=False))
    assert len(set(first_look)) == 2 and switches >= 4  # not one side's batch, then the other's
    assert orders[0] == orders[1]


@pytest.mark.slow
def test_asking_again_goes_on_with_the_same_claim_and_never_resets_its_alpha(tmp_path, monkeypatch):
    """A version not certified at its first look (futile): asking again, even with a larger
    adopt.max_runs, takes the same adoption's next look, at the α share of that look in the
    schedule it was opened with; once its looks are spent, asking again is refused. The night
    and the version are searched for (sim.seed 0-11, each version in turn), never fixed, so a
    change of the simulated world moves the seed, not the property."""
    found = _a_claim_left_undecided(tmp_path, monkeypatch)
    assert found is not None, "no version of sim.seed 0-11 was left undecided at its first look"
    run_dir, label, said = found
    assert rows(run_dir, "select status from adoptions") == [("not certified",)]
    assert "adopt.max_runs" not in said  # the advice never resets α
    assert "goes on with this claim" in said
    schedule = rule.looks(Adopt())
    seen = [schedule[0]]
    for _ in schedule:
        code, said = adopt(monkeypatch, run_dir, label, "--yes", "--set", "adopt.max_runs=30")
        if code == 2:
            break
        assert "settings given now apply to a new claim only" in said
        assert rows(run_dir, "select count(*) from adoptions") == [(1,)]
        found = json.loads(rows(run_dir, "select decision_json from adoptions")[0][0])
        seen.append(found["runs_per_eval"])
        spent = spending.look_alpha(0.05, seen[-1], Adopt().max_runs, Adopt().first_runs)
        assert found["look_alpha"] == pytest.approx(spent, abs=1e-6)
        if found["decision"] == "won":
            break
    assert seen == list(schedule[: len(seen)]) and len(seen) > 1
    if code == 2:
        assert "its α is spent" in said and seen[-1] == schedule[-1]
    fresh = rows(run_dir, "select distinct prefix from gradings where prefix like 'adoption-%'")
    assert {p.split("/")[0] for (p,) in fresh} == {"adoption-1"}


def _a_claim_left_undecided(tmp_path: Path, monkeypatch) -> tuple[Path, str, str] | None:
    """A run folder, a version of it and what `adopt` said when its first look left the claim
    undecided (exit 1, "goes on with this claim"); None when no seed of 0-11 has one."""
    for seed in range(12):
        searched = tmp_path / f"searched-{seed}"
        with pytest.MonkeyPatch.context() as mp:
            cli(
                mp,
                None,
                *RUN[:4],
                "--set",
                f"sim.seed={seed}",
                *RUN[6:],
                "--run-dir",
                str(searched),
            )
        labels = [r[0] for r in rows(searched, "select label from versions where label != 'v0'")]
        for label in sorted(labels, key=lambda v: int(v[1:])):
            run_dir = Path(shutil.copytree(searched, tmp_path / f"try-{seed}-{label}"))
            code, said = adopt(monkeypatch, run_dir, label, "--yes")
            taken = rows(run_dir, "select decision_json from adoptions")
            at = json.loads(taken[0][0])["runs_per_eval"] if taken and taken[0][0] else None
            if code == 1 and "goes on with this claim" in said and at == rule.looks(Adopt())[0]:
                return run_dir, label, said
    return None


def test_an_adoption_from_before_its_schedule_was_kept_goes_on_from_its_decision(tmp_path):
    """m012: a row written before the schedule and the last look were kept reads today's schedule
    and its decision's runs an eval as its last look, so asking again still goes on, never anew."""
    import sqlite_utils

    from optimizer.store import adoptions
    from optimizer.store.db import Store, migrations

    evals = {e: [0.5, 0.4, 0.6, 0.5] for e in (1, 2)}
    decided = rule.decide(
        evals, evals, selection=Selection(), adopt=Adopt(), look=4, rng=random.Random(0)
    )
    path = tmp_path / "state.db"
    old = sqlite_utils.Database(path)
    migrations.apply(old, stop_before="m012_adoption_schedule")
    old["adoptions"].insert(
        {"number": 1, "version": "v2", "base": "v0", "scope": "tasks", "status": "not certified",
         "evals_json": "[1, 2]", "decision_json": decided.model_dump_json(), "started_at": "t",
         "finished_at": "t"}
    )  # fmt: skip
    old.close()
    store = Store(path)
    try:
        found = adoptions.claim_of(store, "v2", "v0", "tasks")
        assert found is not None and found.number == 1
        now = adoptions.Kept(3, 12, 0.05, 0)
        assert adoptions.kept(store, 1, now) == adoptions.Kept(3, 12, 0.05, 4)
        assert adoptions.claim_of(store, "v2", "v1", "tasks") is None  # another base: a new claim
    finally:
        store.close()


@pytest.mark.slow
def test_after_an_adoption_every_view_tells_one_money_story_and_a_suggested_budget_is_accepted(
    run_dir, monkeypatch
):
    """After `optimizer adopt`, status said "$3.48 of the $4.00 budget on the search", a resume
    at $5 was refused as "its budget is spent ($6.24 of $5.00)", and the budget a refusal
    suggested was refused in turn. An adoption is paid apart: the budget counts the search alone,
    in every view, and the budget a refusal suggests is accepted."""
    import re

    code, _ = adopt(monkeypatch, run_dir, "--yes", "--set", "adopt.min_effect=0")
    info = json.loads(cli(monkeypatch, None, "status", str(run_dir), "--json"))
    total = rows(run_dir, "select sum(cost_usd) from calls")[0][0]
    apart = rows(run_dir, "select sum(cost_usd) from calls where scope like 'adoption %'")[0][0]
    assert apart > 0 and info["spent_usd"] == pytest.approx(total, abs=1e-6)
    assert info["budgeted_usd"] == pytest.approx(total - apart, abs=1e-6)
    said = info["spent_text"]
    assert said.startswith(f"${total:.2f}: ${total - apart:.2f} of the $"), said
    assert said in " ".join(cli(monkeypatch, None, "status", str(run_dir)).split())
    assert said in " ".join((run_dir / "summary.md").read_text().split())
    # A budget just above the search's spend is the search's, whatever the adoption cost.
    tight = f"{math.floor((total - apart) * 100 + 1) / 100:.2f}"
    assert float(tight) < total  # counted with the adoption, it would read as spent
    done = rows(run_dir, "select count(*) from iterations where finished_at is not null")[0][0]
    more = ("--max-iterations", str(done + 1))
    refused = cli(monkeypatch, None, "resume", str(run_dir), "--budget-usd", tight, *more, code=2)
    assert "its budget is spent" not in refused, refused
    assert "covers none of the 1 iteration" in refused, refused
    found = re.search(r"--budget-usd (\d+)`", refused)
    assert found is not None, refused
    cli(monkeypatch, None, "resume", str(run_dir), "--budget-usd", found.group(1), *more)
    assert rows(run_dir, "select count(*) from iterations")[0][0] == done + 1
