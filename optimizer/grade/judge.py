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

import time
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
from pydantic import ValidationError

from optimizer import schemas as s
from optimizer.config import Settings
from optimizer.grade.answer import JudgeAnswer, JudgedExpectation, answer_schema
from optimizer.grade.outcome import (
    GATE_SKIPPED,
    GradeOutcome,
    GradingRun,
    fail_all,
    finish,
    metrics_of,
    notes_summary,
    now,
    unscored,
)
from optimizer.grade.render import (
    MAX_FILE_CHARS,
    content,
    describe,
    read_text,
    render_view,
    task_sections,
    truncate,
)
from optimizer.grade.structural import RUN_FAILED
from optimizer.model import ModelCallFailed, StructuredAnswerError
from optimizer.model.port import Client
from optimizer.model.prompts import load_prompt
from optimizer.store.files import write_text
from optimizer.tags import data, tag

if TYPE_CHECKING:  # the SDK's types only: importing it costs 2 s (model/port.py)
    from anthropic.types import ContentBlockParam

    from optimizer.execute.record import TrialRecord
    from optimizer.inputs.evals import Eval

log = structlog.get_logger(__name__)

MAX_OUTPUT_CHARS = 120_000
MAX_TRANSCRIPT_CHARS = 60_000
JUDGE_VIEW = "judge_view.md"


def warn_same_model(settings: Settings) -> None:
    """Once per command that grades: a judge grading its own model's work is lenient."""
    if settings.models.grader == settings.models.executor:
        log.warning(
            "judge.same_model_as_executor",
            model=settings.models.grader,
            hint="set models.grader to another model: a judge grading its own kind is lenient",
        )


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
    metrics = metrics_of(trial_dir)
    notes = notes_summary(read_text(trial_dir / "outputs" / "user_notes.md"))
    started, t0 = now(), time.monotonic()
    run = GradingRun(eval, trial_dir, record, settings, has_rubric, metrics, notes, started, t0)
    if record is not None and getattr(record, "status", "ok") == "unscored":
        return unscored(eval, structural, getattr(record, "error", None) or "the run failed")
    if record is not None and getattr(record, "status", "ok") != "ok":
        reason = RUN_FAILED + (getattr(record, "error", "") or getattr(record, "status", "error"))
        failed = fail_all(structural, reason)
        judged = [
            s.GradedExpectation(text=t, passed=False, evidence=reason) for t in eval.expectations
        ]
        return finish(run, "exec_error", failed, judged, error=reason)
    if settings.evals.structural_gate and not structural.gate_passed:
        judged = [
            s.GradedExpectation(text=t, passed=False, evidence=GATE_SKIPPED)
            for t in eval.expectations
        ]
        return finish(run, "gated", structural, judged)
    if not eval.expectations and not has_rubric:
        return finish(run, "ok", structural, [])
    return await _ask_judge(client, run, structural, sample)


async def _ask_judge(
    client: Client, run: GradingRun, structural: s.Structural, sample: int
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
        return finish(run, "judge_error", structural, [], error=message)
    except ModelCallFailed as exc:  # an HTTP 400 for a context overflow, a 5xx after retries
        log.warning(
            "judge.call_failed", eval_id=eval.id, trial_dir=str(trial_dir), error=str(exc)[:500]
        )
        return unscored(eval, structural, f"the grader call failed: {exc}")
    judged = _judged(eval, answer)
    scores = {d.name: answer.rubric_scores[d.name] for d in eval.rubric}
    return finish(run, "ok", structural, judged, answer=answer, rubric_scores=scores)


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
