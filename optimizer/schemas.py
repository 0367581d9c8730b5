"""Pydantic models of every seed JSON file (docs/seeds/), the contract with skill-creator.
Never rename, drop or re-nest a seed field here: the viewer reads these names exactly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    RootModel,
    SerializerFunctionWrapHandler,
    Tag,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

# A JSON document as parsed (json.loads) or about to be written, before a model has checked it:
# what a user's file or edit, a request's body or a JSON column holds.
Json = str | int | float | bool | None | list["Json"] | Mapping[str, "Json"]
JsonObject = Mapping[str, Json]

# ---------------------------------------------------------------------------
# evals.json (input): three dialects, seeds 002 (expectations), 001 (assertions), 004 (extended)
# ---------------------------------------------------------------------------


class _In(BaseModel):
    # A typo in an input file would otherwise silently drop a check or a setting.
    model_config = ConfigDict(extra="forbid")


class EvalConfig(_In):
    """Seed 004 `eval_config`; None means "not set here", so settings can layer over it."""

    runs_per_eval: int | None = Field(default=None, ge=1)
    structural_gate: bool | None = None
    judge_model: str | None = None
    baseline_comparison: bool | None = None


class Assertion(_In):
    """Seed 001 evals/eval_metadata assertion."""

    id: str
    text: str


StructuralType = Literal[
    "file_exists", "file_contains", "file_not_contains", "no_errors", "file_count", "custom_script"
]


class _Structural(_In):
    id: str
    description: str = ""
    critical: bool = False


class FileExists(_Structural):
    type: Literal["file_exists"]
    pattern: str


class _Matching(_Structural):
    pattern: str
    match: str | None = None
    match_any: list[str] | None = Field(default=None, min_length=1)
    match_regex: str | None = None

    @model_validator(mode="after")
    def _one_matcher(self) -> _Matching:
        given = [k for k in ("match", "match_any", "match_regex") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of 'match', 'match_any' or 'match_regex' (got {given or 'none'})"
            )
        return self


class FileContains(_Matching):
    type: Literal["file_contains"]


class FileNotContains(_Matching):
    type: Literal["file_not_contains"]
    except_context: list[str] = []


class NoErrors(_Structural):
    type: Literal["no_errors"]


class FileCount(_Structural):
    type: Literal["file_count"]
    pattern: str
    count: int = Field(ge=0)
    operator: Literal["==", ">=", "<=", ">", "<"] = "=="


class CustomScript(_Structural):
    type: Literal["custom_script"]
    script: str = Field(min_length=1)


StructuralExpectation = Annotated[
    FileExists | FileContains | FileNotContains | NoErrors | FileCount | CustomScript,
    Field(discriminator="type"),
]
STRUCTURAL_TYPES: tuple[str, ...] = get_args(StructuralType)


class RubricDimension(_In):
    id: str
    name: str
    description: str
    weight: float = Field(default=1.0, gt=0)
    scoring: dict[str, str] = {}

    @field_validator("scoring")
    @classmethod
    def _anchor_keys(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [k for k in v if k not in {"1", "2", "3", "4", "5"}]
        if bad:
            raise ValueError(f"scoring anchors are keyed '1'..'5', not {bad}")
        return v


class QualityRubric(_In):
    dimensions: list[RubricDimension] = Field(min_length=1)


class EvalRaw(_In):
    """One eval as written, in any dialect; evals.py normalises it."""

    id: int = Field(strict=True)
    prompt: str
    expected_output: str | None = None
    files: list[str] = []
    name: str | None = None
    expectations: list[str] | None = None
    assertions: list[Assertion] | None = None
    structural_expectations: list[StructuralExpectation] = []
    quality_rubric: QualityRubric | None = None

    @model_validator(mode="after")
    def _one_dialect(self) -> EvalRaw:
        if self.expectations is not None and self.assertions is not None:
            raise ValueError(
                "use either 'expectations' (strings) or 'assertions' ({id, text}), not both"
            )
        return self

    @property
    def expectation_texts(self) -> list[str]:
        """Judged expectations as plain text, whichever dialect carried them."""
        if self.assertions is not None:
            return [a.text for a in self.assertions]
        return list(self.expectations or [])


class EvalsFileRaw(_In):
    skill_name: str
    eval_config: EvalConfig | None = None
    evals: list[EvalRaw]


EvalsDialect = Literal["expectations", "assertions", "extended"]
_EXTENDED_EVAL_KEYS = ("name", "structural_expectations", "quality_rubric")


def detect_evals_dialect(data: JsonObject) -> EvalsDialect:
    """Which seed an evals.json follows: 004 `extended`, 001 `assertions`, else 002 `expectations`."""
    listed = data.get("evals")
    evals = [e for e in listed if isinstance(e, dict)] if isinstance(listed, list) else []
    if "eval_config" in data or any(k in e for e in evals for k in _EXTENDED_EVAL_KEYS):
        return "extended"
    if any("assertions" in e for e in evals):
        return "assertions"
    return "expectations"


# ---------------------------------------------------------------------------
# Artifacts we write (full forms, seeds 002 and 004)
# ---------------------------------------------------------------------------


class _Out(BaseModel):
    """Output may add fields, never rename one: extras pass, known misnamings do not."""

    model_config = ConfigDict(extra="allow")
    # wrong name -> seed name, for names the seeds warn about or that a writer slips into
    misnamed: ClassVar[dict[str, str]] = {}
    # seed fields whose null is meaningful: kept even when a writer dumps with exclude_none
    keep_null: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _keep_null(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if not isinstance(out, dict):
            return out
        gone = [n for n in self.keep_null if n not in out]
        if not gone:
            return out
        order = (*type(self).model_fields, *out)
        return {k: out.get(k) for k in order if k in out or k in gone}

    @model_validator(mode="before")
    @classmethod
    def _no_misnamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and cls.misnamed:
            found = {k: cls.misnamed[k] for k in data if k in cls.misnamed}
            if found:
                listed = ", ".join(f"'{w}' should be '{r}'" for w, r in found.items())
                raise PydanticCustomError(
                    "misnamed_field",
                    "misnamed field(s): {listed}",
                    {"listed": listed, "found": found},
                )
        return data


_EXPECTATION_MISNAMED = {"name": "text", "met": "passed", "details": "evidence"}


class GradedExpectation(_Out):
    misnamed = _EXPECTATION_MISNAMED
    text: str
    passed: bool
    evidence: str


class PassSummary(_Out):
    passed: int = Field(ge=0)
    failed: int = Field(ge=0)
    total: int = Field(ge=0)
    pass_rate: float = Field(ge=0, le=1)


class ExecutionMetrics(_Out):
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


class GradingTiming(_Out):
    executor_duration_seconds: float | None = None
    grader_duration_seconds: float | None = None
    total_duration_seconds: float


class Timing(_Out):
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


class Claim(_Out):
    claim: str
    type: str
    verified: bool
    evidence: str


class UserNotesSummary(_Out):
    uncertainties: list[str] = []
    needs_review: list[str] = []
    workarounds: list[str] = []


class EvalFeedbackSuggestion(_Out):
    assertion: str | None = None
    reason: str


class EvalFeedback(_Out):
    suggestions: list[EvalFeedbackSuggestion] = []
    overall: str = ""


class RubricScore(_Out):
    score: int = Field(ge=1, le=5)
    evidence: str


class RubricSummary(_Out):
    weighted_mean: float = Field(ge=0, le=5)
    max_possible: float = 5.0
    normalized: float = Field(ge=0, le=1)


class Grading(_Out):
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


class StructuralResult(_Out):
    misnamed = {**_EXPECTATION_MISNAMED, "description": "text"}
    id: str
    text: str
    type: StructuralType
    passed: bool
    evidence: str
    critical: bool = False


class Structural(_Out):
    """structural.json, seed 004 (layer 1)."""

    expectations: list[StructuralResult]
    summary: PassSummary
    gate_passed: bool


class EvalMetadata(_Out):
    """eval_metadata.json (seed 001 shows `assertions`; `expectations` strings are accepted too)."""

    eval_id: int
    eval_name: str
    prompt: str
    assertions: list[Assertion] | None = None
    expectations: list[str] | None = None


Configuration = Literal["with_skill", "without_skill"]


class BenchmarkMetadata(_Out):
    skill_name: str
    timestamp: str
    skill_path: str | None = None
    executor_model: str | None = None
    analyzer_model: str | None = None
    evals_run: list[int | str] = []
    runs_per_configuration: int | None = Field(default=None, ge=1)


class RunResult(_Out):
    pass_rate: float = Field(ge=0, le=1)
    passed: int = Field(ge=0)
    failed: int | None = Field(default=None, ge=0)
    total: int = Field(ge=0)
    time_seconds: float = Field(ge=0)
    tokens: int = Field(ge=0)
    tool_calls: int | None = Field(default=None, ge=0)
    errors: int = Field(ge=0)


class BenchmarkRun(_Out):
    # Seed 002: `config` or a top-level `pass_rate` makes the viewer show empty values.
    misnamed = {
        "config": "configuration",
        **{
            k: f"result.{k}"
            for k in ("pass_rate", "passed", "failed", "total", "time_seconds", "tokens")
        },
    }
    eval_id: int
    eval_name: str
    configuration: Configuration
    run_number: int = Field(ge=1)
    result: RunResult
    expectations: list[GradedExpectation] = []
    notes: list[str] = []


class Stat(_Out):
    mean: float
    stddev: float = Field(ge=0)
    min: float
    max: float


class ConfigSummary(_Out):
    misnamed = {"mean_pass_rate": "pass_rate.mean"}
    pass_rate: Stat
    time_seconds: Stat
    tokens: Stat
    rubric_normalized: Stat | None = None
    overall_efficiency: Stat | None = None
    consistency: float | None = Field(default=None, ge=0, le=1)
    rubric_dimensions: dict[str, Stat] | None = None


class RunSummary(_Out):
    misnamed = {"deltas": "delta"}
    with_skill: ConfigSummary
    # absent when baseline_comparison is off
    without_skill: ConfigSummary | None = None
    delta: dict[str, str] = {}


class Benchmark(_Out):
    """benchmark.json, seed 002 (+ seed 004 rubric stats in run_summary)."""

    misnamed = {"summaries": "run_summary", "deltas": "run_summary.delta"}
    metadata: BenchmarkMetadata
    runs: list[BenchmarkRun]
    run_summary: RunSummary
    notes: list[str] = []


class BenchmarkFragment(_Out):
    """Seed 004 shows only `run_summary`; kept so its example checks, never written."""

    run_summary: RunSummary


class RubricSide(_Out):
    content: dict[str, int]
    structure: dict[str, int]
    content_score: float
    structure_score: float
    overall_score: float


class OutputQuality(_Out):
    score: float
    strengths: list[str] = []
    weaknesses: list[str] = []


class ExpectationCheck(_Out):
    misnamed = {"name": "text", "met": "passed"}
    text: str
    passed: bool


class ExpectationResults(_Out):
    passed: int = Field(ge=0)
    total: int = Field(ge=0)
    pass_rate: float = Field(ge=0, le=1)
    details: list[ExpectationCheck] = []


class SidesRubric(_Out):
    A: RubricSide
    B: RubricSide


class SidesQuality(_Out):
    A: OutputQuality
    B: OutputQuality


class SidesExpectations(_Out):
    A: ExpectationResults
    B: ExpectationResults


class Comparison(_Out):
    """comparison-N.json, the rubric form of seed 002 (what the blind comparator writes)."""

    winner: Literal["A", "B", "TIE"]
    reasoning: str
    rubric: SidesRubric
    output_quality: SidesQuality
    expectation_results: SidesExpectations | None = None


class ComparisonSummary(_Out):
    winner: str
    winner_skill: str
    loser_skill: str
    comparator_reasoning: str


class FollowingSide(_Out):
    score: float
    issues: list[str] = []


class InstructionFollowing(_Out):
    winner: FollowingSide
    loser: FollowingSide


class ImprovementSuggestion(_Out):
    priority: Literal["high", "medium", "low"]
    category: str
    suggestion: str
    expected_impact: str


class TranscriptInsights(_Out):
    winner_execution_pattern: str
    loser_execution_pattern: str


class Analysis(_Out):
    """analysis.json, seed 002 (post-hoc analyzer)."""

    comparison_summary: ComparisonSummary
    winner_strengths: list[str] = []
    loser_weaknesses: list[str] = []
    instruction_following: InstructionFollowing | None = None
    improvement_suggestions: list[ImprovementSuggestion] = []
    transcript_insights: TranscriptInsights | None = None


class HistoryIteration(_Out):
    keep_null = ("parent",)
    misnamed = {"pass_rate": "expectation_pass_rate", "result": "grading_result"}
    version: str
    parent: str | None
    expectation_pass_rate: float = Field(ge=0, le=1)
    grading_result: Literal["baseline", "won", "lost", "tie"]
    is_current_best: bool


class History(_Out):
    """history.json in the `iterations` form of seed 002 (body runs)."""

    started_at: str
    skill_name: str
    current_best: str
    iterations: list[HistoryIteration]
    # Ours, beside the seed's: the version the user has (the last certified adoption's) and every
    # adoption with its claim; current_best stays the search's best, where a resume goes on.
    adopted: str = "v0"
    adoptions: list[Adoption] = []

    @model_validator(mode="after")
    def _best_agrees(self) -> History:
        flagged = [it.version for it in self.iterations if it.is_current_best]
        if self.iterations and flagged != [self.current_best]:
            raise ValueError(
                f"current_best is '{self.current_best}' but is_current_best marks {flagged}"
            )
        return self


class HistoryVersion(_Out):
    description: str
    pass_rate: float = Field(ge=0, le=1)
    precision: float | None = Field(default=None, ge=0, le=1)
    recall: float | None = Field(default=None, ge=0, le=1)
    iteration: int = Field(ge=0)


class HistoryVersions(_Out):
    """history.json in the `versions` form of seed 001 (description runs)."""

    versions: list[HistoryVersion]


class Review(_Out):
    run_id: str
    feedback: str
    timestamp: str


class Feedback(_Out):
    """feedback.json, seed 001: human reviews written by `optimizer review`."""

    reviews: list[Review]
    status: str


class ReportOutput(_Out):
    name: str
    size: int = Field(ge=0)
    kind: Literal["text", "image", "file"]


class ReportRun(_Out):
    """One run as a page of the HTML report shows it: its grading, outputs and transcript."""

    id: str
    path: str
    eval_id: str
    configuration: str
    run: str
    expectations: list[dict[str, Any]]
    outputs: list[ReportOutput]
    transcript: str
    judge_view: str


class ReportPage(_Out):
    """report_files/<key>.js beside report.html (the data it hands to the page): one version's
    change, numbers and runs, or the baseline's or the sealed test's runs."""

    runs: list[ReportRun]
    failing: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []


class AggregateSuggestion(_Out):
    keep_null = ("assertion",)
    frequency: int = Field(ge=1)
    # null (not absent) when the suggestion is about a missing assertion
    assertion: str | None
    reason: str
    action: str


class EvalFeedbackAggregate(_Out):
    """eval_feedback_aggregate.json, seed 004."""

    skill_name: str
    iteration: int = Field(ge=0)
    total_runs: int = Field(ge=0)
    suggestions: list[AggregateSuggestion] = []


# ---------------------------------------------------------------------------
# Compact forms of seed 001: read as input dialects, never written
# ---------------------------------------------------------------------------


class CompactMetrics(_Out):
    execution_time_ms: int | None = None
    tokens_used: int | None = None
    tool_calls: int | None = None


class CompactGrading(_Out):
    expectations: list[GradedExpectation]
    pass_rate: float = Field(ge=0, le=1)
    metrics: CompactMetrics | None = None
    claims: list[str] = []
    critique: str = ""


class CompactRun(_Out):
    eval_id: int
    config: Configuration
    pass_rate: float = Field(ge=0, le=1)


class CompactConfigSummary(_Out):
    mean_pass_rate: float = Field(ge=0, le=1)
    stddev: float = Field(ge=0)


class CompactSummaries(_Out):
    with_skill: CompactConfigSummary | None = None
    without_skill: CompactConfigSummary | None = None


class CompactBenchmark(_Out):
    metadata: dict[str, Any] = {}
    runs: list[CompactRun]
    summaries: CompactSummaries
    deltas: dict[str, float] = {}


class SimpleComparison(_Out):
    winner: Literal["output_a", "output_b", "tie"]
    reasoning: str
    scores: dict[str, float] = {}
    content_score: dict[str, float] = {}
    structure_score: dict[str, float] = {}


# ---------------------------------------------------------------------------
# Our own files: selection.json and trigger.json (not seed files). `extra="forbid"`: the model is
# the exact shape written, so a field added to a writer without its model fails before writing.
# ---------------------------------------------------------------------------


class _Exact(BaseModel):
    model_config = ConfigDict(extra="forbid")


Decided = Literal["won", "lost", "tie"]


class ScreenSelection(_Exact):
    """selection.json of a child stopped at screening (search/body.py)."""

    stage: Literal["screening"]
    decision: Decided
    reason: str
    parent: str


class SelectionInterval(_Exact):
    low: float | None
    high: float | None
    confidence: float

    @field_serializer("low", "high")
    def _rounded(self, value: float | None) -> float | None:
        return None if value is None else round(value, 6)


class SelectionComparator(_Exact):
    child_wins: int
    parent_wins: int
    ties: int
    inconsistent: int
    errors: int
    pairs: int
    swap_consistency: float | None
    single_order: int = 0  # first-order ties, not judged in the second order (compare.py)

    @field_serializer("swap_consistency")
    def _rounded(self, value: float | None) -> float | None:
        return None if value is None else round(value, 6)


class AddedRuns(_Exact):
    """Where one look's extra runs went (decide/allot.py)."""

    runs: int  # the look they led to
    to: list[int | str]  # evals that got a run, by id
    skipped_identical: list[int | str]  # every child run and every parent run scored the same
    skipped_low_variance: list[int | str]  # outside selection.runs_share of the most variable d


