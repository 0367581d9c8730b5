"""What a step is decided on and what every step rule shares: both sides' scores, the blind
comparator's tally and the runs left unscored (Measured), how the decision is asked (Asked), the
protocol each rule implements (StepRule, step.py holds the rules), and the fields and sentences of a
decision that do not depend on the rule. Pure functions of their inputs."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypedDict, TypeVar

from optimizer.config import Selection
from optimizer.decide.stats import mean, t_cdf
from optimizer.decide.verdict import Verdict
from optimizer.schemas import RuleDecision, SelectionComparator, SelectionInterval

EvalId = int | str
# One kind of id per call: the body target's evals are ints, a caller may key by names.
E = TypeVar("E", bound=EvalId)
_EPS = 1e-12
# Fewer decisive swap-consistent verdicts than this never decide anything: two lucky pairs
# would otherwise settle an inconclusive interval (see bench/selection.py for the rates).
MIN_CONSISTENT_VERDICTS = 3


@dataclass
class ComparisonTally:
    """What the blind comparator found over all run pairs (grade/compare.py fills it)."""

    child_wins: int = 0
    parent_wins: int = 0
    ties: int = 0
    inconsistent: int = 0
    errors: int = 0
    pairs: int = 0
    # agreeing pairs / pairs judged in both orders; None when none were
    swap_consistency: float | None = None
    single_order: int = 0  # pairs whose first order was a tie, so not judged in the second
    per_eval: dict[EvalId, dict[str, int]] = field(default_factory=dict)
    # unblinded reasonings of consistent pairs, for the analyzer: {eval_id, verdict, reasoning}
    reasons: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Measured(Generic[E]):
    """Both sides' scores per eval, the comparator's tally (None: no comparator) and the runs that
    could not be scored: judge errors and failures of our infrastructure, of total_runs."""

    child: Mapping[E, list[float]]
    parent: Mapping[E, list[float]]
    tally: ComparisonTally | None = None
    judge_errors: int = 0
    total_runs: int = 0
    unscored: int = 0


@dataclass(frozen=True)
class Asked:
    """How a decision is asked. `look` numbers the look (the loop's runs per eval) when evals have
    run different counts; None: the fewest. `scope` ("tasks", "general"; None: selection.scope) is
    the claim a promotion makes; `alpha` (None: 1 − confidence) the decision's false-promotion
    budget, smaller under the night's control (decide/fdr.py). `certifies`: the decision certifies
    an adoption (decide/adopt.py); a step's reason never reads as a claim."""

    first_runs: int = 1
    look: int | None = None
    scope: str | None = None
    alpha: float | None = None
    certifies: bool = False


@dataclass(frozen=True)
class ComparatorTest:
    wins: int
    losses: int
    z: float  # the t statistic for the child: > 0 when it wins more; 0 when too few verdicts
    p_child: float  # one-sided p for the child, recorded as the decision's comparator_p
    df: int = 0


def comparator_test(
    wins: int, losses: int, per_eval: Mapping[EvalId, Mapping[str, int]], min_verdicts: int
) -> ComparatorTest:
    """A sign test over evals: per eval the margin m = (w − l)/(w + l) of its decisive
    swap-consistent verdicts, their mean tested by Student-t with (evals with verdicts − 1) df.
    Evals are the units because verdicts of one eval share its difficulty and the comparator's
    taste for it; the variance is never below the binomial one (1/(w + l) per eval), so margins
    that happen to agree cannot make it collapse. Fewer than two such evals never decide."""
    if wins + losses < min_verdicts:
        return ComparatorTest(wins, losses, 0.0, 1.0)
    margins, floor = [], 0.0
    for counts in per_eval.values():
        w, lost = counts.get("child_wins", 0), counts.get("parent_wins", 0)
        if w + lost:
            margins.append((w - lost) / (w + lost))
            floor += 1 / (w + lost)
    k = len(margins)
    if k < 2:
        return ComparatorTest(wins, losses, 0.0, 1.0)
    m = mean(margins)
    spread = math.fsum((x - m) ** 2 for x in margins) / (k - 1)
    se = math.sqrt(max(spread / k, floor / k**2))
    z = m / se
    return ComparatorTest(wins, losses, z, 1 - t_cdf(z, k - 1), k - 1)


class StepRule(Protocol):
    """A promotion rule (selection.rule names one): won, lost or tie for a child over its parent,
    a pure function of what was measured, how it is asked and a seeded random.Random."""

    def decide(self, measured: Measured[E], asked: Asked, rng: random.Random) -> RuleDecision: ...


class _Common(TypedDict):
    """The fields of a RuleDecision that every outcome of decide() shares."""

    evals: int
    runs_per_eval: int
    max_runs_per_eval: int
    comparator: SelectionComparator
    swap_consistency: float | None
    judge_error_rate: float
    judge_errors: int
    total_runs: int
    min_effect: float
    unscored: int
    excluded_evals: list[EvalId]
    rule: Literal["sequential", "bootstrap"]
    few_evals: bool


@dataclass(frozen=True)
class Facts(Generic[E]):
    """What every rule reads off the evidence before it decides anything."""

    ds: dict[E, float]  # d per eval, over evals both sides scored
    runs: int  # the fewest runs per eval on both sides
    look: int
    common: _Common
    left_out: str  # the sentence naming what the decision could not see, or ""
    error_rate: float


def facts(measured: Measured[E], asked: Asked, selection: Selection) -> Facts[E]:
    child, parent = measured.child, measured.parent
    ds = paired_differences(child, parent)
    comparator = comparator_view(measured.tally)
    total, errors = measured.total_runs, measured.judge_errors
    error_rate = errors / total if total else 0.0
    sizes = [min(len(child[e]), len(parent[e])) for e in ds]
    runs = min(sizes, default=0)
    excluded = tuple(sorted((e for e in {*child, *parent} if e not in ds), key=str))
    common = _Common(
        evals=len(ds),
        runs_per_eval=runs,
        max_runs_per_eval=max(sizes, default=0),
        comparator=comparator,
        swap_consistency=comparator.swap_consistency,
        judge_error_rate=error_rate,
        judge_errors=errors,
        total_runs=total,
        min_effect=selection.min_effect,
        unscored=measured.unscored,
        excluded_evals=list(excluded),
        rule=selection.rule,
        few_evals=0 < len(ds) < selection.few_evals,
    )
    left_out = (
        _counted(measured.unscored, errors, total)
        if asked.certifies
        else _left_out(measured.unscored, total, excluded)
    )
    if common["few_evals"]:
        left_out += (
            f" It rests on {len(ds)} eval{'s' if len(ds) > 1 else ''}, fewer than "
            f"{selection.few_evals}: too few to generalise beyond these tasks."
        )
    look = runs if asked.look is None else asked.look
    return Facts(ds, runs, look, common, left_out, error_rate)


def unfit(f: Facts[E], measured: Measured[E], selection: Selection) -> RuleDecision | None:
    """The tie every rule returns before it looks at scores it cannot trust or does not have."""
    if f.error_rate > selection.max_judge_error_rate + _EPS:
        # A broken judge is not fixed by more runs of the same judge.
        said = (
            f"tie: {measured.judge_errors} of {measured.total_runs} runs ({f.error_rate:.0%}) had "
            f"judge errors, above the limit of {selection.max_judge_error_rate:.0%}, so the "
            "scores cannot be trusted."
        )
        return decision(Said("tie", said, None, None, None, selection.confidence), f.common)
    if not f.ds:
        said = "tie: no eval has scores for both the child and the parent." + f.left_out
        return decision(Said("tie", said, None, None, None, selection.confidence), f.common)
    return None


@dataclass(frozen=True)
class Said:
    """What a rule says of a child before the fields every decision shares (_Common): the
    verdict, its reason, Δ and its interval at `confidence`, and the look's own figures (the
    sequential rule's; left at their defaults by the others)."""

    verdict: Verdict
    reason: str
    delta: float | None
    low: float | None
    high: float | None
    confidence: float
    needs_more_runs: bool = False
    futile: bool = False
    look_alpha: float | None = None
    comparator_p: float | None = None
    promotion_power: float | None = None
    scope: Literal["tasks", "general"] = "general"
    next_runs: int | None = None  # the runs per eval of the next look, when runs are wanted
    alpha: float | None = None  # the decision's whole false-promotion budget


def decision(said: Said, common: _Common) -> RuleDecision:
    """The RuleDecision of what a rule said, with the fields every outcome shares."""
    return RuleDecision(
        decision=said.verdict,
        reason=said.reason,
        delta=said.delta,
        interval=SelectionInterval(low=said.low, high=said.high, confidence=said.confidence),
        needs_more_runs=said.needs_more_runs,
        futile=said.futile,
        look_alpha=said.look_alpha,
        comparator_p=said.comparator_p,
        promotion_power=said.promotion_power,
        scope=said.scope,
        next_runs=said.next_runs,
        alpha=said.alpha,
        **common,
    )


def paired_differences(
    child: Mapping[E, list[float]], parent: Mapping[E, list[float]]
) -> dict[E, float]:
    """d per eval = mean child score − mean parent score, over evals where both have scores."""
    return {
        e: mean(child[e]) - mean(parent[e]) for e in child if e in parent and child[e] and parent[e]
    }


TALLY_COUNTS = (
    "child_wins",
    "parent_wins",
    "ties",
    "inconsistent",
    "errors",
    "pairs",
    "swap_consistency",
    "single_order",
)


def comparator_view(tally: ComparisonTally | None) -> SelectionComparator:
    return SelectionComparator(**{k: getattr(tally or ComparisonTally(), k) for k in TALLY_COUNTS})


def eval_order(e: EvalId) -> tuple[int, int, str]:
    return (0, e, "") if isinstance(e, int) else (1, 0, str(e))


def _counted(unscored: int, judge_errors: int, total: int) -> str:
    """A claim's sentence for the runs it could not score: they count against their side
    (grade/unit.claim_means), never left out (docs/design.md §7)."""
    if not unscored and not judge_errors:
        return ""
    return (
        f" {unscored + judge_errors} of {total} runs could not be scored after their retries "
        f"({judge_errors} judge errors, {unscored} failures of our infrastructure); each counts "
        "against its side: a failure (0) for the version claimed better, a pass (1) for the "
        "version it is claimed against."
    )


def _left_out(unscored: int, total: int, excluded: tuple[EvalId, ...]) -> str:
    """The sentence that says what the decision could not see, when anything was left out."""
    if not unscored and not excluded:
        return ""
    parts = []
    if unscored:
        parts.append(
            f"{unscored} of {total} runs could not be scored (a failure of our "
            "infrastructure, retried on a later pass or a resume) and are left out"
        )
    if excluded:
        which = ", ".join(str(e) for e in excluded)
        parts.append(
            f"eval{'s' if len(excluded) > 1 else ''} {which} had no scored runs on both "
            "sides and did not count"
        )
    return " " + "; ".join(parts).capitalize() + "."
