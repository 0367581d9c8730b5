"""Layer-2 grader: one forced `submit_grading` call per run, turned into the extended grading.json.
Never let a protocol failure pass or vanish: a reply that fails twice is a counted `judge_error`.

Paths of a run (DESIGN §7), each a GradeOutcome.status:
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

import html
import mimetypes
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from optimizer import schemas as s
from optimizer.config import Settings
from optimizer.grade.scoring import pass_rate, rubric_weighted_mean, run_score
from optimizer.grade.structural import RUN_FAILED, output_files
from optimizer.model import ModelCallFailed, StructuredAnswerError
from optimizer.model.prompts import load_prompt, tag, tags
from optimizer.store.files import read_json, write_json

log = structlog.get_logger(__name__)

GATE_SKIPPED = "skipped: structural gate failed"
MAX_FILE_CHARS = 20_000
MAX_OUTPUT_CHARS = 120_000
MAX_TRANSCRIPT_CHARS = 60_000
TRANSCRIPT_HEAD = 20_000  # the rest of the budget keeps the end, where the run's result is

_warned_same_model = False


# --- the answer the judge gives (the tool's input schema) ---------------------------------------


class _Answer(BaseModel):
    # Extra keys a model adds (a summary it was told we compute) are ignored, not an error.
    model_config = ConfigDict(extra="ignore")


class JudgedExpectation(_Answer):
    text: str = Field(description="The expectation, copied verbatim")
    passed: bool
    evidence: str = Field(description="A quote with its file and line, or what is missing")


class ClaimAnswer(_Answer):
    claim: str
    type: str = Field(description="factual, process or quality")
    verified: bool
    evidence: str


class NotesAnswer(_Answer):
    uncertainties: list[str] = []
    needs_review: list[str] = []
    workarounds: list[str] = []


class SuggestionAnswer(_Answer):
    assertion: str | None = Field(None, description="The expectation concerned; omit for a gap")
    reason: str


class FeedbackAnswer(_Answer):
    suggestions: list[SuggestionAnswer] = []
    overall: str = ""


class ScoreAnswer(_Answer):
    score: int = Field(ge=1, le=5)
    evidence: str


class JudgeAnswer(_Answer):
    """What `submit_grading` carries; the summary and rubric arithmetic are ours, not the judge's."""

    expectations: list[JudgedExpectation] = Field(description="Every expectation, verbatim, once")
    claims: list[ClaimAnswer] = []
    user_notes_summary: NotesAnswer = NotesAnswer()
    eval_feedback: FeedbackAnswer = FeedbackAnswer()
    rubric_scores: dict[str, ScoreAnswer] = Field(
        default_factory=dict, description="Dimension name -> score 1..5 and evidence"
    )


def answer_schema(texts: list[str], dimensions: list[str]) -> type[JudgeAnswer]:
    """JudgeAnswer that also checks this eval's completeness, so a reply missing an expectation
    or a dimension fails validation and goes down the client's repair path."""
    wanted = Counter(t.strip() for t in texts)
    dims = set(dimensions)

    class Answer(JudgeAnswer):
        """The grading of one run: every expectation verbatim once, every rubric dimension once."""

        model_config = ConfigDict(title="JudgeAnswer")

        @model_validator(mode="after")
        def _complete(self) -> Answer:
            got = Counter(e.text.strip() for e in self.expectations)
            problems = [f"expectation missing: {t!r}" for t in wanted if got[t] < wanted[t]]
            problems += [f"expectation returned more than once: {t!r}" for t in wanted if got[t] > wanted[t]]
            problems += [f"not an expectation of this task (copy texts verbatim): {t!r}" for t in got if t not in wanted]
            problems += [f"rubric dimension missing: {d!r}" for d in sorted(dims - self.rubric_scores.keys())]
            problems += [f"not a rubric dimension: {d!r}" for d in sorted(self.rubric_scores.keys() - dims)]
            if problems:
                raise ValueError("; ".join(problems))
            return self

    return Answer


