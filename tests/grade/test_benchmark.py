"""The one-shot benchmark end to end on examples/csv-report with the simulator: the folder as
skill-creator walks it, every file valid, the skill beating the baseline, judge errors counted."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from optimizer import schemas as s
from optimizer.config import Settings
from optimizer.grade.benchmark import run_benchmark
from optimizer.inputs.artifacts import check_artifact
from optimizer.model import make_client
from optimizer.sim import Simulator

EXAMPLE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "csv-report"


async def no_wait(_seconds: float) -> None:
    pass


@pytest.fixture
def example() -> Path:
    return EXAMPLE


async def test_full_benchmark_on_the_example(tmp_path, settings, client, store, sim, example):
    seen: list[tuple[int, int, str]] = []
    path = await run_benchmark(
        settings,
        client,
        store,
        skill_dir=example,
        evals_path=None,
        runs=1,
        out_dir=tmp_path / "bench",
        progress=lambda d, t, label: seen.append((d, t, label)),
    )
    out = tmp_path / "bench"
    assert path == out / "benchmark.json"
    bench = s.Benchmark.model_validate(json.loads((out / "benchmark.json").read_text()))
    ws, wo = bench.run_summary.with_skill, bench.run_summary.without_skill
    # the simulator's executor follows the skill's bullets; without them it misses the format
    assert ws.pass_rate.mean > wo.pass_rate.mean
    assert bench.run_summary.delta["pass_rate"].startswith("+")
    assert bench.metadata.model_extra["simulated"] is True
    assert bench.metadata.runs_per_configuration == 1
    n_evals = len(bench.metadata.evals_run)
    assert len(bench.runs) == 2 * n_evals
    assert seen[-1][0] == seen[-1][1] == 2 * n_evals  # each run, once graded
    assert sim.stats.by_role["grader"] <= 2 * n_evals
    # the simulator's ordinary transcripts are clean: no_errors passes wherever the run finished
    for path in out.glob("eval-*/*/run-*/structural.json"):
        for item in json.loads(path.read_text())["expectations"]:
            if item["type"] == "no_errors":
                assert item["passed"], (path, item["evidence"])
    md = (out / "benchmark.md").read_text()
    assert md.startswith("# Skill benchmark: csv-report") and "SIMULATION" in md


async def test_folder_reads_back_as_skill_creator_walks_it(
    tmp_path, settings, client, store, example
):
    out = (
        await run_benchmark(
            settings,
            client,
            store,
            skill_dir=example,
            evals_path=None,
            runs=1,
            out_dir=tmp_path / "bench",
        )
    ).parent
    gradings = sorted(out.glob("eval-*/*/run-*/grading.json"))
    assert gradings
    assert {g.parent.parent.name for g in gradings} == {"with_skill", "without_skill"}
    bench = json.loads((out / "benchmark.json").read_text())
    by_key = {(r["eval_id"], r["configuration"], r["run_number"]): r for r in bench["runs"]}
    for path in gradings:
        run_dir = path.parent
        eval_dir = run_dir.parent.parent
        meta = json.loads((eval_dir / "eval_metadata.json").read_text())
        assert eval_dir.name == f"eval-{meta['eval_id']}"
        grading = json.loads(path.read_text())
        assert set(grading["summary"]) >= {"passed", "failed", "total", "pass_rate"}
        assert all({"text", "passed", "evidence"} <= set(e) for e in grading["expectations"])
        assert (run_dir / "outputs").is_dir()
        key = (meta["eval_id"], run_dir.parent.name, int(run_dir.name.split("-")[1]))
        assert by_key[key]["result"]["pass_rate"] == grading["summary"]["pass_rate"]
    # every JSON file written validates with its model, strictly (the full seed forms)
    checked = 0
    for path in sorted(out.rglob("*.json")):
        report = check_artifact(path, strict=True)
        assert report.ok, (path, report.problems)
        checked += 1
    assert checked >= 1 + len(gradings) * 5


async def test_without_baseline(tmp_path, store, sim, example):
    settings = Settings.model_validate(
        {"llm": {"provider": "sim"}, "evals": {"baseline_comparison": False}}
    )
    c = make_client(settings, store, simulator=sim, sleep=no_wait)
    try:
        out = (
            await run_benchmark(
                settings,
                c,
                store,
                skill_dir=example,
                evals_path=None,
                runs=1,
                out_dir=tmp_path / "bench",
            )
        ).parent
    finally:
        await c.aclose()
    assert not list(out.glob("eval-*/without_skill"))
    bench = json.loads((out / "benchmark.json").read_text())
    assert "without_skill" not in bench["run_summary"] and bench["run_summary"]["delta"] == {}


class ForceMalformedGrader:
    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    def transport(self) -> httpx2.MockTransport:
        inner = self.sim.transport()

        async def handler(request: httpx2.Request) -> httpx2.Response:
            if request.headers.get("x-optimizer-role") == "grader":
                request.headers["x-sim-force-error"] = "malformed"
            return await inner.handle_async_request(request)

        return httpx2.MockTransport(handler)


async def test_judge_errors_are_counted_and_shown(tmp_path, settings, store, sim, example):
    c = make_client(settings, store, simulator=ForceMalformedGrader(sim), sleep=no_wait)
    try:
        out = (
            await run_benchmark(
                settings,
                c,
                store,
                skill_dir=example,
                evals_path=None,
                runs=1,
                out_dir=tmp_path / "bench",
            )
        ).parent
    finally:
        await c.aclose()
    bench = json.loads((out / "benchmark.json").read_text())
    errors = [r for r in bench["runs"] if r["status"] == "judge_error"]
    assert errors and bench["judge_errors"] == len(errors)
    assert sim.stats.by_role["grader"] == 2 * len(errors)
    assert any("judge error" in n for n in bench["notes"])
    for r in errors:
        run_dir = out / f"eval-{r['eval_id']}" / r["configuration"] / f"run-{r['run_number']}"
        assert "judge_error" in json.loads((run_dir / "grading.json").read_text())


@pytest.mark.slow
def test_benchmark_and_v0_of_a_run_grade_an_eval_identically(tmp_path, monkeypatch):
    """One grading unit: the same eval, run by `optimizer benchmark` and as v0 of `optimizer run`,
    leaves the same structural.json and grading.json (timing aside)."""
    from inprocess import EXAMPLE, cli

    bench, run = tmp_path / "bench", tmp_path / "run"
    cli(
        monkeypatch,
        None,
        "benchmark",
        str(EXAMPLE),
        "--provider",
        "sim",
        "--runs",
        "2",
        "--out",
        str(bench),
    )
    cli(
        monkeypatch,
        None,
        "run",
        str(EXAMPLE),
        "--provider",
        "sim",
        "--max-iterations",
        "0",
        "--run-dir",
        str(run),
        "--set",
        "evals.runs_per_eval=2",
    )

    def strip(value):
        if isinstance(value, dict):
            return {
                k: strip(v)
                for k, v in value.items()
                if k != "timing"
                and "time" not in k
                and "duration" not in k
                and not k.endswith("_seconds")
            }
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    compared = 0
    for mine in sorted((run / "v0").glob("eval-*/with_skill/run-*")):
        theirs = bench / mine.relative_to(run / "v0")
        for name in ("structural.json", "grading.json"):
            assert strip(json.loads((mine / name).read_text())) == strip(
                json.loads((theirs / name).read_text())
            ), f"{mine / name}"
            compared += 1
    assert compared >= 4  # at least two train evals, twice each


@pytest.mark.slow
def test_a_benchmark_counts_no_run_that_optimizer_execute_left_in_its_folder(
    tmp_path, cli, example
):
    """`execute` keys its runs without an eval segment (`with_skill/run-1`); a benchmark written
    to the same folder averages only its own runs."""
    out = tmp_path / "bench"
    assert cli("execute", example, "--eval", "1", "--out", out, "--provider", "sim").exit_code == 0
    result = cli("benchmark", example, "--out", out, "--provider", "sim", "--runs", "2")
    assert result.exit_code == 0, result.output
    data = json.loads((out / "benchmark.json").read_text())
    with_skill = [
        r for r in data["runs"] if r["configuration"] == "with_skill" and r["eval_id"] == 1
    ]
    assert len(with_skill) == 2
