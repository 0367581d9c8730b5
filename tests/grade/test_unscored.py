"""A failure of ours is not a score (docs/design.md §7): runs our infrastructure failed are unscored,
left out of every mean, counted and shown, and tried again on a later pass or a resume."""

from __future__ import annotations

import json
import sqlite3
from types import SimpleNamespace

import pytest
from conftest import no_wait
from inprocess import EXAMPLE, Recording, cli

from optimizer.config import Settings
from optimizer.execute import get_executor
from optimizer.inputs import evals as evalsets
from optimizer.model import make_client
from optimizer.search import summaries
from optimizer.sim import Service
from optimizer.store import versions
from optimizer.store.db import Store
from optimizer.store.keys import TrialKey

FAST = (
    "--provider",
    "sim",
    "--set",
    "llm.max_attempts=2",
    "--set",
    "llm.backoff_initial_s=0",
    "--set",
    "llm.backoff_max_s=0",
)


def train_eval_and_phrase() -> tuple[int, str]:
    """A train eval of the example (seed 0) and a phrase only its prompt has."""
    evalset = evalsets.load_evals(EXAMPLE)
    split = evalsets.split(evalset, test_fraction=0.25, seed=0)
    eval = evalset.by_id(split.train[0])
    return eval.id, eval.prompt[:60]


def gradings(run_dir) -> dict[str, tuple]:
    conn = sqlite3.connect(run_dir / "state.db")
    try:
        return {
            k: (st, sc) for k, st, sc in conn.execute("select key, status, score from gradings")
        }
    finally:
        conn.close()


@pytest.mark.slow
def test_an_eval_whose_executor_calls_all_fail_is_unscored_then_scored_after_resume(
    tmp_path, monkeypatch
):
    run_dir = tmp_path / "run"
    eval_id, phrase = train_eval_and_phrase()
    outage = Recording(service=Service(fail_role="executor", fail_match=phrase))
    cli(
        monkeypatch,
        outage,
        "run",
        str(EXAMPLE),
        "--run-dir",
        str(run_dir),
        "--max-iterations",
        "1",
        *FAST,
    )

    rows = gradings(run_dir)
    hit = {k: v for k, v in rows.items() if f"/eval-{eval_id}/" in k and not k.startswith("test/")}
    assert hit and all(status == "unscored" and score is None for status, score in hit.values()), (
        hit
    )
    others = [v for k, v in rows.items() if k not in hit]
    assert others and all(status != "unscored" for status, _ in others)
    history = json.loads((run_dir / "history.json").read_text())
    v0 = history["iterations"][0]
    assert v0["overall_efficiency"] is not None  # the other evals still give v0 a score
    decided = [
        i for i in history["iterations"] if i["parent"] and i.get("decided_at_stage") == "benchmark"
    ]
    assert decided, "no child reached a decision by the rule"
    for item in decided:
        selection = json.loads((run_dir / item["version"] / "selection.json").read_text())
        assert selection["unscored"] > 0 and selection["excluded_evals"] == [eval_id]
        assert (
            "could not be scored" in item["reason"]
            and f"eval {eval_id} had no scored runs" in item["reason"]
        )
    bench = json.loads((run_dir / "v0" / "benchmark.json").read_text())
    assert {u["eval_id"] for u in bench["unscored"]} == {eval_id}
    assert all("529" in u["cause"] or "overloaded" in u["cause"].lower() for u in bench["unscored"])
    assert "Unscored runs" in (run_dir / "v0" / "benchmark.md").read_text()
    status = json.loads(cli(monkeypatch, None, "status", str(run_dir), "--json"))
    assert status["unscored"]["runs"] == len(hit)

    cli(monkeypatch, Recording(), "resume", str(run_dir), "--max-iterations", "1", *FAST[2:])
    after = gradings(run_dir)
    v0_runs = [k for k in hit if k.startswith("v0/")]
    assert v0_runs and all(after[k][0] != "unscored" and after[k][1] is not None for k in v0_runs)
    conn = sqlite3.connect(run_dir / "state.db")
    per_eval = json.loads(
        conn.execute("select split_scores_json from versions where label = 'v0'").fetchone()[0]
    )
    conn.close()
    assert str(eval_id) in per_eval  # the retried runs now count in v0's score