class NightControl(_Exact):
    """A night's promotions as a family (decide/fdr.py): LORD++ online false-discovery control."""

    method: Literal["lord"]
    fdr: float  # the bound on the expected share of false promotions among the night's
    decision_index: int  # 1-based: this decision's place in the run's decided children
    earlier_promotions: int  # won decisions before it, which earned it α


def _six(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


class RuleDecision(_Exact):
    """The promotion rule's decision and every number behind it: decide/step.decide returns it,
    state.db's decisions row and selection.json hold it as it is (BenchmarkSelection adds where
    it was made). One model, so the value, the row and the file cannot drift apart."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    decision: Decided
    reason: str
    delta: float | None
    interval: SelectionInterval
    min_effect: float
    evals: int
    runs_per_eval: int  # the fewest of any eval
    max_runs_per_eval: int = 0  # the most of any eval
    comparator: SelectionComparator
    swap_consistency: float | None
    judge_errors: int
    total_runs: int
    judge_error_rate: float
    unscored: int  # runs our infrastructure failed: left out, retried later (docs/design.md §7)
    excluded_evals: list[int | str]  # evals without scored runs on both sides
    needs_more_runs: bool
    rule: Literal["sequential", "bootstrap"]
    few_evals: bool  # fewer evals than selection.few_evals: too few to generalise
    futile: bool  # sequential: runs stopped because promotion had become unlikely
    look_alpha: float | None  # sequential: the false-promotion budget this look spent
    comparator_p: float | None  # sequential: the sign test's one-sided p for the child
    promotion_power: float | None  # sequential: conditional power when runs continued
    added_runs: list[AddedRuns] = []
    # The claim a promotion makes: "tasks" (better on these evals) or "general" (on evals like
    # these); files from before the claims were named were over evals, i.e. general.
    scope: Literal["tasks", "general"] = "general"
    next_runs: int | None = None  # the next look's runs per eval, when more were wanted
    alpha: float | None = None  # the decision's whole false-promotion budget (the night's share)

    @field_serializer(
        "delta",
        "swap_consistency",
        "judge_error_rate",
        "look_alpha",
        "comparator_p",
        "promotion_power",
        "alpha",
    )
    def _rounded(self, value: float | None) -> float | None:
        return _six(value)

    # The names the rule's callers and benches read.
    @property
    def ci_low(self) -> float | None:
        return self.interval.low

    @property
    def ci_high(self) -> float | None:
        return self.interval.high

    @property
    def confidence(self) -> float:
        return self.interval.confidence

    @property
    def runs(self) -> int:
        return self.runs_per_eval

    @property
    def max_runs(self) -> int:
        return self.max_runs_per_eval


AdoptionStatus = Literal["running", "certified", "not certified"]


class Adoption(_Exact):
    """One adoption (docs/design.md §16): `version` claimed better than `base`, the version the user
    had, on fresh runs of both, with its scope. state.db's adoptions row and history.json's
    `adoptions` hold it as it is; only a certified adoption changes the adopted version."""

    number: int = Field(ge=1)
    version: str
    base: str
    scope: Literal["tasks", "general"]
    status: AdoptionStatus
    evals: list[int]
    estimate_usd: float | None = None  # the most it could cost, shown before it was paid
    cost_usd: float = 0.0  # what its fresh runs cost (the ledger's scope "adoption N")
    decision: RuleDecision | None = None  # the rule's last look; None while the first runs
    next_step: str = ""  # not certified: what would decide it
    started_at: str
    finished_at: str | None = None

    @field_serializer("cost_usd", "estimate_usd")
    def _rounded(self, value: float | None) -> float | None:
        return _six(value)

    @property
    def certified(self) -> bool:
        return self.status == "certified"

    @property
    def claim(self) -> str:
        """The claim in words, as every view states it."""
        where = "on these tasks" if self.scope == "tasks" else "in general"
        return f"{self.version} better than {self.base} {where}"


class BenchmarkSelection(RuleDecision):
    """selection.json of a body child decided by the promotion rule: the decision, and where."""

    stage: Literal["benchmark"]
    parent: str
    night: NightControl | None = None  # the night's false-discovery control when it applied


class TriggerSide(_Exact):
    pass_rate: float | None
    precision: float | None
    recall: float | None
    f1: float | None
    constant_signal: Literal["never", "always", False]


class DevPassRate(_Exact):
    child: float | None
    parent: float | None


class ProbeSelection(_Exact):
    """selection.json of a description child (search/description.py decide): the validation
    queries' Δ, and both sides' trigger metrics."""

    stage: Literal["probe"]
    decision: Decided
    reason: str
    parent: str
    delta: float | None
    interval: SelectionInterval | None
    queries: int
    split: Literal["validation"]
    child_metrics: TriggerSide
    parent_metrics: TriggerSide
    dev_pass_rate: DevPassRate
    min_effect: float
    # The body's rule with the queries as the units (issue 27); absent in files made before it.
    rule: Literal["sequential", "bootstrap"] | None = None
    scope: Literal["tasks", "general"] | None = None
    alpha: float | None = None
    comparator_p: float | None = None
    night: NightControl | None = None


class TargetSelection(BaseModel):
    """selection.json of a stage this file does not know: a target added in its own module
    (search/targets.py) decides in its own terms; the engine needs only these fields."""

    model_config = ConfigDict(extra="allow")
    stage: str
    decision: Decided
    reason: str
    parent: str


KNOWN_STAGES = ("screening", "benchmark", "probe")


def _selection_shape(value: Any) -> str:
    stage = value.get("stage") if isinstance(value, dict) else getattr(value, "stage", None)
    return stage if stage in KNOWN_STAGES else "target"


class SelectionFile(
    RootModel[
        Annotated[
            Annotated[ScreenSelection, Tag("screening")]
            | Annotated[BenchmarkSelection, Tag("benchmark")]
            | Annotated[ProbeSelection, Tag("probe")]
            | Annotated[TargetSelection, Tag("target")],
            Discriminator(_selection_shape),
        ]
    ]
):
    """selection.json, one exact shape per stage the product knows, and the engine's fields for
    a target's own stage."""


class QueryOutcome(_Exact):
    rate: float
    runs: int
    passed: bool
    should_trigger: bool


class TriggerMetrics(_Exact):
    """probe.metrics of one split."""

    pass_rate: float | None
    precision: float | None
    recall: float | None
    f1: float | None
    ci: dict[str, list[float | None] | None]
    queries: int
    missing_queries: int
    probe_errors: int
    constant_signal: Literal["never", "always", False]
    per_query: dict[str, QueryOutcome]


class TriggerFile(_Exact):
    """trigger.json of a description version (search/description.py)."""

    version: str
    probe: str
    train: TriggerMetrics
    validation: TriggerMetrics


# ---------------------------------------------------------------------------
# evals/candidates.json (ours): evals drafted from the user's sessions or a run's findings, waiting
# for the user's review; only an accepted candidate ever reaches evals.json.
# ---------------------------------------------------------------------------

CandidateKind = Literal["new_eval", "sharpen", "add_check", "drop"]
CandidateStatus = Literal["pending", "accepted", "rejected"]


class CandidateOrigin(_Exact):
    """Where a candidate came from: a session file and its time, or a run folder."""

    source: Literal["session", "run"]
    file: str
    time: str = ""
    session_id: str = ""


class CandidateSignals(_Exact):
    """What the session said about the outcome: the user's later messages and the tool errors."""

    corrections: list[str] = []
    follow_ups: list[str] = []
    errors: list[str] = []
    outputs: list[str] = []
    final_answer: str = ""


class CandidateEval(_Exact):
    """The eval a candidate would add (or the sharper expectation it would put in place)."""

    name: str = ""
    prompt: str = ""
    expected_output: str = ""
    files: list[str] = []
    expectations: list[str] = []


class Candidate(_Exact):
    id: str = Field(min_length=1)
    kind: CandidateKind
    status: CandidateStatus = "pending"
    origin: CandidateOrigin
    eval: CandidateEval
    signals: CandidateSignals = CandidateSignals()
    # Files the task used but that were not copied into evals/files/ (too large, outside the
    # project, gone): named so the user can add them by hand.
    files_named: list[str] = []
    # sharpen / add_check / drop: the eval (and for sharpen the expectation text) it is about.
    target_eval_id: int | None = None
    replaces: str | None = None
    reason: str = ""
    drafted_by: str = "heuristics"
    # Set on acceptance: the id it got in evals.json and the split its hash placed it in.
    eval_id: int | None = None
    split: Literal["train", "test"] | None = None
    decided_at: str | None = None


class CandidatesFile(_Exact):
    skill_name: str
    candidates: list[Candidate] = []


class SummaryNumbers(_Exact):
    """One comparison of the final best with v0: scores, their difference and its interval."""

    v0: float | None = None
    best: float | None = None
    delta: float | None = None
    low: float | None = (
        None  # the interval of delta over evals (Student-t), None when it cannot be made
    )
    high: float | None = None
    confidence: float
    # The level as the views name it: "95%", or "99.8%, the decision's" when the Δ is the
    # decision's own (one Δ, one interval per level).
    level: str | None = None
    evals: int


class NextStep(_Exact):
    """One thing to do after a run, as the summary and the report name it: why, and the command."""

    why: str
    command: str


class MorningSummary(_Exact):
    """summary.json beside summary.md (report/summary.py): what a night did, for a person and for
    the --notify command. `scope` is the claim's reach: "better on these tasks" or "general"."""

    run_dir: str
    skill_name: str | None = None
    simulated: bool
    status: str | None = None
    stop_reason: str | None = None
    last_error: str | None = None
    night_error: str | None = None  # the one sentence of a night that could not run
    adopted: str = "v0"  # the version the user has: the last certified adoption's
    started_at: str | None = None
    finished_at: str | None = None
    from_run: str | None = None
    best: str
    won: bool
    headline: str
    scope: str | None = None
    train: SummaryNumbers | None = None
    sealed: SummaryNumbers | None = None
    decision: str | None = (
        None  # the best's own decision against its parent, as selection.json says
    )
    diff: str | None = None
    spent_usd: float
    budget_usd: float | None = None
    # spent_usd in words when the run adopted: each adoption apart with the estimate it showed
    spent: str | None = None
    calls: int
    look_at: list[str]
    # what to do next, first the likeliest (report/nextstep.py): export the best, finish the
    # sealed test, or go on with more iterations or budget
    next: list[NextStep] = []


# History names Adoption, defined beside the rule decision it holds.
History.model_rebuild()
