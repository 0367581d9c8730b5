"""The grading unit: one run of one eval for one configuration is executed, checked structurally
against the skill it ran with, judged, and committed before the next step. `optimizer run`,
`benchmark` and `execute` all grade through it. Never redoes a run whose grading is committed,
never keeps a half-written run folder, and never scores a failure of ours (docs/design.md §7)."""

from __future__ import annotations

import asyncio
import shutil
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import structlog

from optimizer import sandbox
from optimizer.config import Settings
from optimizer.errors import BadInput, InfraFailure, Interrupted, WorkFailed
from optimizer.execute import INTERNAL_ERROR, Executor
from optimizer.execute.record import TrialRecord, is_complete
from optimizer.grade import judge, preview, structural
from optimizer.grade import outcome as outcomes
from optimizer.grade.jobs import Job
from optimizer.grade.outcome import GradeOutcome
from optimizer.inputs.evals import Eval, EvalSet
from optimizer.model import batch, scoped
from optimizer.model.port import Client
from optimizer.schemas import Structural
from optimizer.store import gradings, trials
from optimizer.store.db import Store, now
from optimizer.store.keys import TrialKey
from optimizer.store.rows import GradingRow, GradingStatus, Preview, RecordColumns

log = structlog.get_logger()
Graded = TypeVar("Graded")  # what graded_again measures again


@dataclass(frozen=True)
class Scored:
    key: str
    eval_id: int
    run_number: int
    configuration: str
    status: str  # ok | gated | exec_error | judge_error | unscored
    score: float | None  # None for judge_error and unscored: excluded, counted
    pass_rate: float
    error: str | None = None  # the cause of an unscored run


@dataclass(frozen=True)
class GradingHooks:
    """How a caller follows a grading (on_run: each committed run) and stops it (should_stop)."""

    on_run: Callable[[Scored], None] | None = None
    should_stop: Callable[[], str | None] | None = None


