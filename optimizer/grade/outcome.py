"""The outcome of one run's grading (grade/judge.py asks the judge): the status and score each
path allows, and the extended grading.json the outcome is written as (structural checks first,
then the judged expectations, their pass rate, the rubric's weighted mean, the judge's extras, the
timing), validated and written atomically beside structural.json."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from optimizer import schemas as s
from optimizer.config import Settings
from optimizer.grade.answer import JudgeAnswer, ScoreAnswer
from optimizer.grade.scoring import pass_rate, rubric_weighted_mean, run_score
from optimizer.store.files import read_json, write_json

if TYPE_CHECKING:
    from optimizer.execute.record import TrialRecord
    from optimizer.inputs.evals import Eval

# The evidence of an expectation no judge saw: the gate stopped the run, or ours failed it.
GATE_SKIPPED = "skipped: structural gate failed"
UNSCORED = "unscored: "

Status = Literal["ok", "judge_error", "exec_error", "gated", "unscored"]


@dataclass(frozen=True)
class GradeOutcome:
    status: Status
    grading: s.Grading
    structural: s.Structural
    pass_rate: float
    rubric_normalized: float | None
    score: float | None  # None for judge_error and unscored: excluded from every mean
    error: str | None = None


def unscored(eval: Eval, structural: s.Structural | None, cause: str) -> GradeOutcome:
    """A run our infrastructure failed (docs/design.md §7): no score, never 0; its grading.json is not
    written (the run has no grading), and the cause is kept for status and benchmark.json."""
    reason = UNSCORED + cause
    checks = (
        fail_all(structural, reason)
        if structural is not None
        else s.Structural(
            expectations=[],
            summary=s.PassSummary(passed=0, failed=0, total=0, pass_rate=0.0),
            gate_passed=True,
        )
    )
    judged = [s.GradedExpectation(text=t, passed=False, evidence=reason) for t in eval.expectations]
    items = [_structural_item(r) for r in checks.expectations] + judged
    grading = s.Grading(
        expectations=items,
        summary=s.PassSummary(passed=0, failed=len(items), total=len(items), pass_rate=0.0),
    )
    return GradeOutcome("unscored", grading, checks, 0.0, None, None, cause)


def write_outcome(trial_dir: Path, outcome: GradeOutcome) -> None:
    """structural.json and grading.json, each validated by its model, each written atomically.
    An unscored run has no grading: nothing is written, and a stale file goes."""
    if outcome.status == "unscored":
        for name in ("grading.json", "structural.json"):
            (Path(trial_dir) / name).unlink(missing_ok=True)
        return
    write_json(Path(trial_dir) / "structural.json", outcome.structural, s.Structural)
    write_json(Path(trial_dir) / "grading.json", outcome.grading, s.Grading)


@dataclass(frozen=True)
class GradingRun:
    """What every path of one run's grading shares: the eval, its folder, record and settings,
    what the executor left beside the outputs, and when grading started (for the timing)."""

    eval: Eval
    trial_dir: Path
    record: TrialRecord | None
    settings: Settings
    has_rubric: bool
    metrics: s.ExecutionMetrics | None
    notes: s.UserNotesSummary | None
    started: str
    t0: float


def finish(
    run: GradingRun,
    status: Status,
    structural: s.Structural,
    judged: list[s.GradedExpectation],
    answer: JudgeAnswer | None = None,
    rubric_scores: Mapping[str, ScoreAnswer] | None = None,
    error: str | None = None,
) -> GradeOutcome:
    """The outcome of one path: the structural expectations then the judged ones, their pass
    rate, the judge's extras when it answered, and the score the status allows."""
    items = [_structural_item(r) for r in structural.expectations] + judged
    passed = sum(e.passed for e in items)
    rate = pass_rate(passed, len(items))
    summary = s.PassSummary(
        passed=passed, failed=len(items) - passed, total=len(items), pass_rate=round(rate, 4)
    )
    rubric_summary = _rubric_summary(run, status, rubric_scores)
    grading = s.Grading(
        expectations=items,
        summary=summary,
        execution_metrics=run.metrics,
        timing=_timing(run.trial_dir, run.record, run.started, time.monotonic() - run.t0),
        claims=[s.Claim(**c.model_dump()) for c in answer.claims] if answer else [],
        user_notes_summary=run.notes
        or (s.UserNotesSummary(**answer.user_notes_summary.model_dump()) if answer else None),
        eval_feedback=_feedback(answer) if answer else None,
        rubric_scores={k: s.RubricScore(**v.model_dump()) for k, v in rubric_scores.items()}
        if rubric_scores
        else None,
        rubric_summary=rubric_summary,
        **({"judge_error": error} if status == "judge_error" else {}),
    )
    normalized = rubric_summary.normalized if rubric_summary else None
    if status == "exec_error":
        score: float | None = 0.0
    elif status == "judge_error":
        score, normalized = None, None
    else:
        score = run_score(rate, normalized, run.has_rubric, run.settings.scoring)
    return GradeOutcome(status, grading, structural, rate, normalized, score, error)