def test_a_grader_call_that_fails_leaves_the_benchmark_standing(tmp_path, monkeypatch):
    out = tmp_path / "bench"
    outage = Recording(service=Service(fail_role="grader", fail_match=""))
    printed = cli(
        monkeypatch, outage, "benchmark", str(EXAMPLE), "--runs", "1", "--out", str(out), *FAST
    )
    bench = json.loads((out / "benchmark.json").read_text())
    # A run that passes the structural gate needs the grader and stays unscored; one that fails
    # a critical structural check (every baseline run, and a with_skill run that missed its title)
    # is scored without it.
    unscored = [(u["eval_id"], u["configuration"]) for u in bench["unscored"]]
    assert len(unscored) >= 3 and {c for _, c in unscored} == {"with_skill"}
    scored = bench["run_summary"]["with_skill"]["scored_runs"]
    assert scored + len(unscored) == 5
    assert bench["run_summary"]["without_skill"]["scored_runs"] == 5
    if scored == 0:
        assert "no value (no run could be scored)" in printed
        assert "pass_rate" not in bench["run_summary"]["delta"]
    graded = list(out.glob("eval-*/with_skill/run-*/grading.json"))
    assert {p.parts[-4] for p in graded}.isdisjoint({f"eval-{e}" for e, _ in unscored})


def test_judge_errors_and_unscored_runs_never_enter_a_version_score(tmp_path):
    store = Store(tmp_path / "state.db")
    with store.atomic():
        store.db["versions"].insert({"label": "v0", "hash": "h"})
        for key, status, score, rate in (
            ("v0/eval-1/with_skill/run-1", "ok", 0.8, 0.8),
            ("v0/eval-1/with_skill/run-2", "judge_error", None, 0.5),  # structural-only rate
            ("v0/eval-2/with_skill/run-1", "unscored", None, None),
            ("v0/eval-2/with_skill/run-2", "exec_error", 0.0, 0.0),  # the skill's failure: 0
        ):
            store.db["gradings"].insert(
                {
                    "key": key,
                    "status": status,
                    "score": score,
                    "pass_rate": rate,
                    **TrialKey.parse(key).columns(),
                }
            )
    summaries.record_scores(SimpleNamespace(store=store, train=[1, 2]), "v0")  # type: ignore[arg-type]
    row = versions.find(store, "v0")
    assert row is not None
    assert row.score == 0.4 and row.pass_rate == 0.4
    assert row.per_eval == {1: 0.8, 2: 0.0}
    store.close()


class TruncatedFirst(Recording):
    """The executor's first answer is cut at max_tokens inside a bash call."""

    def respond(self, body, headers):
        reply = super().respond(body, headers)
        if headers.get("x-optimizer-role") == "executor" and len(body["messages"]) == 1:
            reply["content"] = [
                {
                    "type": "tool_use",
                    "id": "toolu_cut",
                    "name": "bash",
                    "input": {"command": "touch /workspace/outputs/ran-a-cut-call"},
                }
            ]
            reply["stop_reason"] = "max_tokens"
        return reply


async def test_a_tool_call_cut_at_max_tokens_is_never_run(tmp_path):
    settings = Settings.model_validate({"llm": {"provider": "sim"}})
    store = Store(tmp_path / "state.db")
    client = make_client(settings, store, simulator=TruncatedFirst(), sleep=no_wait)
    evalset = evalsets.load_evals(EXAMPLE)
    record = await get_executor("anthropic", settings, client=client).execute(
        skill_dir=EXAMPLE,
        skill_name=evalset.skill_name,
        eval=evalset.evals[0],
        inputs_root=EXAMPLE,
        trial_dir=tmp_path / "run",
        run_number=1,
        sample=1,
    )
    assert not list((tmp_path / "run").rglob("ran-a-cut-call"))
    transcript = (tmp_path / "run" / "transcript.md").read_text()
    assert "cut off at the output limit" in transcript and "were not run" in transcript
    assert record.status == "ok"  # the agent was told and went on to finish the task
    await client.aclose()
    store.close()