# --- the outcome ------------------------------------------------------------------------------


UNSCORED = "unscored: "


@dataclass(frozen=True)
class GradeOutcome:
    status: Literal["ok", "judge_error", "exec_error", "gated", "unscored"]
    grading: s.Grading
    structural: s.Structural
    pass_rate: float
    rubric_normalized: float | None
    score: float | None  # None for judge_error and unscored: excluded from every mean
    error: str | None = None


def unscored(eval: Any, structural: s.Structural | None, cause: str) -> GradeOutcome:
    """A run our infrastructure failed (DESIGN §7): no score, never 0; its grading.json is not
    written (the run has no grading), and the cause is kept for status and benchmark.json."""
    reason = UNSCORED + cause
    checks = fail_all(structural, reason) if structural is not None else s.Structural(
        expectations=[], summary=s.PassSummary(passed=0, failed=0, total=0, pass_rate=0.0),
        gate_passed=True)
    judged = [s.GradedExpectation(text=t, passed=False, evidence=reason) for t in eval.expectations]
    items = [_structural_item(r) for r in checks.expectations] + judged
    grading = s.Grading(
        expectations=items,
        summary=s.PassSummary(passed=0, failed=len(items), total=len(items), pass_rate=0.0),
    )
    return GradeOutcome("unscored", grading, checks, 0.0, None, None, cause)


def write_outcome(run_dir: Path, outcome: GradeOutcome) -> None:
    """structural.json and grading.json, each validated by its model, each written atomically.
    An unscored run has no grading: nothing is written, and a stale file goes."""
    if outcome.status == "unscored":
        for name in ("grading.json", "structural.json"):
            (Path(run_dir) / name).unlink(missing_ok=True)
        return
    write_json(Path(run_dir) / "structural.json", outcome.structural, s.Structural)
    write_json(Path(run_dir) / "grading.json", outcome.grading, s.Grading)


