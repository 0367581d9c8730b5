"""grading.json and the files written beside it for one run: timing.json, metrics.json and
the structural gate's structural.json (full forms, seeds 002 and 004)."""

from __future__ import annotations

from pydantic import Field

from optimizer.schemas.common import OutputModel
from optimizer.schemas.evals import StructuralType

_EXPECTATION_MISNAMED = {"name": "text", "met": "passed", "details": "evidence"}


class GradedExpectation(OutputModel):
    misnamed = _EXPECTATION_MISNAMED
    text: str
    passed: bool
    evidence: str


class PassSummary(OutputModel):
    passed: int = Field(ge=0)
    failed: int = Field(ge=0)
    total: int = Field(ge=0)
    pass_rate: float = Field(ge=0, le=1)


class ExecutionMetrics(OutputModel):
    """grading.json `execution_metrics`: metrics.json without the file list."""

    tool_calls: dict[str, int]
    total_tool_calls: int = Field(ge=0)
    total_steps: int = Field(default=0, ge=0)
    errors_encountered: int = Field(default=0, ge=0)
    output_chars: int = Field(default=0, ge=0)
    transcript_chars: int = Field(default=0, ge=0)


class Metrics(ExecutionMetrics):
    """outputs/metrics.json, written by the executor."""

    files_created: list[str] = []
    # The run clock's split (docs/design.md §7): the time counted against execute.timeout_s, and the
    # time spent waiting on the model provider beyond its normal generation time, left out.
    skill_seconds: float | None = Field(default=None, ge=0)
    model_wait_seconds: float | None = Field(default=None, ge=0)


class GradingTiming(OutputModel):
    executor_duration_seconds: float | None = None
    grader_duration_seconds: float | None = None
    total_duration_seconds: float


class Timing(OutputModel):
    """timing.json: seed 001 shows the core three fields, seed 002 the optional rest."""

    total_tokens: int = Field(ge=0)
    duration_ms: int = Field(ge=0)
    total_duration_seconds: float = Field(ge=0)
    executor_start: str | None = None
    executor_end: str | None = None
    executor_duration_seconds: float | None = None
    grader_start: str | None = None
    grader_end: str | None = None
    grader_duration_seconds: float | None = None


class Claim(OutputModel):
    claim: str
    type: str
    verified: bool
    evidence: str


class UserNotesSummary(OutputModel):
    uncertainties: list[str] = []
    needs_review: list[str] = []
    workarounds: list[str] = []


class EvalFeedbackSuggestion(OutputModel):
    assertion: str | None = None
    reason: str


class EvalFeedback(OutputModel):
    suggestions: list[EvalFeedbackSuggestion] = []
    overall: str = ""


class RubricScore(OutputModel):
    score: int = Field(ge=1, le=5)
    evidence: str


class RubricSummary(OutputModel):
    weighted_mean: float = Field(ge=0, le=5)
    max_possible: float = 5.0
    normalized: float = Field(ge=0, le=1)


class Grading(OutputModel):
    """grading.json, seed 002; the rubric fields are seed 004's extension."""

    expectations: list[GradedExpectation]
    summary: PassSummary
    execution_metrics: ExecutionMetrics | None = None
    timing: GradingTiming | None = None
    claims: list[Claim] = []
    user_notes_summary: UserNotesSummary | None = None
    eval_feedback: EvalFeedback | None = None
    rubric_scores: dict[str, RubricScore] | None = None
    rubric_summary: RubricSummary | None = None


class StructuralResult(OutputModel):
    misnamed = {**_EXPECTATION_MISNAMED, "description": "text"}
    id: str
    text: str
    type: StructuralType
    passed: bool
    evidence: str
    critical: bool = False


class Structural(OutputModel):
    """structural.json, seed 004 (layer 1)."""

    expectations: list[StructuralResult]
    summary: PassSummary
    gate_passed: bool
