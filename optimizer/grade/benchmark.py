"""The one-shot `optimizer benchmark`: every eval with and without the skill, graded through the
one grading unit and aggregated into one skill-creator-readable folder. Never hide a failed run,
and never write outside the benchmark folder.

Layout: <out>/eval-<id>/eval_metadata.json and <out>/eval-<id>/<configuration>/run-<n>/ (outputs/,
transcript, timing.json, structural.json, grading.json), then <out>/benchmark.json and .md, and
<out>/state.db (the ledger and the gradings). `settings` must already hold the evals file's
eval_config (config.load(eval_config=...)): settings layering is the caller's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from optimizer import schemas as s
from optimizer.config import Settings
from optimizer.execute import executor_for, next_run_number
from optimizer.grade.aggregate import aggregate
from optimizer.grade.jobs import BASELINE, Job, Side, jobs_for
from optimizer.grade.judge import warn_same_model
from optimizer.grade.markdown import render_markdown
from optimizer.grade.unit import Grader, GradingHooks, Scored, committed, graded_again
from optimizer.inputs.evals import EvalSet, load_evals
from optimizer.model.port import Client
from optimizer.store.db import Store
from optimizer.store.files import write_json, write_text

log = structlog.get_logger(__name__)

Progress = Callable[[int, int, str], None]


def counting(progress: Progress | None, total: int) -> Callable[[Scored], None]:
    """A grader's on_run that reports each graded run of `total` to `progress`."""
    done = 0

    def step(scored: Scored) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(
                done,
                total,
                f"eval {scored.eval_id} {scored.configuration} run "
                f"{scored.run_number}: {scored.status}",
            )

    return step


@contextmanager
def grading(
    settings: Settings,
    client: Client,
    store: Store,
    evalset: EvalSet,
    *,
    skill_name: str,
    inputs_root: Path,
    on_run: Callable[[Scored], None] | None = None,
) -> Iterator[Grader]:
    """One grader over the executor the settings name, open while the runs are graded: the one
    way a command outside a run's search (benchmark, execute, gate) grades runs."""
    with executor_for(None, settings, client) as executor:
        yield Grader(
            store,
            client,
            settings,
            evalset,
            executor,
            skill_name=skill_name,
            inputs_root=inputs_root,
            hooks=GradingHooks(on_run=on_run),
        )


def default_out_dir(root: Path = Path("runs") / "benchmarks") -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out, k = root / stamp, 1
    while out.exists():  # two benchmarks in one second keep separate folders
        k += 1
        out = root / f"{stamp}-{k}"
    return out


@dataclass(frozen=True)
class _Plan:
    """What one benchmark runs: the evals, how many runs of each configuration, from which skill,
    into which folder."""

    evalset: EvalSet
    eval_ids: list[int]
    configurations: list[str]
    n_runs: int
    skill_dir: Path
    out: Path


async def run_benchmark(
    settings: Settings,
    client: Client,
    store: Store,
    *,
    skill_dir: Path,
    evals_path: Path | None,
    runs: int | None,
    out_dir: Path,
    progress: Progress | None = None,
) -> Path:
    """Run, grade and aggregate; returns the path of benchmark.json (benchmark.md is beside it).
    Runs left unscored by a failure of ours are tried again (evals.unscored_retries passes)."""
    skill_dir, out = Path(skill_dir).absolute(), Path(out_dir).absolute()
    evalset = load_evals(skill_dir, evals_path)
    warn_same_model(settings)
    n_runs = runs or settings.evals.runs_per_eval
    configurations = ["with_skill"] + (
        ["without_skill"] if settings.evals.baseline_comparison else []
    )
    evals = sorted(e.id for e in evalset.evals)
    plan = _Plan(evalset, evals, configurations, n_runs, skill_dir, out)
    _write_eval_metadata(plan)
    jobs = _jobs(plan)
    await _grade_jobs(settings, client, store, plan, jobs, progress)
    benchmark = _aggregate_committed(settings, client, store, plan)
    write_json(out / "benchmark.json", benchmark, s.Benchmark)
    write_text(out / "benchmark.md", render_markdown(benchmark))
    log.info(
        "benchmark.completed",
        folder=str(out),
        runs=len(jobs),
        judge_errors=benchmark.model_extra.get("judge_errors") if benchmark.model_extra else None,
        delta=benchmark.run_summary.delta,
    )
    return out / "benchmark.json"