async def grade_run(
    client: Any,
    eval: Any,
    run_dir: Path,
    record: Any,
    *,
    settings: Settings,
    structural: s.Structural,
    sample: int,
) -> GradeOutcome:
    """Grade one executed run whose structural checks are done (see the module rules)."""
    global _warned_same_model
    run_dir = Path(run_dir)
    has_rubric = bool(eval.rubric)
    metrics = _metrics(run_dir)
    started, t0 = _now(), time.monotonic()

    def finish(status, structural, judged, answer=None, rubric_scores=None, error=None):
        items = [_structural_item(r) for r in structural.expectations] + judged
        passed = sum(e.passed for e in items)
        rate = pass_rate(passed, len(items))
        summary = s.PassSummary(
            passed=passed, failed=len(items) - passed, total=len(items), pass_rate=round(rate, 4)
        )
        rubric_summary = None
        if has_rubric and status != "judge_error":
            weights = {d.name: d.weight for d in eval.rubric}
            points = {k: v["score"] for k, v in (rubric_scores or {}).items()}
            mean = rubric_weighted_mean(points, weights) if points else 0.0
            rubric_summary = s.RubricSummary(
                weighted_mean=round(mean, 4), max_possible=5.0, normalized=round(mean / 5, 4)
            )
        grading = s.Grading(
            expectations=items,
            summary=summary,
            execution_metrics=metrics,
            timing=_timing(run_dir, record, started, time.monotonic() - t0),
            claims=[s.Claim(**c.model_dump()) for c in answer.claims] if answer else [],
            user_notes_summary=s.UserNotesSummary(**answer.user_notes_summary.model_dump()) if answer else None,
            eval_feedback=_feedback(answer) if answer else None,
            rubric_scores={k: s.RubricScore(**v) for k, v in rubric_scores.items()} if rubric_scores else None,
            rubric_summary=rubric_summary,
            **({"judge_error": error} if status == "judge_error" else {}),
        )
        normalized = rubric_summary.normalized if rubric_summary else None
        if status == "exec_error":
            score = 0.0
        elif status == "judge_error":
            score, normalized = None, None
        else:
            score = run_score(rate, normalized, has_rubric, settings.scoring)
        return GradeOutcome(status, grading, structural, rate, normalized, score, error)

    if record is not None and getattr(record, "status", "ok") == "unscored":
        return unscored(eval, structural, getattr(record, "error", None) or "the run failed")
    if record is not None and getattr(record, "status", "ok") != "ok":
        reason = RUN_FAILED + (getattr(record, "error", None) or getattr(record, "status", "error"))
        failed = fail_all(structural, reason)
        judged = [s.GradedExpectation(text=t, passed=False, evidence=reason) for t in eval.expectations]
        return finish("exec_error", failed, judged, error=reason)
    if settings.evals.structural_gate and not structural.gate_passed:
        judged = [s.GradedExpectation(text=t, passed=False, evidence=GATE_SKIPPED) for t in eval.expectations]
        return finish("gated", structural, judged)
    if not eval.expectations and not has_rubric:
        return finish("ok", structural, [])

    model = settings.models.grader
    if model == settings.models.executor and not _warned_same_model:
        _warned_same_model = True
        log.warning("judge.same_model_as_executor", model=model,
                    hint="set models.grader to another model: a judge grading its own kind is lenient")
    schema = answer_schema(list(eval.expectations), [d.name for d in eval.rubric])
    try:
        answer = await client.structured(
            "grader",
            system=load_prompt("grader").render(extra_rules=""),
            messages=[{"role": "user", "content": build_request(eval, run_dir)}],
            schema=schema,
            tool_name="submit_grading",
            sample=sample,
            model=model,
        )
    except (StructuredAnswerError, ValidationError) as exc:
        message = f"the judge's reply failed validation twice: {exc}"
        log.warning("judge.failed", eval_id=eval.id, run_dir=str(run_dir), error=str(exc)[:500])
        return finish("judge_error", structural, [], error=message)
    except ModelCallFailed as exc:  # an HTTP 400 for a context overflow, a 5xx after retries
        log.warning("judge.call_failed", eval_id=eval.id, run_dir=str(run_dir), error=str(exc)[:500])
        return unscored(eval, structural, f"the grader call failed: {exc}")
    by_text: dict[str, list[JudgedExpectation]] = {}
    for item in answer.expectations:
        by_text.setdefault(item.text.strip(), []).append(item)
    judged = []
    for text in eval.expectations:
        item = by_text[text.strip()].pop(0)
        judged.append(s.GradedExpectation(text=text, passed=item.passed, evidence=item.evidence))
    scores = {d.name: answer.rubric_scores[d.name].model_dump() for d in eval.rubric}
    return finish("ok", structural, judged, answer=answer, rubric_scores=scores)


def fail_all(structural: s.Structural, evidence: str) -> s.Structural:
    """The same checks, all failed with one reason (a run that never finished proves nothing)."""
    items = [r.model_copy(update={"passed": False, "evidence": evidence}) for r in structural.expectations]
    return s.Structural(
        expectations=items,
        summary=s.PassSummary(passed=0, failed=len(items), total=len(items), pass_rate=0.0),
        gate_passed=not any(r.critical for r in items),
    )


# --- the request --------------------------------------------------------------------------------


def build_request(eval: Any, run_dir: Path) -> str:
    """The user message: tagged sections the grader prompt names, and nothing of the host (no
    paths, no times), so the same run asks the same question wherever its folder is."""
    parts = [
        tag("task", eval.prompt),
        tag("expected_output", eval.expected_output or "(not given)"),
        tag("expectations", tags("expectation", [({"id": f"E{i}"}, t) for i, t in enumerate(eval.expectations, 1)])),
    ]
    if eval.rubric:
        parts.append(tag("rubric", "\n".join(_dimension_tag(d) for d in eval.rubric)))
    parts.append(tag("outputs", render_outputs(run_dir)))
    parts.append(tag("transcript", truncate(_read_text(run_dir / "transcript.md"), MAX_TRANSCRIPT_CHARS)))
    notes = _read_text(run_dir / "outputs" / "user_notes.md").strip()
    parts.append(tag("user_notes", truncate(notes, MAX_FILE_CHARS) if notes else "(none)"))
    return "\n\n".join(parts)


