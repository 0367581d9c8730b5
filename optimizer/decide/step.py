"""The promotion rule (docs/design.md §8), the cheap screen, parent selection and minibatch choice.
Pure functions of their inputs and a seeded random.Random: never read files, clocks or globals."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, TypeVar

from optimizer.config import Selection
from optimizer.decide import power, sequential, verdict
from optimizer.decide.parents import VersionScores as VersionScores
from optimizer.decide.parents import pareto_front as pareto_front
from optimizer.decide.parents import select_parent as select_parent
from optimizer.decide.stats import mean, paired_bootstrap
from optimizer.schemas import RuleDecision, SelectionComparator, SelectionInterval
from optimizer.words import ci

EvalId = int | str
# One kind of id per call: the body target's evals are ints, a caller may key by names.
E = TypeVar("E", bound=EvalId)
Verdict = Literal["won", "lost", "tie"]
# Fewer decisive swap-consistent verdicts than this never decide anything: two lucky pairs
# would otherwise settle an inconclusive interval (see bench/selection.py for the rates).
MIN_CONSISTENT_VERDICTS = 3
_EPS = 1e-12


@dataclass
class ComparisonTally:
    """What the blind comparator found over all run pairs (compare.py fills it)."""

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


# The rule's decision is the file's model: the value decide() returns is what selection.json holds.
Decision = RuleDecision


class _Common(TypedDict):
    """The fields of a Decision that every outcome of decide() shares."""

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


def _decision(
    verdict: Verdict,
    reason: str,
    delta: float | None,
    low: float | None,
    high: float | None,
    confidence: float,
    common: _Common,
    **more: Any,
) -> Decision:
    return Decision(
        decision=verdict,
        reason=reason,
        delta=delta,
        interval=SelectionInterval(low=low, high=high, confidence=confidence),
        needs_more_runs=more.pop("needs_more_runs", False),
        futile=more.pop("futile", False),
        look_alpha=more.pop("look_alpha", None),
        comparator_p=more.pop("comparator_p", None),
        promotion_power=more.pop("promotion_power", None),
        **common,
        **more,
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


def _comparator_view(tally: ComparisonTally | None) -> SelectionComparator:
    return SelectionComparator(**{k: getattr(tally or ComparisonTally(), k) for k in TALLY_COUNTS})


def _majority(tally: ComparisonTally | None, majority: float) -> tuple[str | None, str]:
    """Which side the swap-consistent verdicts favour by the configured majority, and the words."""
    if tally is None:
        return None, "there are no comparator verdicts"
    decisive = tally.child_wins + tally.parent_wins
    counts = (
        f"{tally.child_wins} for the child, {tally.parent_wins} for the parent and {tally.ties} "
        f"ties agreed in both orders; {tally.inconsistent} pairs did not"
        + (
            f"; {tally.single_order} first-order ties were not judged again"
            if tally.single_order
            else ""
        )
    )
    if decisive < MIN_CONSISTENT_VERDICTS:
        return None, f"there are too few decisive comparator verdicts ({counts})"
    for side, wins in (("child", tally.child_wins), ("parent", tally.parent_wins)):
        if wins / decisive >= majority - _EPS:
            return side, (
                f"the comparator favoured the {side} in {wins} of {decisive} decisive "
                f"swap-consistent verdicts ({wins / decisive:.0%} ≥ {majority:.0%})"
            )
    return None, f"the comparator has no {majority:.0%} majority ({counts})"


def decide(
    child_scores: Mapping[E, list[float]],
    parent_scores: Mapping[E, list[float]],
    tally: ComparisonTally | None,
    *,
    selection: Selection,
    rng: random.Random,
    judge_errors: int = 0,
    total_runs: int = 0,
    unscored: int = 0,
    first_runs: int = 1,
    look: int | None = None,
    scope: str | None = None,
    alpha: float | None = None,
    certifies: bool = False,
) -> Decision:
    """won / lost / tie by docs/design.md §8, under selection.rule: `sequential` (sequential.look, the
    default) or `bootstrap`, the earlier rule kept selectable: a fixed-level percentile bootstrap
    whose interval is "inconclusive" when neither above min_effect nor below zero; only then may
    the comparator decide by its majority, and only then are runs added; there the comparator may
    promote when Δ ≥ 0 and demote only when the interval is not above zero (under `sequential` it
    only agrees with a bound above zero). `look` numbers
    the look (the loop's runs per eval) when evals have run different counts; default the fewest.
    `scope` ("tasks", "general"; default selection.scope, whose "auto" is tasks below
    selection.few_evals evals) is the claim a promotion makes; `alpha` (default 1 − confidence)
    the decision's false-promotion budget, smaller under the night's control (decide/fdr.py).
    `certifies`: the decision certifies an adoption (decide/adopt.py); a step's reason never reads as
    a claim."""
    ds = paired_differences(child_scores, parent_scores)
    comparator = _comparator_view(tally)
    error_rate = judge_errors / total_runs if total_runs else 0.0
    sizes = [min(len(child_scores[e]), len(parent_scores[e])) for e in ds]
    runs = min(sizes, default=0)
    look = runs if look is None else look
    excluded = tuple(sorted((e for e in {*child_scores, *parent_scores} if e not in ds), key=str))
    common = _Common(
        evals=len(ds),
        runs_per_eval=runs,
        max_runs_per_eval=max(sizes, default=0),
        comparator=comparator,
        swap_consistency=comparator.swap_consistency,
        judge_error_rate=error_rate,
        judge_errors=judge_errors,
        total_runs=total_runs,
        min_effect=selection.min_effect,
        unscored=unscored,
        excluded_evals=list(excluded),
        rule=selection.rule,
        few_evals=0 < len(ds) < selection.few_evals,
    )
    left_out = (
        _counted(unscored, judge_errors, total_runs)
        if certifies
        else _left_out(unscored, total_runs, excluded)
    )
    if common["few_evals"]:
        left_out += (
            f" It rests on {len(ds)} eval{'s' if len(ds) > 1 else ''}, fewer than "
            f"{selection.few_evals}: too few to generalise beyond these tasks."
        )
    if error_rate > selection.max_judge_error_rate + _EPS:
        # A broken judge is not fixed by more runs of the same judge.
        return _decision(
            "tie",
            f"tie: {judge_errors} of {total_runs} runs ({error_rate:.0%}) had judge errors, above "
            f"the limit of {selection.max_judge_error_rate:.0%}, so the scores cannot be trusted.",
            None,
            None,
            None,
            selection.confidence,
            common,
        )
    if not ds:
        return _decision(
            "tie",
            "tie: no eval has scores for both the child and the parent." + left_out,
            None,
            None,
            None,
            selection.confidence,
            common,
        )
    if selection.rule == "sequential":
        tally = tally or ComparisonTally()
        order = sorted(ds, key=_order)  # a stated order: sums do not depend on the caller's
        claim = claim_scope(selection, len(ds), scope)
        futility = "futility_tasks" if claim == "tasks" else "futility"  # each claim its own
        seen = sequential.look(
            [child_scores[e] for e in order],
            [parent_scores[e] for e in order],
            tally.child_wins,
            tally.parent_wins,
            {e: tally.per_eval[e] for e in tally.per_eval if e in ds},
            runs=look,
            max_runs=selection.max_runs_per_eval,
            first_runs=first_runs,
            confidence=selection.confidence,
            min_effect=selection.min_effect,
            futility=getattr(selection, futility),
            min_verdicts=MIN_CONSISTENT_VERDICTS,
            scope=claim,
            alpha=alpha,
            futility_name=f"selection.{futility}",
            claim=certifies,
        )
        return _decision(  # the interval's confidence is the look's, at the α it spent
            seen.decision,
            seen.reason + left_out,
            seen.delta,
            seen.low,
            seen.high,
            seen.confidence,
            common,
            needs_more_runs=seen.needs_more_runs,
            futile=seen.futile,
            look_alpha=seen.look_alpha,
            comparator_p=seen.comparator_p,
            promotion_power=seen.promotion_power,
            scope=seen.scope,
            next_runs=seen.next_runs,
            alpha=1 - selection.confidence if alpha is None else alpha,
        )
    delta, low, high = paired_bootstrap(
        list(ds.values()),
        confidence=selection.confidence,
        samples=selection.bootstrap_samples,
        rng=rng,
    )
    where = (
        f"Δ = {delta:+.3f}, {ci(selection.confidence)} [{low:+.3f}, {high:+.3f}] over "
        f"{len(ds)} evals × {runs} runs"
    )
    inconclusive = low <= selection.min_effect + _EPS and high >= -_EPS
    needs_more = inconclusive and look < selection.max_runs_per_eval
    side, words = _majority(tally, selection.comparator_majority)

    def made(decision: Verdict, reason: str) -> Decision:
        return _decision(
            decision,
            reason + left_out,
            delta,
            low,
            high,
            selection.confidence,
            common,
            needs_more_runs=needs_more,
        )

    if low > selection.min_effect + _EPS:
        return made("won", f"won: {where} lies above the minimum effect {selection.min_effect}.")
    if verdict.side(low, high + _EPS) == "below":
        return made("lost", f"lost: {where} lies below zero.")
    if side == "child" and delta >= -_EPS:
        return made("won", f"won: {where} is inconclusive, and {words}.")
    if side == "parent" and low <= _EPS:
        return made("lost", f"lost: {where} straddles zero, and {words}.")
    more = (
        f"; more runs are needed ({look} of at most {selection.max_runs_per_eval} per eval)"
        if needs_more
        else ""
    )
    if side == "child":
        words = f"{words}, but Δ is negative"
    elif side == "parent":
        words = f"{words}, but the interval is above zero"
    return made("tie", f"tie: {where} is inconclusive, and {words}{more}.")


# A cheap step (selection.step = "cheap"): what the peers bench measured to buy the most sealed
# gain per dollar; the claim is the adoption's, which never reads a step's evidence.
CHEAP = {
    "first_runs": 1,
    "max_runs_per_eval": 1,
    "confidence": 0.6,
    "min_effect": 0.0,
    "night": "none",
    "compare_pairs": "none",
}


# v0's runs an eval on train under cheap steps, unless selection.v0_runs says otherwise: v0 is
# every first child's parent, and its runs are paid before any proposal. In bench/peers.py (40
# worlds a budget) one run instead of evals.runs_per_eval's 3 bought 1.27-1.35x SkillOpt's gain
# per dollar against 0.99-1.07x (docs/peers.md).
CHEAP_V0_RUNS = 1


def for_steps(selection: Selection) -> Selection:
    """The settings a step is decided under: selection.step's preset over the section (v0's runs
    are the preset's only where selection.v0_runs is left at 0)."""
    if selection.step == "guarded":
        return selection
    return selection.model_copy(update={**CHEAP, "v0_runs": selection.v0_runs or CHEAP_V0_RUNS})


def claim_scope(selection: Selection, n_evals: int, asked: str | None = None) -> sequential.Scope:
    """The claim a promotion makes: the one asked, else selection.scope (decide/power.claim, the
    one rule the power advice uses too)."""
    return power.claim(n_evals, asked or selection.scope, selection.few_evals)


def compared_runs(selection: Selection, runs: int) -> int:
    """Run pairs per eval the blind comparator judges at a look of `runs` runs per eval (pairs
    1..this). Under the sequential rule its verdicts rarely decide: under `tasks` they only break
    a near-tie, and under `general` its test over the evals promoted 0-0.8% of +0.10 children in
    bench/selection.py, with the same power and false-promotion rates at 10-50 evals whether it
    saw every pair or the first of each eval. So the first pair serves the rule, the analyzer and
    the record; every pair was 40-57% of a child's cost in bench/peers.py. The bootstrap rule
    counts a majority: every pair there; "none" judges no pair (0)."""
    if selection.compare_pairs == "none" and selection.rule == "sequential":
        return 0
    if selection.compare_pairs == "all" or selection.rule != "sequential":
        return runs
    return min(runs, 1)


def _order(e: EvalId) -> tuple[int, int, str]:
    return (0, e, "") if isinstance(e, int) else (1, 0, str(e))


def _counted(unscored: int, judge_errors: int, total: int) -> str:
    """A claim's sentence for the runs it could not score: they count against their side
    (grade/unit.claim_means), never left out (../shared/DESIGN.md §24)."""
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
