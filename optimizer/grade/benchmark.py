"""The one-shot `optimizer benchmark`: run every eval with and without the skill, check, grade and
aggregate into one skill-creator-readable folder. Never hide a failed run, and never write outside
the benchmark folder.

Layout: <out>/eval-<id>/eval_metadata.json and <out>/eval-<id>/<configuration>/run-<n>/ (outputs/,
transcript, timing.json, structural.json, grading.json), then <out>/benchmark.json and .md.
`settings` must already hold the evals file's eval_config (config.load(eval_config=...)), since
settings layering is the caller's; runs_per_eval and baseline_comparison are read from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from optimizer import schemas as s
from optimizer.config import Settings
from optimizer.execute import Job, RunRecord, executor_for, run_pool
from optimizer.grade.aggregate import aggregate, render_markdown
from optimizer.grade.judge import GradeOutcome, grade_run, write_outcome
from optimizer.grade.structural import check_run
from optimizer.inputs.evals import load_evals
from optimizer.sandbox import SandboxPolicy
from optimizer.store.files import write_json, write_text

log = structlog.get_logger(__name__)

Progress = Callable[[int, int, str], None]


def default_out_dir(root: Path = Path("runs") / "benchmarks") -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out, k = root / stamp, 1
    while out.exists():  # two benchmarks in one second keep separate folders
        k += 1
        out = root / f"{stamp}-{k}"
    return out


def sandbox_policy(settings: Settings) -> SandboxPolicy:
    return SandboxPolicy.from_settings(settings.sandbox)


async def grade_one(
    client: Any,
    eval: Any,
    record: RunRecord,
    *,
    settings: Settings,
    skill_dir: Path | None,
    policy: SandboxPolicy,
) -> GradeOutcome:
    """Structural checks, then the judge, then structural.json and grading.json in the run folder."""
    failed = None if record.status == "ok" else (record.error or record.status)
    # custom_script checks block on a subprocess: keep the event loop free for other gradings
    structural = await asyncio.to_thread(
        check_run, eval, record.run_dir, policy, configuration=record.configuration,
        run_error=failed, skill_dir=skill_dir,
    )
    outcome = await grade_run(
        client, eval, record.run_dir, record, settings=settings, structural=structural,
        sample=record.run_number - 1,
    )
    write_outcome(record.run_dir, outcome)
    log.info("run.graded", eval_id=eval.id, configuration=record.configuration,
             run=record.run_number, status=outcome.status, pass_rate=round(outcome.pass_rate, 4),
             score=outcome.score)
    return outcome


async def run_benchmark(
    settings: Settings,
    client: Any,
    *,
    skill_dir: Path,
    evals_path: Path | None,
    runs: int | None,
    out_dir: Path | None,
    progress: Progress | None = None,
) -> Path:
    """Run, grade and aggregate; returns the path of benchmark.json (benchmark.md is beside it)."""
    skill_dir = Path(skill_dir)
    evalset = load_evals(skill_dir, evals_path)
    n_runs = runs or settings.evals.runs_per_eval
    configurations = ["with_skill"] + (["without_skill"] if settings.evals.baseline_comparison else [])
    out = Path(out_dir) if out_dir is not None else default_out_dir()
    out.mkdir(parents=True, exist_ok=True)
    evals = sorted(evalset.evals, key=lambda e: e.id)
    with executor_for(None, settings, client) as executor:
        jobs = []
        for ev in evals:
            write_json(out / f"eval-{ev.id}" / "eval_metadata.json", {
                "eval_id": ev.id, "eval_name": ev.name, "prompt": ev.prompt,
                "expectations": list(ev.expectations),
            }, model=s.EvalMetadata)
            for configuration in configurations:
                for n in range(1, n_runs + 1):
                    jobs.append(Job(
                        executor=executor, eval=ev, inputs_root=skill_dir,
                        run_dir=out / f"eval-{ev.id}" / configuration / f"run-{n}",
                        run_number=n, sample=n - 1,
                        skill_dir=skill_dir if configuration == "with_skill" else None,
                        skill_name=evalset.skill_name,
                    ))
        total, done = 2 * len(jobs), 0

        def step(label: str) -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total, label)

        if progress is not None:
            progress(0, total, "starting")
        records = await run_pool(
            jobs, settings.execute.concurrency,
            lambda r: step(f"eval {r.eval_id} {r.configuration} run {r.run_number}: {r.status}"),
        )
    policy = sandbox_policy(settings)
    gate = asyncio.Semaphore(settings.llm.max_concurrency)
    by_id = {ev.id: ev for ev in evals}

    async def graded(record: RunRecord) -> GradeOutcome:
        async with gate:
            outcome = await grade_one(
                client, by_id[record.eval_id], record, settings=settings,
                skill_dir=skill_dir if record.configuration == "with_skill" else None, policy=policy,
            )
        step(f"eval {record.eval_id} {record.configuration} run {record.run_number}: graded")
        return outcome

    outcomes = await asyncio.gather(*(graded(r) for r in records))
    by_config: dict[str, list] = {c: [] for c in configurations}
    for record, outcome in zip(records, outcomes, strict=True):
        by_config[record.configuration].append((by_id[record.eval_id], record, outcome))
    benchmark = aggregate(
        evalset.skill_name, evals, by_config,
        skill_path=str(skill_dir), executor_model=settings.models.executor,
        analyzer_model=settings.models.grader, runs_per_configuration=n_runs,
        simulated=bool(getattr(client, "simulated", False)),
    )
    write_json(out / "benchmark.json", benchmark, s.Benchmark)
    write_text(out / "benchmark.md", render_markdown(benchmark))
    log.info("benchmark.completed", folder=str(out), runs=len(records),
             judge_errors=benchmark.model_extra.get("judge_errors"),
             delta=benchmark.run_summary.delta)
    return out / "benchmark.json"