class Grader:
    """Grades jobs through one executor and one model client, idempotently, a bounded number at
    once (execute.concurrency)."""

    def __init__(
        self,
        store: Store,
        client: Client,
        settings: Settings,
        evalset: EvalSet,
        executor: Executor,
        *,
        skill_name: str,
        inputs_root: Path,
        hooks: GradingHooks = GradingHooks(),
    ) -> None:
        self.store, self.client, self.settings = store, client, settings
        self.evals = {e.id: e for e in evalset.evals}
        self.executor = executor
        self.skill_name = skill_name
        self.inputs_root = inputs_root
        self.policy = sandbox.SandboxPolicy.from_settings(settings.sandbox)
        self.hooks = hooks
        self._tries: Counter[str] = Counter()  # attempts at each run in this process
        self._slots = asyncio.Semaphore(settings.execute.concurrency)
        self._defects = 0  # runs an exception of ours ended, in a row (in commit order)
        self._hung: dict[tuple[int, str], set[str]] = {}  # (eval, check) -> configurations
        self.source = evalset.source

    async def grade(self, jobs: Sequence[Job], *, scope: str) -> dict[int, list[Scored]]:
        """Every job, the results per eval in job order (never completion order), their model
        calls recorded under `scope`. Each job runs to its end even when another fails, so no run
        keeps writing behind the step that follows; then the first failure in job order is
        raised, or Interrupted when a stop left jobs unstarted."""
        with scoped(scope):
            results = await asyncio.gather(
                *(self._unit(job) for job in jobs), return_exceptions=True
            )
        for result in results:
            if isinstance(result, BaseException):
                raise result
        if skipped := [r for r in results if isinstance(r, str)]:
            raise Interrupted(skipped[0])
        out: dict[int, list[Scored]] = {}
        for scored in results:
            assert isinstance(scored, Scored)
            out.setdefault(scored.eval_id, []).append(scored)
        return out

    async def _unit(self, job: Job) -> Scored | str:
        """The scored run, or the reason of a stop that came before it started. A run left
        unscored by a failure of ours is tried again, at most evals.unscored_retries more times
        in this process; a resume tries again."""
        done = gradings.get(self.store, job.key)
        kept = done and done.status != "unscored" and (job.trial_dir / "grading.json").is_file()
        if done and (kept or self._tries[job.key] > self.settings.evals.unscored_retries):
            return _scored(job, done.status, done.score, done.pass_rate, done.error)
        # The sealed test always runs to its end: it is what a stopped run reports on.
        stop_check = self.hooks.should_stop if job.split != "test" else None
        # Batch mode: the grader call waits for the stage's batch outside the execution slot, so
        # the stage's other runs execute meanwhile and join the same batch (model/batch.py).
        in_slot = not batch.active(self.client)
        with batch.producer(self.client):
            async with self._slots:
                if stop_check is not None and (reason := stop_check()):
                    return reason  # not started: a stop was asked while this run waited
                if self._defects >= self.settings.evals.internal_error_streak:
                    return "runs in a row ended with an internal error of ours"  # not started
                self._tries[job.key] += 1
                record = await self._execute(job)
                checked = await self._check(job, record)
                if in_slot and not isinstance(checked, GradeOutcome):
                    checked = await self._judge(job, record, checked)
            if not isinstance(checked, GradeOutcome):
                checked = await self._judge(job, record, checked)
            outcomes.write_outcome(job.trial_dir, checked)
        # Outside the producer: this run asks nothing more of the stage's batch.
        shown = await asyncio.to_thread(preview.of_trial, job.trial_dir)
        return self._commit(job, checked, shown)

    async def _check(self, job: Job, record: TrialRecord) -> Structural | GradeOutcome:
        """The structural checks, or an unscored outcome when the sandbox could not run one."""
        eval = self.evals[job.eval_id]
        try:
            return await asyncio.to_thread(
                structural.check_run,
                eval,
                job.trial_dir,
                structural.script_policy(self.policy),
                configuration=job.configuration,
                skill_dir=job.skill_dir,
                run_error=None if record.status == "ok" else (record.error or record.status),
            )
        except structural.CheckTimedOut as exc:
            self._note_hung(eval, job.configuration, exc)
            return outcomes.unscored(eval, None, str(exc))
        except InfraFailure as exc:
            return outcomes.unscored(eval, None, str(exc))

    def _note_hung(self, eval: Eval, configuration: str, exc: structural.CheckTimedOut) -> None:
        """A check that hangs with the skill and without it hangs whatever the outputs: the
        check is broken, and every run of its eval would stay unscored. The run stops and says
        which to fix."""
        seen = self._hung.setdefault((eval.id, exc.check), set())
        seen.add(configuration)
        if {"with_skill", "without_skill"} <= seen:
            raise BadInput(
                f"{self.source}: eval {eval.id}'s custom_script check '{exc.check}' hangs past its "
                f"time limit of {exc.limit_s:g} s both with and without the skill, so it is "
                "broken, not the skill; make the script finish (or remove it), then resume."
            )

    async def _judge(self, job: Job, record: TrialRecord, checks: Structural) -> GradeOutcome:
        return await judge.grade_run(
            self.client,
            self.evals[job.eval_id],
            job.trial_dir,
            record,
            settings=self.settings,
            structural=checks,
            sample=job.run_number,
        )

    def _commit(self, job: Job, outcome: GradeOutcome, shown: Preview) -> Scored:
        graded = outcome.status != "unscored"
        row: GradingRow = {
            "key": job.key,
            "status": outcome.status,
            "score": outcome.score,
            "pass_rate": outcome.pass_rate if graded else None,
            "passed": outcome.grading.summary.passed if graded else None,
            "total": outcome.grading.summary.total if graded else None,
            "rubric_normalized": outcome.rubric_normalized,
            "gate_passed": int(outcome.structural.gate_passed) if graded else None,
            "grading_json": outcome.grading.model_dump_json(exclude_none=True) if graded else None,
            "structural_json": outcome.structural.model_dump_json() if graded else None,
            "error": outcome.error,
            "completed_at": now(),
            **job.run_key.columns(),
        }
        if not graded:
            log.warning(
                "run.unscored", run=job.key, attempt=self._tries[job.key], cause=outcome.error
            )
        gradings.commit(self.store, row, shown)
        scored = _scored(job, outcome.status, outcome.score, row["pass_rate"], outcome.error)
        if self.hooks.on_run:
            self.hooks.on_run(scored)
        self._count_defect(outcome.error if not graded else None)
        return scored

    def _count_defect(self, error: str | None) -> None:
        """A bug of ours that ends run after run is systemic: stop, with the runs committed, so
        that the night is not spent failing every run the same way."""
        if not (error or "").startswith(INTERNAL_ERROR):
            self._defects = 0
            return
        self._defects += 1
        if self._defects >= self.settings.evals.internal_error_streak:
            raise WorkFailed(
                f"{self._defects} runs in a row ended with an internal error of ours (the last: "
                f"{error}); the run stops here with everything committed. The traceback is in "
                "optimizer.log (run.internal_error); report it, then resume."
            )

    async def _execute(self, job: Job) -> TrialRecord:
        if is_complete(job.trial_dir) and trials.exists(self.store, job.key):
            record = TrialRecord.load(job.trial_dir)
            if record.status != "unscored":
                return record
        if job.trial_dir.exists():  # half-written by a killed process, or left unscored: redo it
            shutil.rmtree(job.trial_dir)
        record = await self.executor.execute(
            skill_dir=job.skill_dir,
            skill_name=(job.skill_name or self.skill_name) if job.skill_dir else None,
            eval=self.evals[job.eval_id],
            inputs_root=self.inputs_root,
            trial_dir=job.trial_dir,
            run_number=job.run_number,
            sample=job.run_number,
        )
        columns: RecordColumns = record.to_row()
        trials.record(
            self.store, {"key": job.key, "version": job.version, "split": job.split, **columns}
        )
        return record