def _dimension_tag(dim: Any) -> str:
    # Written out because prompting.tag() takes `name` itself as its first argument.
    anchors = [f"Score {k}: {v}" for k, v in sorted(dim.scoring.items())]
    body = "\n".join([dim.description, *anchors])
    name, weight = html.escape(dim.name, quote=True), html.escape(str(dim.weight), quote=True)
    return f'<dimension name="{name}" weight="{weight}">\n{body}\n</dimension>'


def truncate(text: str, limit: int, head: int | None = None) -> str:
    """text cut in the middle with a visible marker; the head keeps the start, the rest the end."""
    if len(text) <= limit:
        return text
    head = min(head if head is not None else limit // 3, limit)
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[… {cut:,} characters truncated …]\n{text[len(text) - tail:] if tail else ''}"


def render_outputs(run_dir: Path) -> str:
    """Every output file: text inline (each and all capped), binaries by name, type and size."""
    entries, budget = [], MAX_OUTPUT_CHARS
    for rel in output_files(run_dir):
        path = run_dir / "outputs" / rel
        size = path.stat().st_size
        kind = mimetypes.guess_type(rel)[0] or "application/octet-stream"
        text = _text_or_none(path)
        if text is None:
            entries.append(tag("file", f"(binary file, {size:,} bytes, not shown)",
                               path=f"outputs/{rel}", binary="true", size=size, type=kind))
            continue
        if budget <= 0:
            entries.append(tag("file", f"[… not shown: the outputs passed {MAX_OUTPUT_CHARS:,} characters …]",
                               path=f"outputs/{rel}", size=size))
            continue
        shown = truncate(text, min(MAX_FILE_CHARS, budget), head=min(MAX_FILE_CHARS, budget) * 3 // 4)
        budget -= len(shown)
        entries.append(tag("file", shown, path=f"outputs/{rel}"))
    return "\n".join(entries) if entries else "(no output files)"


def _text_or_none(path: Path) -> str | None:
    with open(path, "rb") as handle:
        data = handle.read(4 * MAX_OUTPUT_CHARS)
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A cut through a multi-byte character at the read limit is still text.
        return data[: exc.start].decode("utf-8") if exc.start > len(data) - 4 else None


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


# --- pieces of grading.json ---------------------------------------------------------------------


def _structural_item(r: s.StructuralResult) -> s.GradedExpectation:
    text = r.text if r.text == r.id else f"{r.id}: {r.text}"
    return s.GradedExpectation(text=text, passed=r.passed, evidence=r.evidence)


def _feedback(answer: JudgeAnswer) -> s.EvalFeedback | None:
    fb = answer.eval_feedback
    if not fb.suggestions and not fb.overall.strip():
        return None  # seed 002: present only when the grader raises something
    return s.EvalFeedback(
        suggestions=[s.EvalFeedbackSuggestion(**x.model_dump(exclude_none=True)) for x in fb.suggestions],
        overall=fb.overall,
    )


def _metrics(run_dir: Path) -> s.ExecutionMetrics | None:
    path = run_dir / "outputs" / "metrics.json"
    try:
        data = s.Metrics.model_validate(read_json(path)).model_dump(exclude={"files_created"})
    except (OSError, ValueError):
        return None
    return s.ExecutionMetrics.model_validate(data)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _timing(run_dir: Path, record: Any, grader_start: str, grader_s: float) -> s.GradingTiming:
    executor_s = None
    try:
        timing = s.Timing.model_validate(read_json(run_dir / "timing.json"))
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