def _write_eval_metadata(plan: _Plan) -> None:
    """<out>/eval-<id>/eval_metadata.json for every eval, as skill-creator's viewer reads it."""
    for ev in plan.evalset.evals:
        write_json(
            plan.out / f"eval-{ev.id}" / "eval_metadata.json",
            {
                "eval_id": ev.id,
                "eval_name": ev.name,
                "prompt": ev.prompt,
                "expectations": list(ev.expectations),
            },
            model=s.EvalMetadata,
        )


def _jobs(plan: _Plan) -> list[Job]:
    """Every run of the benchmark, configuration by configuration: with_skill runs the skill,
    without_skill (the baseline) runs none."""
    return [
        job
        for c in plan.configurations
        for job in jobs_for(
            plan.eval_ids,
            plan.n_runs,
            prefix="",
            root=plan.out,
            side=Side(c, plan.skill_dir, "skill") if c == "with_skill" else BASELINE,
        )
    ]


async def _grade_jobs(
    settings: Settings,
    client: Client,
    store: Store,
    plan: _Plan,
    jobs: list[Job],
    progress: Progress | None,
) -> None:
    """Execute and grade every job, reporting each graded run, with further passes over the runs
    left unscored; the results stay in the ledger, where _aggregate_committed reads them."""
    step = counting(progress, len(jobs))

    if progress is not None:
        progress(0, len(jobs), "starting")
    with grading(
        settings,
        client,
        store,
        plan.evalset,
        skill_name=plan.evalset.skill_name,
        inputs_root=plan.skill_dir,
        on_run=step,
    ) as grader:
        await graded_again(  # the graded runs are read back from the ledger below
            lambda: grader.grade(jobs, scope="benchmark"),
            settings.evals.unscored_retries,
            lambda r: [r],
        )


def _aggregate_committed(
    settings: Settings, client: Client, store: Store, plan: _Plan
) -> s.Benchmark:
    """benchmark.json's model, from the graded runs the ledger holds for each configuration."""
    evalset, out = plan.evalset, plan.out
    by_config = {
        c: [
            it
            for it in committed(store, out, evalset, "", plan.eval_ids)
            if it[1].configuration == c
        ]
        for c in plan.configurations
    }
    return aggregate(
        evalset.skill_name,
        evalset.evals,
        by_config,
        skill_path=str(plan.skill_dir),
        executor_model=settings.models.executor,
        analyzer_model=settings.models.grader,
        runs_per_configuration=plan.n_runs,
        simulated=client.simulated,
    )


async def run_once(
    settings: Settings,
    client: Client,
    store: Store,
    *,
    skill_dir: Path,
    eval_id: int,
    without_skill: bool,
    out_dir: Path,
) -> tuple[Path, Scored]:
    """`optimizer execute`: one eval once into OUT/<configuration>/run-<n> (the next free n),
    graded like any run: the run folder and its Scored."""
    from optimizer.errors import BadInput

    skill_dir, out = Path(skill_dir).absolute(), Path(out_dir).absolute()
    evalset = load_evals(skill_dir)
    warn_same_model(settings)
    if eval_id not in evalset.ids:
        raise BadInput(
            f"{evalset.source}: no eval has id {eval_id}; the ids are "
            f"{', '.join(map(str, evalset.ids))}."
        )
    configuration = "without_skill" if without_skill else "with_skill"
    n = next_run_number(out / configuration)
    key = f"{configuration}/run-{n}"
    job = Job(
        key,
        out / key,
        eval_id,
        configuration,
        n,
        None if without_skill else skill_dir,
        "baseline" if without_skill else "skill",
    )
    with grading(
        settings, client, store, evalset, skill_name=evalset.skill_name, inputs_root=skill_dir
    ) as grader:
        scored = (await grader.grade([job], scope="execute"))[eval_id][0]
    return job.trial_dir, scored


def failure_reason(trial_dir: Path) -> str:
    """Why a run failed, as its grading or its metrics say (the first failed expectation)."""
    for name in ("grading.json", "outputs/metrics.json"):
        try:
            data = json.loads((trial_dir / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if data.get("judge_error") or data.get("error"):
            return str(data.get("judge_error") or data.get("error"))
        failed = [e["evidence"] for e in data.get("expectations", []) if not e.get("passed")]
        if failed:
            return failed[0]
    return f"see {trial_dir / 'transcript.md'}"