def _scored(
    job: Job, status: GradingStatus, score: float | None, rate: float | None, error: str | None
) -> Scored:
    return Scored(
        job.key, job.eval_id, job.run_number, job.configuration, status, score, rate or 0.0, error
    )


def eval_means(results: dict[int, list[Scored]]) -> dict[int, list[float]]:
    """Scores per eval with judge errors and unscored runs left out (counted, never averaged)."""
    return {e: [s.score for s in runs if s.score is not None] for e, runs in results.items()}


# A run a claim could not score: a failure for the side that claims, a pass for the other (§24).
MISSING_CLAIMED, MISSING_AGAINST = 0.0, 1.0


def claim_means(results: dict[int, list[Scored]], *, missing: float) -> dict[int, list[float]]:
    """Scores per eval for a claim (an adoption, a gate; docs/design.md §7): a run that could
    not be scored after its retries (a judge error, a failure of ours) counts as `missing`, the
    worst score for the side that claims and the best for the side it is claimed against. Leaving
    it out would bet that failures do not depend on the output; this way they can only make the
    claim harder."""
    return {
        e: [s.score if s.score is not None else missing for s in runs]
        for e, runs in results.items()
    }


def judge_errors(*results: dict[int, list[Scored]]) -> tuple[int, int]:
    runs = [s for r in results for ss in r.values() for s in ss]
    return sum(s.status == "judge_error" for s in runs), len(runs)


def unscored(*results: dict[int, list[Scored]]) -> list[Scored]:
    """The runs our infrastructure failed, in key order: counted and shown, never averaged."""
    return sorted(
        (s for r in results for ss in r.values() for s in ss if s.status == "unscored"),
        key=lambda s: s.key,
    )


async def graded_again(
    measure: Callable[[], Awaitable[Graded]],
    retries: int,
    sides: Callable[[Graded], Sequence[dict[int, list[Scored]]]],
) -> Graded:
    """What `measure` graded, measured again (up to `retries` more passes) while a run of it is
    unscored: the ledger answers the scored runs at no cost, as a run, gate and adoption need."""
    results = await measure()
    for _ in range(retries):
        if unscored(*sides(results)):
            results = await measure()
    return results


def unscored_within(
    results: Sequence[dict[int, list[Scored]]], max_rate: float, *, runs_of: str, then: str
) -> list[Scored]:
    """The unscored runs (unscored()) when at most `max_rate` of the runs are; past it, deciding
    on what is left would let our failure decide (docs/design.md §7): WorkFailed, one sentence
    naming the runs (`runs_of`), the limit, the last cause and what happens next (`then`)."""
    lost, (_, total) = unscored(*results), judge_errors(*results)
    if total and len(lost) / total > max_rate:
        raise WorkFailed(
            f"{len(lost)} of {total} {runs_of} could not be scored, more than "
            f"selection.max_unscored_rate = {max_rate} (the last cause: "
            f"{lost[-1].error or 'unknown'}); {then}"
        )
    return lost


def committed(
    store: Store, root: Path, evalset: EvalSet, prefix: str, eval_ids: Sequence[int]
) -> list[tuple[Eval, TrialRecord, GradeOutcome]]:
    """(eval, record, outcome) of every graded run under `prefix` (e.g. "v2/") with an eval id in
    eval_ids, by (eval, configuration, run number): what aggregate() takes."""
    wanted = set(eval_ids)
    out = []
    for done in gradings.under(store, prefix):
        if done.eval_id not in wanted:
            continue
        if done.key != str(TrialKey(prefix, done.eval_id, done.configuration, done.run_number)):
            continue  # an `optimizer execute` run in the same folder: no eval segment, no benchmark run
        eval = evalset.by_id(done.eval_id)
        if done.status == "unscored":
            outcome = outcomes.unscored(eval, None, done.error or "")
        else:
            # every run not unscored was graded
            assert done.grading is not None and done.structural is not None
            outcome = GradeOutcome(
                status=done.status,
                grading=done.grading,
                structural=done.structural,
                pass_rate=done.pass_rate or 0.0,
                rubric_normalized=done.rubric_normalized,
                score=done.score,
                error=done.error,
            )
        out.append((eval, TrialRecord.load(root / done.key), outcome))
    return sorted(out, key=lambda it: (it[0].id, it[1].run_number))
