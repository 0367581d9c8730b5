"""Layer-2 grader: one forced `submit_grading` call per run, turned into the extended grading.json.
Never let a protocol failure pass or vanish: a reply that fails twice is a counted `judge_error`.

Paths of a run (docs/design.md §7), each a GradeOutcome.status:
- `exec_error`: the executor failed or timed out. Every expectation fails with "run failed: …",
  the score is 0, the judge is not called; the run is kept and counted.
- `gated`: the structural gate failed while `evals.structural_gate` is on. The judge is not
  called; judged expectations fail with "skipped: structural gate failed"; `rubric_scores` is
  left out and `rubric_summary` is all zeros (normalized 0), so the rubric weighs as nothing.
- `judge_error`: the reply failed validation twice. grading.json then holds the structural
  expectations only, plus a top-level `judge_error` field with the message, so the viewer still
  opens it; the score is None and aggregation excludes the run from the means.
- `unscored`: our infrastructure failed (a model call of the executor or the grader failed for
  good, the sandbox could not start): no score, never 0, no grading.json; the run is counted,
  shown with its cause and tried again on a later pass or a resume (docs/rules.md).
- `ok`: structural expectations first ("S1: description"), then the judged ones in the eval's
  order. An eval with neither judged expectations nor a rubric needs no judge call.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import structlog
from pydantic import ValidationError

from optimizer import schemas as s
from optimizer.config import Settings
from optimizer.grade.answer import JudgeAnswer, JudgedExpectation, ScoreAnswer, answer_schema
from optimizer.grade.render import (
    MAX_FILE_CHARS,
    content,
    describe,
    read_text,
    render_view,
    task_sections,
    truncate,
)
from optimizer.grade.scoring import pass_rate, rubric_weighted_mean, run_score
from optimizer.grade.structural import RUN_FAILED
from optimizer.model import ModelCallFailed, StructuredAnswerError
from optimizer.model.port import Client
from optimizer.model.prompts import load_prompt
from optimizer.store.files import read_json, write_json, write_text
from optimizer.tags import data, tag

if TYPE_CHECKING:  # the SDK's types only: importing it costs 2 s (model/port.py)
    from anthropic.types import ContentBlockParam

    from optimizer.execute.record import TrialRecord
    from optimizer.inputs.evals import Eval

log = structlog.get_logger(__name__)

GATE_SKIPPED = "skipped: structural gate failed"
MAX_OUTPUT_CHARS = 120_000
MAX_TRANSCRIPT_CHARS = 60_000
JUDGE_VIEW = "judge_view.md"

# --- the outcome ------------------------------------------------------------------------------


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


def warn_same_model(settings: Settings) -> None:
    """Once per command that grades: a judge grading its own model's work is lenient."""
    if settings.models.grader == settings.models.executor:
        log.warning(
            "judge.same_model_as_executor",
            model=settings.models.grader,
            hint="set models.grader to another model: a judge grading its own kind is lenient",
        )


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
class _Run:
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


async def grade_run(
    client: Client,
    eval: Eval,
    trial_dir: Path,
    record: TrialRecord | None,
    *,
    settings: Settings,
    structural: s.Structural,
    sample: int,
) -> GradeOutcome:
    """Grade one executed run whose structural checks are done (see the module rules)."""
    trial_dir = Path(trial_dir)
    has_rubric = bool(eval.rubric)
    metrics = _metrics(trial_dir)
    notes = notes_summary(read_text(trial_dir / "outputs" / "user_notes.md"))
    started, t0 = _now(), time.monotonic()
    run = _Run(eval, trial_dir, record, settings, has_rubric, metrics, notes, started, t0)
    if record is not None and getattr(record, "status", "ok") == "unscored":
        return unscored(eval, structural, getattr(record, "error", None) or "the run failed")
    if record is not None and getattr(record, "status", "ok") != "ok":
        reason = RUN_FAILED + (getattr(record, "error", "") or getattr(record, "status", "error"))
        failed = fail_all(structural, reason)
        judged = [
            s.GradedExpectation(text=t, passed=False, evidence=reason) for t in eval.expectations
        ]
        return _finish(run, "exec_error", failed, judged, error=reason)
    if settings.evals.structural_gate and not structural.gate_passed:
        judged = [
            s.GradedExpectation(text=t, passed=False, evidence=GATE_SKIPPED)
            for t in eval.expectations
        ]
        return _finish(run, "gated", structural, judged)
    if not eval.expectations and not has_rubric:
        return _finish(run, "ok", structural, [])
    return await _ask_judge(client, run, structural, sample)