def _rubric_summary(
    run: GradingRun, status: Status, rubric_scores: Mapping[str, ScoreAnswer] | None
) -> s.RubricSummary | None:
    """The weighted mean of the rubric scores; all zeros when the judge gave none (an exec_error
    or a gated run), so the rubric weighs as nothing. None without a rubric or for a judge_error."""
    if not run.has_rubric or status == "judge_error":
        return None
    weights = {d.name: d.weight for d in run.eval.rubric}
    points = {k: v.score for k, v in (rubric_scores or {}).items()}
    mean = rubric_weighted_mean(points, weights) if points else 0.0
    return s.RubricSummary(
        weighted_mean=round(mean, 4), max_possible=5.0, normalized=round(mean / 5, 4)
    )


def fail_all(structural: s.Structural, evidence: str) -> s.Structural:
    """The same checks, all failed with one reason (a run that never finished proves nothing)."""
    items = [
        r.model_copy(update={"passed": False, "evidence": evidence})
        for r in structural.expectations
    ]
    return s.Structural(
        expectations=items,
        summary=s.PassSummary(passed=0, failed=len(items), total=len(items), pass_rate=0.0),
        gate_passed=not any(r.critical for r in items),
    )


NOTE_HEADINGS = (
    ("uncertainties", "uncertain"),
    ("needs_review", "review"),
    ("workarounds", "workaround"),
)


def notes_summary(text: str) -> s.UserNotesSummary | None:
    """user_notes.md in the shape the executor prompt asks for (`## Uncertainties`, `## Needs
    review`, `## Workarounds`, one bullet or paragraph per point) as the summary, verbatim: the
    agent's own words are better evidence than a model's digest of them. None when the notes have
    none of those headings; then the judge's summary (which also reads the transcript) is used."""
    lists: dict[str, list[str]] = {key: [] for key, _ in NOTE_HEADINGS}
    current, found = None, False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            head = stripped.lstrip("#").strip().lower()
            current = next((key for key, word in NOTE_HEADINGS if word in head), None)
            found = found or current is not None
        elif current and stripped and stripped.lower().strip("()._ ") not in ("none", "n/a", "-"):
            item = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", stripped)  # a bullet or a number
            lists[current].append(item)
    return s.UserNotesSummary(**lists) if found else None


def _structural_item(r: s.StructuralResult) -> s.GradedExpectation:
    text = r.text if r.text == r.id else f"{r.id}: {r.text}"
    return s.GradedExpectation(text=text, passed=r.passed, evidence=r.evidence)


def _feedback(answer: JudgeAnswer) -> s.EvalFeedback | None:
    fb = answer.eval_feedback
    if not fb.suggestions and not fb.overall.strip():
        return None  # seed 002: present only when the grader raises something
    return s.EvalFeedback(
        suggestions=[
            s.EvalFeedbackSuggestion(**x.model_dump(exclude_none=True)) for x in fb.suggestions
        ],
        overall=fb.overall,
    )


def metrics_of(trial_dir: Path) -> s.ExecutionMetrics | None:
    path = trial_dir / "outputs" / "metrics.json"
    try:
        data = s.Metrics.model_validate(read_json(path)).model_dump(exclude={"files_created"})
    except (OSError, ValueError):
        return None
    return s.ExecutionMetrics.model_validate(data)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _timing(trial_dir: Path, record: object, grader_start: str, grader_s: float) -> s.GradingTiming:
    executor_s = None
    try:
        timing = s.Timing.model_validate(read_json(trial_dir / "timing.json"))
        executor_s = timing.executor_duration_seconds or timing.total_duration_seconds
    except (OSError, ValueError):
        pass
    if executor_s is None and record is not None:
        executor_s = getattr(record, "duration_s", None)
    executor_s = float(executor_s or 0.0)
    return s.GradingTiming(
        executor_duration_seconds=round(executor_s, 3),
        grader_duration_seconds=round(grader_s, 3),
        total_duration_seconds=round(executor_s + grader_s, 3),
        grader_start=grader_start,
        grader_end=now(),
    )
