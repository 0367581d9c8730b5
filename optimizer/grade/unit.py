"""The unit every stage is made of: execute one run, check it structurally, judge it, and commit
the result before the next step; stages ask for (version, evals, runs) and get scores back.
Never redoes a run whose grading is committed, and never keeps a half-written run folder."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from optimizer import sandbox
from optimizer.config import Settings
from optimizer.errors import InfraFailure
from optimizer.execute.record import RunRecord, is_complete
from optimizer.grade import judge, structural
from optimizer.inputs.evals import Eval, EvalSet
from optimizer.model import batch, scope
from optimizer.schemas import Structural
from optimizer.search import stops
from optimizer.store.db import Store, now
from optimizer.store.files import Workspace

log = structlog.get_logger()

# The statuses whose score counts (DESIGN §7); judge_error and unscored runs are counted and shown
# but never averaged.
SCORED = ("ok", "gated", "exec_error")
SCORED_SQL = "(" + ", ".join(f"'{s}'" for s in SCORED) + ")"


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


def policy(settings: Settings) -> sandbox.SandboxPolicy:
    s = settings.sandbox
    return sandbox.SandboxPolicy(mode=s.mode, timeout_s=s.timeout_s, memory_mb=s.memory_mb,
                                 max_output_bytes=s.max_output_bytes,
                                 max_processes=s.max_processes, max_file_bytes=s.max_file_bytes)


class Evaluator:
    """Runs and grades with_skill runs of versions and the without_skill baseline, idempotently."""

    def __init__(self, ws: Workspace, store: Store, client, settings: Settings, evalset: EvalSet,
                 executor, *, skill_name: str, inputs_root: Path,
                 on_run: Callable[[Scored], None] | None = None,
                 should_stop: Callable[[], str | None] | None = None) -> None:
        self.ws, self.store, self.client, self.settings = ws, store, client, settings
        self.evals = {e.id: e for e in evalset.evals}
        self.executor = executor
        self.skill_name = skill_name
        self.inputs_root = inputs_root
        self.policy = policy(settings)
        self.on_run = on_run
        self.should_stop = should_stop
        self._tries: Counter[str] = Counter()  # attempts at each run in this process
        self._slots = asyncio.Semaphore(settings.execute.concurrency)

    async def version(self, label: str, eval_ids: list[int], runs: int, *,
                      root: Workspace | None = None, split: str = "train") -> dict[int, list[Scored]]:
        """with_skill runs 1..runs of `label` on eval_ids, under `root` (the sealed test uses its
        own folder)."""
        ws = root or self.ws
        prefix = "" if root is None else f"{ws.root.relative_to(self.ws.root)}/"
        jobs = [(f"{prefix}{label}/eval-{e}/with_skill/run-{n}", ws.run_dir(label, e, "with_skill", n),
                 e, "with_skill", n, ws.skill(label) if root is None else self.ws.skill(label))
                for e in eval_ids for n in range(1, runs + 1)]
        return await self._all(jobs, label, split)

    async def baseline(self, eval_ids: list[int], runs: int, *, split: str = "train") -> dict[int, list[Scored]]:
        jobs = [(f"baseline/eval-{e}/without_skill/run-{n}", self.ws.baseline_run_dir(e, n), e,
                 "without_skill", n, None) for e in eval_ids for n in range(1, runs + 1)]
        return await self._all(jobs, "baseline", split)

    async def _all(self, jobs, label: str, split: str) -> dict[int, list[Scored]]:
        """Every job, the results in job order (never completion order). Each job runs to its end
        even when another fails, so no run keeps writing behind the step that follows; then the
        first failure in job order is raised, or Interrupted when a stop left jobs unstarted."""
        # The sealed test is not part of what a version cost to evaluate: a stop measures the
        # best so far there, and a version's cost must not depend on when the run was stopped.
        token = scope.set(label if split != "test" else f"sealed test {label}")
        try:
            results = await asyncio.gather(
                *(self._unit(*job, label=label, split=split) for job in jobs), return_exceptions=True)
        finally:
            scope.reset(token)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        skipped = [r for r in results if isinstance(r, str)]
        if skipped:
            raise stops.Interrupted(skipped[0])
        out: dict[int, list[Scored]] = {}
        for scored in results:
            out.setdefault(scored.eval_id, []).append(scored)
        return out

    async def _unit(self, key: str, run_dir: Path, eval_id: int, configuration: str, run_number: int,
                    skill_dir: Path | None, *, label: str, split: str) -> Scored | str:
        """The scored run, or the reason of a stop that came before it started. A run left
        unscored by a failure of ours is tried again, at most evals.unscored_retries more times
        in this process; a resume tries again."""
        done = self.store.get("gradings", key)
        if done and done["status"] != "unscored" and (run_dir / "grading.json").is_file():
            return _scored(key, eval_id, run_number, configuration, done)
        if done and self._tries[key] > self.settings.evals.unscored_retries:
            return _scored(key, eval_id, run_number, configuration, done)
        eval = self.evals[eval_id]
        # The sealed test always runs to its end: it is what a stopped run reports on.
        stop_check = self.should_stop if split != "test" else None
        # Batch mode: the grader call waits for the stage's batch outside the execution slot, so
        # the stage's other runs execute meanwhile and join the same batch (optimizer/batch.py).
        in_slot = not batch.active(self.client)
        checks: Structural | None = None
        with batch.producer(self.client):
            async with self._slots:
                if stop_check is not None and (reason := stop_check()):
                    return reason  # not started: a stop was asked while this run waited
                self._tries[key] += 1
                record = await self._execute(key, run_dir, eval, configuration, run_number,
                                             skill_dir, label=label, split=split)
                try:
                    checks = await asyncio.to_thread(
                        structural.check_run, eval, run_dir, structural.script_policy(self.policy),
                        configuration=configuration,
                        run_error=None if record.status == "ok" else (record.error or record.status),
                    )
                except InfraFailure as exc:
                    outcome = judge.unscored(eval, None, str(exc))
                if checks is not None and in_slot:
                    outcome = await judge.grade_run(self.client, eval, run_dir, record,
                                                    settings=self.settings, structural=checks,
                                                    sample=run_number)
            if checks is not None and not in_slot:
                outcome = await judge.grade_run(self.client, eval, run_dir, record,
                                                settings=self.settings, structural=checks,
                                                sample=run_number)
            judge.write_outcome(run_dir, outcome)
        graded = outcome.status != "unscored"
        row = {
            "key": key, "status": outcome.status, "score": outcome.score,
            "pass_rate": outcome.pass_rate if graded else None,
            "passed": outcome.grading.summary.passed if graded else None,
            "total": outcome.grading.summary.total if graded else None,
            "rubric_normalized": outcome.rubric_normalized,
            "gate_passed": int(outcome.structural.gate_passed) if graded else None,
            "grading_json": outcome.grading.model_dump_json(exclude_none=True) if graded else None,
            "structural_json": outcome.structural.model_dump_json() if graded else None,
            "error": None if graded else outcome.error, "completed_at": now(),
        }
        if not graded:
            log.warning("run.unscored", run=key, attempt=self._tries[key], cause=outcome.error)
        with self.store.atomic():
            self.store.upsert("gradings", row, pk="key")
        scored = _scored(key, eval_id, run_number, configuration, row)
        if self.on_run:
            self.on_run(scored)
        return scored

    async def _execute(self, key, run_dir: Path, eval: Eval, configuration, run_number, skill_dir,
                       *, label: str, split: str) -> RunRecord:
        if is_complete(run_dir) and self.store.get("eval_runs", key):
            record = RunRecord.load(run_dir)
            if record.status != "unscored":
                return record
        if run_dir.exists():  # half-written by a killed process, or left unscored: redo it
            shutil.rmtree(run_dir)
        record = await self.executor.execute(
            skill_dir=skill_dir, skill_name=self.skill_name if skill_dir else None, eval=eval,
            inputs_root=self.inputs_root, run_dir=run_dir, run_number=run_number, sample=run_number,
        )
        with self.store.atomic():
            self.store.upsert("eval_runs", {"key": key, "version": label, "split": split,
                                            **record.to_row()}, pk="key")
        return record


def _scored(key, eval_id, run_number, configuration, row) -> Scored:
    return Scored(key, eval_id, run_number, configuration, row["status"], row["score"],
                  row["pass_rate"] or 0.0, row.get("error"))


def eval_means(results: dict[int, list[Scored]]) -> dict[int, list[float]]:
    """Scores per eval with judge errors left out (they are counted, never averaged)."""
    return {e: [s.score for s in runs if s.score is not None] for e, runs in results.items()}


def judge_errors(*results: dict[int, list[Scored]]) -> tuple[int, int]:
    runs = [s for r in results for ss in r.values() for s in ss]
    return sum(s.status == "judge_error" for s in runs), len(runs)


def unscored(*results: dict[int, list[Scored]]) -> list[Scored]:
    """The runs our infrastructure failed, in key order: counted and shown, never averaged."""
    return sorted((s for r in results for ss in r.values() for s in ss if s.status == "unscored"),
                  key=lambda s: s.key)


def gradings_of(store: Store, keys: list[str]) -> list[dict]:
    if not keys:
        return []
    marks = ",".join("?" * len(keys))
    rows = store.query(f"select key, grading_json from gradings where key in ({marks})", keys)
    return [{"key": r["key"], **json.loads(r["grading_json"])} for r in rows if r["grading_json"]]