async def _ask_judge(
    client: Client, run: _Run, structural: s.Structural, sample: int
) -> GradeOutcome:
    """One forced `submit_grading` call and its outcome: a reply that fails validation twice is a
    judge_error, a call that fails for good leaves the run unscored."""
    eval, trial_dir, settings = run.eval, run.trial_dir, run.settings
    model = settings.models.grader
    schema = answer_schema(list(eval.expectations), [d.name for d in eval.rubric])
    request = build_request(eval, trial_dir, attachments=settings.llm.attachments)
    # What the judge saw, beside its grading (not in outputs/, so never graded itself).
    write_text(trial_dir / JUDGE_VIEW, describe(request))
    try:
        answer = await client.structured(
            "grader",
            system=load_prompt("grader").render(),
            messages=[{"role": "user", "content": request}],
            schema=schema,
            tool_name="submit_grading",
            sample=sample,
            model=model,
        )
    except (StructuredAnswerError, ValidationError) as exc:
        message = f"the judge's reply failed validation twice: {exc}"
        log.warning("judge.failed", eval_id=eval.id, trial_dir=str(trial_dir), error=str(exc)[:500])
        return _finish(run, "judge_error", structural, [], error=message)
    except ModelCallFailed as exc:  # an HTTP 400 for a context overflow, a 5xx after retries
        log.warning(
            "judge.call_failed", eval_id=eval.id, trial_dir=str(trial_dir), error=str(exc)[:500]
        )
        return unscored(eval, structural, f"the grader call failed: {exc}")
    judged = _judged(eval, answer)
    scores = {d.name: answer.rubric_scores[d.name] for d in eval.rubric}
    return _finish(run, "ok", structural, judged, answer=answer, rubric_scores=scores)


def _judged(eval: Eval, answer: JudgeAnswer) -> list[s.GradedExpectation]:
    """The judge's verdicts in the eval's order, matched by text: the schema made the reply hold
    each expectation as often as the eval does, so a repeated text takes its verdicts in turn."""
    by_text: dict[str, list[JudgedExpectation]] = {}
    for item in answer.expectations:
        by_text.setdefault(item.text.strip(), []).append(item)
    judged = []
    for text in eval.expectations:
        item = by_text[text.strip()].pop(0)
        judged.append(s.GradedExpectation(text=text, passed=item.passed, evidence=item.evidence))
    return judged


def _finish(
    run: _Run,
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
    run: _Run, status: Status, rubric_scores: Mapping[str, ScoreAnswer] | None
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


# --- the request --------------------------------------------------------------------------------


def build_request(
    eval: Eval, trial_dir: Path, *, attachments: bool = True
) -> str | list[ContentBlockParam]:
    """The user message: tagged sections the grader prompt names, then any images and PDFs of the
    outputs as their own blocks; nothing of the host (no paths, no times), so the same run asks
    the same question wherever its folder is."""
    parts = task_sections(eval)
    view = render_view(trial_dir, budget=MAX_OUTPUT_CHARS, attach=attachments)
    parts.append(tag("outputs", view.text))
    parts.append(
        data("transcript", truncate(read_text(trial_dir / "transcript.md"), MAX_TRANSCRIPT_CHARS))
    )
    notes = read_text(trial_dir / "outputs" / "user_notes.md").strip()
    parts.append(
        data("user_notes", truncate(notes, MAX_FILE_CHARS))
        if notes
        else tag("user_notes", "(none)")
    )
    return content("\n\n".join(parts), view.attachments)


# --- pieces of grading.json ---------------------------------------------------------------------


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


def _metrics(trial_dir: Path) -> s.ExecutionMetrics | None:
    path = trial_dir / "outputs" / "metrics.json"
    try:
        data = s.Metrics.model_validate(read_json(path)).model_dump(exclude={"files_created"})
    except (OSError, ValueError):
        return None
    return s.ExecutionMetrics.model_validate(data)


def _now() -> str:
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
        grader_end=_now(),
    )
