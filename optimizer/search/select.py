"""The promotion rule (DESIGN §8), the cheap screen, parent selection and minibatch choice.
Pure functions of their inputs and a seeded random.Random: never read files, clocks or globals."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict, TypeVar

from optimizer.config import Selection
from optimizer.grade.stats import mean, paired_bootstrap
from optimizer.inputs import power
from optimizer.search import sequential
from optimizer.search.parents import VersionScores as VersionScores
from optimizer.search.parents import pareto_front as pareto_front
from optimizer.search.parents import select_parent as select_parent

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


@dataclass(frozen=True)
class Decision:
    decision: Verdict
    reason: str
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    evals: int
    runs: int  # runs per eval behind the interval (the fewest of any paired eval)
    comparator: dict[str, Any]
    judge_error_rate: float
    needs_more_runs: bool
    judge_errors: int = 0
    total_runs: int = 0
    confidence: float = 0.95
    min_effect: float = 0.0
    unscored: int = 0  # runs our infrastructure failed: left out, retried later (DESIGN §7)
    excluded_evals: tuple[EvalId, ...] = ()  # evals without scored runs on both sides
    rule: str = "bootstrap"
    few_evals: bool = False  # fewer evals than selection.few_evals: too few to generalise
    futile: bool = False  # sequential: runs stopped because promotion had become unlikely
    look_alpha: float | None = None  # sequential: the false-promotion budget this look spent
    comparator_p: float | None = None  # sequential: the sign test's one-sided p for the child
    promotion_power: float | None = None  # sequential: conditional power when runs continued
    max_runs: int = 0  # the most runs of any paired eval (extra runs go where they inform)
    added_runs: tuple[dict[str, Any], ...] = ()  # where each look's extra runs went (allot.py)
    # what a promotion claims: "tasks" (better on these evals; runs are the units) or "general"
    # (better on evals like these; evals are the units). The bootstrap rule's unit is the eval.
    scope: str = "general"
    next_runs: int | None = None  # sequential: runs per eval of the next look, when wanted
    alpha: float | None = None  # sequential: this decision's whole false-promotion budget


class _Common(TypedDict):
    """The fields of a Decision that every outcome of decide() shares."""

    evals: int
    runs: int
    max_runs: int
    comparator: dict[str, Any]
    judge_error_rate: float
    judge_errors: int
    total_runs: int
    confidence: float
    min_effect: float
    unscored: int
    excluded_evals: tuple[EvalId, ...]
    rule: str
    few_evals: bool


def paired_differences(
    child: Mapping[E, list[float]], parent: Mapping[E, list[float]]
) -> dict[E, float]:
    """d per eval = mean child score − mean parent score, over evals where both have scores."""
    return {
        e: mean(child[e]) - mean(parent[e])
        for e in child
        if e in parent and child[e] and parent[e]
    }


TALLY_COUNTS = ("child_wins", "parent_wins", "ties", "inconsistent", "errors", "pairs",
                "swap_consistency", "single_order")


def _comparator_view(tally: ComparisonTally | None) -> dict[str, Any]:
    return {k: getattr(tally or ComparisonTally(), k) for k in TALLY_COUNTS}


def _majority(tally: ComparisonTally | None, majority: float) -> tuple[str | None, str]:
    """Which side the swap-consistent verdicts favour by the configured majority, and the words."""
    if tally is None:
        return None, "there are no comparator verdicts"
    decisive = tally.child_wins + tally.parent_wins
    counts = (
        f"{tally.child_wins} for the child, {tally.parent_wins} for the parent and {tally.ties} "
        f"ties agreed in both orders; {tally.inconsistent} pairs did not"
        + (f"; {tally.single_order} first-order ties were not judged again" if tally.single_order
           else "")
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
) -> Decision:
    """won / lost / tie by DESIGN §8, under selection.rule: `sequential` (sequential.look, the
    default) or `bootstrap`, the earlier rule kept selectable: a fixed-level percentile bootstrap
    whose interval is "inconclusive" when neither above min_effect nor below zero; only then may
    the comparator decide by its majority, and only then are runs added. Under both the comparator
    may promote when Δ ≥ 0 and demote only when the interval is not above zero. `look` numbers
    the look (the loop's runs per eval) when evals have run different counts; default the fewest.
    `scope` ("tasks", "general"; default selection.scope, whose "auto" is tasks below
    selection.few_evals evals) is the claim a promotion makes; `alpha` (default 1 − confidence)
    the decision's false-promotion budget, smaller under the night's control (search/night.py)."""
    ds = paired_differences(child_scores, parent_scores)
    comparator = _comparator_view(tally)
    error_rate = judge_errors / total_runs if total_runs else 0.0
    sizes = [min(len(child_scores[e]), len(parent_scores[e])) for e in ds]
    runs = min(sizes, default=0)
    look = runs if look is None else look
    excluded = tuple(sorted((e for e in {*child_scores, *parent_scores} if e not in ds), key=str))
    common = _Common(
        evals=len(ds), runs=runs, max_runs=max(sizes, default=0), comparator=comparator, judge_error_rate=error_rate,
        judge_errors=judge_errors, total_runs=total_runs,
        confidence=selection.confidence, min_effect=selection.min_effect,
        unscored=unscored, excluded_evals=excluded, rule=selection.rule,
        few_evals=0 < len(ds) < selection.few_evals,
    )
    left_out = _left_out(unscored, total_runs, excluded)
    if common["few_evals"]:
        left_out += (f" It rests on {len(ds)} eval{'s' if len(ds) > 1 else ''}, fewer than "
                     f"{selection.few_evals}: too few to generalise beyond these tasks.")
    if error_rate > selection.max_judge_error_rate + _EPS:
        # A broken judge is not fixed by more runs of the same judge.
        return Decision(
            "tie",
            f"tie: {judge_errors} of {total_runs} runs ({error_rate:.0%}) had judge errors, above "
            f"the limit of {selection.max_judge_error_rate:.0%}, so the scores cannot be trusted.",
            None, None, None, needs_more_runs=False, **common,
        )
    if not ds:
        return Decision(
            "tie", "tie: no eval has scores for both the child and the parent." + left_out,
            None, None, None, needs_more_runs=False, **common,
        )
    if selection.rule == "sequential":
        tally = tally or ComparisonTally()
        order = sorted(ds, key=_order)  # a stated order: sums do not depend on the caller's
        seen = sequential.look(
            [child_scores[e] for e in order], [parent_scores[e] for e in order],
            tally.child_wins, tally.parent_wins,
            {e: tally.per_eval[e] for e in tally.per_eval if e in ds}, runs=look,
            max_runs=selection.max_runs_per_eval, first_runs=first_runs, confidence=selection.confidence,
            min_effect=selection.min_effect, futility=selection.futility,
            min_verdicts=MIN_CONSISTENT_VERDICTS, scope=claim_scope(selection, len(ds), scope),
            alpha=alpha)
        common["confidence"] = seen.confidence  # the reported interval's, at this look's α
        return Decision(
            seen.decision, seen.reason + left_out, seen.delta, seen.low, seen.high,
            needs_more_runs=seen.needs_more_runs, futile=seen.futile, look_alpha=seen.look_alpha,
            comparator_p=seen.comparator_p, promotion_power=seen.promotion_power, scope=seen.scope,
            next_runs=seen.next_runs, alpha=1 - selection.confidence if alpha is None else alpha,
            **common)
    delta, low, high = paired_bootstrap(
        list(ds.values()), confidence=selection.confidence,
        samples=selection.bootstrap_samples, rng=rng,
    )
    level = f"{selection.confidence:.0%}"
    where = (
        f"Δ = {delta:+.3f} with {level} interval [{low:+.3f}, {high:+.3f}] over "
        f"{len(ds)} evals × {runs} runs"
    )
    inconclusive = low <= selection.min_effect + _EPS and high >= -_EPS
    needs_more = inconclusive and look < selection.max_runs_per_eval
    side, words = _majority(tally, selection.comparator_majority)

    def made(decision: Verdict, reason: str) -> Decision:
        return Decision(decision, reason + left_out, delta, low, high, needs_more_runs=needs_more,
                        **common)

    if low > selection.min_effect + _EPS:
        return made("won", f"won: {where} lies above the minimum effect {selection.min_effect}.")
    if high < -_EPS:
        return made("lost", f"lost: {where} lies below zero.")
    if side == "child" and delta >= -_EPS:
        return made("won", f"won: {where} is inconclusive, and {words}.")
    if side == "parent" and low <= _EPS:
        return made("lost", f"lost: {where} straddles zero, and {words}.")
    more = (
        f"; more runs are needed ({look} of at most {selection.max_runs_per_eval} per eval)"
        if needs_more else ""
    )
    if side == "child":
        words = f"{words}, but Δ is negative"
    elif side == "parent":
        words = f"{words}, but the interval is above zero"
    return made("tie", f"tie: {where} is inconclusive, and {words}{more}.")


def claim_scope(selection: Selection, n_evals: int, asked: str | None = None) -> sequential.Scope:
    """The claim a promotion makes: the one asked, else selection.scope (inputs/power.claim, the
    one rule the power advice uses too)."""
    return power.claim(n_evals, asked or selection.scope, selection.few_evals)


def _order(e: EvalId) -> tuple[int, int, str]:
    return (0, e, "") if isinstance(e, int) else (1, 0, str(e))


def _left_out(unscored: int, total: int, excluded: tuple[EvalId, ...]) -> str:
    """The sentence that says what the decision could not see, when anything was left out."""
    if not unscored and not excluded:
        return ""
    parts = []
    if unscored:
        parts.append(f"{unscored} of {total} runs could not be scored (a failure of our "
                     "infrastructure, retried on a later pass or a resume) and are left out")
    if excluded:
        which = ", ".join(str(e) for e in excluded)
        parts.append(f"eval{'s' if len(excluded) > 1 else ''} {which} had no scored runs on both "
                     "sides and did not count")
    return " " + "; ".join(parts).capitalize() + "."


def _num(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def selection_json(decision: Decision) -> dict[str, Any]:
    """selection.json: the decision and every number behind it."""
    data = asdict(decision)
    comparator = dict(data.pop("comparator"))
    if comparator.get("swap_consistency") is not None:
        comparator["swap_consistency"] = round(comparator["swap_consistency"], 6)
    return {
        "decision": data["decision"],
        "reason": data["reason"],
        "delta": _num(data["delta"]),
        "interval": {
            "low": _num(data["ci_low"]),
            "high": _num(data["ci_high"]),
            "confidence": data["confidence"],
        },
        "min_effect": data["min_effect"],
        "evals": data["evals"],
        "runs_per_eval": data["runs"],
        "max_runs_per_eval": data["max_runs"],
        "comparator": comparator,
        "swap_consistency": comparator.get("swap_consistency"),
        "judge_errors": data["judge_errors"],
        "total_runs": data["total_runs"],
        "judge_error_rate": round(data["judge_error_rate"], 6),
        "unscored": data["unscored"],
        "excluded_evals": list(data["excluded_evals"]),
        "needs_more_runs": data["needs_more_runs"],
        "rule": data["rule"],
        "few_evals": data["few_evals"],
        "futile": data["futile"],
        "look_alpha": _num(data["look_alpha"]),
        "comparator_p": _num(data["comparator_p"]),
        "promotion_power": _num(data["promotion_power"]),
        "added_runs": list(data["added_runs"]),
        "scope": data["scope"],
        "next_runs": data["next_runs"],
        "alpha": _num(data["alpha"]),
    }


def _eval_means(scores: Mapping[E, float | list[float]]) -> dict[E, float]:
    out: dict[E, float] = {}
    for e, value in scores.items():
        if isinstance(value, list | tuple):
            if value:
                out[e] = mean(value)
        elif value is not None:
            out[e] = float(value)
    return out


def screen(
    child_minibatch_scores: Mapping[E, float | list[float]],
    parent_scores_same_evals: Mapping[E, float | list[float]],
    *,
    margin: float,
) -> tuple[bool, str]:
    """A cheap paired check on a few evals: only a clearly worse candidate (mean d < −margin)
    stops here; anything closer goes on to the full benchmark, where the real rule decides."""
    child = _eval_means(child_minibatch_scores)
    parent = _eval_means(parent_scores_same_evals)
    shared = [e for e in child if e in parent]
    if not shared:
        return True, "passed: no eval has scores for both, so the screen cannot judge."
    d = mean([child[e] - parent[e] for e in shared])
    if d < -margin - _EPS:
        return False, (
            f"stopped at screening: mean difference {d:+.3f} over {len(shared)} evals is below "
            f"−{margin} (clearly worse than the parent)."
        )
    return True, f"passed screening: mean difference {d:+.3f} over {len(shared)} evals ≥ −{margin}."


def choose_minibatch(
    train_ids: Sequence[E],
    parent_per_eval_scores: Mapping[E, float],
    k: int,
    rng: random.Random,
) -> list[E]:
    """k evals for the screen, stratified: most are the parent's weakest (lowest score first,
    ties broken by rng), where a proposal aimed at failures shows; one in three at most is drawn
    at random from the rest, because a screen made only of evals the parent scores 0 on could
    never see a candidate that breaks what already works. An eval without a parent score counts
    as a failure."""
    if k <= 0 or not train_ids:
        return []
    if k >= len(train_ids):
        return list(train_ids)
    keyed = sorted(train_ids, key=lambda e: (parent_per_eval_scores.get(e, 0.0), rng.random()))
    n_rest = max(1, k // 3) if k >= 2 else 0
    chosen = keyed[: k - n_rest]
    rest = keyed[k - n_rest :]
    chosen += rng.sample(rest, n_rest)
    return chosen