class TruncatedJudge(Recording):
    def respond(self, body, headers):
        reply = super().respond(body, headers)
        if reply["content"][0].get("name") == "submit_grading":
            reply["stop_reason"] = "max_tokens"
        return reply


def test_a_judge_answer_cut_at_max_tokens_is_a_named_judge_error(tmp_path, monkeypatch):
    out = tmp_path / "bench"
    cli(
        monkeypatch,
        TruncatedJudge(),
        "benchmark",
        str(EXAMPLE),
        "--runs",
        "1",
        "--out",
        str(out),
        "--provider",
        "sim",
    )
    bench = json.loads((out / "benchmark.json").read_text())
    errors = [r for r in bench["runs"] if r["status"] == "judge_error"]
    assert errors and all("max_tokens" in r["notes"][0] for r in errors)


def test_a_bug_of_ours_is_unscored_counted_as_a_defect_and_several_in_a_row_stop_the_run(
    tmp_path, monkeypatch
):
    """An exception the executor did not expect leaves its run unscored ("internal error:
    <type>"), never 0; `status` counts it as a defect; evals.internal_error_streak of them in a
    row stop the run as systemic, with the runs committed."""
    from optimizer.execute.agent import AnthropicExecutor

    async def broken(self, ctx, transcript, tally):
        raise KeyError("a bug of ours")

    monkeypatch.setattr(AnthropicExecutor, "_run", broken)
    run_dir = tmp_path / "run"
    out = cli(
        monkeypatch,
        Recording(),
        "run",
        str(EXAMPLE),
        "--run-dir",
        str(run_dir),
        "--max-iterations",
        "1",
        "--set",
        "execute.concurrency=1",
        "--set",
        "evals.internal_error_streak=3",
        *FAST,
        code=1,
    )
    assert "3 runs in a row ended with an internal error of ours" in out
    rows = gradings(run_dir)
    # The stage stops starting runs at the third; one already started may finish (of 12).
    assert 3 <= len(rows) <= 4 and all(v == ("unscored", None) for v in rows.values()), rows
    status = json.loads(cli(monkeypatch, None, "status", str(run_dir), "--json"))
    assert status["defects"]["runs"] == len(rows) and status["defects"]["by_type"] == {
        "KeyError": len(rows)
    }
    assert status["defects"]["last"]["error"].startswith("internal error: KeyError")
    log = (run_dir / "optimizer.log").read_text()
    assert "run.internal_error" in log and "Traceback" in log and "a bug of ours" in log
    shown = cli(monkeypatch, None, "status", str(run_dir))
    assert f"{len(rows)} runs ended by an internal error of ours (KeyError x{len(rows)}" in shown


@pytest.mark.slow
def test_a_check_that_hangs_is_unscored_and_hanging_on_both_configurations_stops_the_run(
    tmp_path, monkeypatch
):
    """A custom_script past its limit leaves the run unscored, naming the check and the limit;
    once it has hung with the skill and without it, the check is broken: the benchmark stops
    with one sentence naming the evals file, the eval and the check (exit 2)."""
    import shutil

    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    evals_file = skill / "evals" / "evals.json"
    data = json.loads(evals_file.read_text())
    data["evals"] = data["evals"][:1]
    data["evals"][0]["structural_expectations"] = [
        {"id": "S9", "type": "custom_script", "description": "hangs", "script": "sleep 30"}
    ]
    evals_file.write_text(json.dumps(data))
    out = tmp_path / "bench"
    shown = cli(
        monkeypatch,
        Recording(),
        "benchmark",
        str(skill),
        "--out",
        str(out),
        "--runs",
        "1",
        "--set",
        "sandbox.timeout_s=1",
        "--set",
        "execute.concurrency=1",
        *FAST,
        code=2,
    )
    said = " ".join(shown.split())
    assert (
        f"{evals_file}: eval 1's custom_script check 'S9' hangs past its time limit of 1 s" in said
    )
    assert "both with and without the skill" in said
    rows = gradings(out)
    assert rows and all(v == ("unscored", None) for v in rows.values()), rows
    conn = sqlite3.connect(out / "state.db")
    errors = [e for (e,) in conn.execute("select error from gradings")]
    conn.close()
    assert all("custom_script check 'S9' passed its time limit of 1 s" in e for e in errors)
