"""selection.json (ours, not a seed file): the promotion rule's decision of each stage and every
number behind it, and an adoption's. `extra="forbid"`: the model is the exact shape written, so a
field added to a writer without its model fails before writing."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, RootModel, Tag, field_serializer

from optimizer.schemas.common import ExactModel

Decided = Literal["won", "lost", "tie"]


class ScreenSelection(ExactModel):
    """selection.json of a child stopped at screening (search/body.py)."""

    stage: Literal["screening"]
    decision: Decided
    reason: str
    parent: str


class SelectionInterval(ExactModel):
    low: float | None
    high: float | None
    confidence: float

    @field_serializer("low", "high")
    def _rounded(self, value: float | None) -> float | None:
        return None if value is None else round(value, 6)


class SelectionComparator(ExactModel):
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


class AddedRuns(ExactModel):
    """Where one look's extra runs went (decide/allot.py)."""

    runs: int  # the look they led to
    to: list[int | str]  # evals that got a run, by id
    skipped_identical: list[int | str]  # every child run and every parent run scored the same
    skipped_low_variance: list[int | str]  # outside selection.runs_share of the most variable d


class NightControl(ExactModel):
    """A night's promotions as a family (decide/fdr.py): LORD++ online false-discovery control."""

    method: Literal["lord"]
    fdr: float  # the bound on the expected share of false promotions among the night's
    decision_index: int  # 1-based: this decision's place in the run's decided children
    earlier_promotions: int  # won decisions before it, which earned it α


def _six(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


class RuleDecision(ExactModel):
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


class Adoption(ExactModel):
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


class TriggerSide(ExactModel):
    pass_rate: float | None
    precision: float | None
    recall: float | None
    f1: float | None
    constant_signal: Literal["never", "always", False]


class DevPassRate(ExactModel):
    child: float | None
    parent: float | None


class ProbeSelection(ExactModel):
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
