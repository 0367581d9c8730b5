"""The promotion rule (docs/design.md §8): one class per rule selection.rule names, each a StepRule
(comparison.py), chosen once by rule_for; the cheap step's preset, the claim a promotion makes and
the comparator's share of the runs. Parent selection is parents.py, the cheap screen screen.py.
Pure functions of their inputs and a seeded random.Random: never read files, clocks or globals."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from optimizer.config import Selection
from optimizer.decide import power, sequential, verdict
from optimizer.decide.comparison import (
    MIN_CONSISTENT_VERDICTS,
    Asked,
    ComparisonTally,
    E,
    Measured,
    Said,
    StepRule,
    decision,
    eval_order,
    facts,
    unfit,
)
from optimizer.decide.stats import paired_bootstrap
from optimizer.schemas import RuleDecision
from optimizer.words import ci

_EPS = 1e-12


def majority(tally: ComparisonTally | None, majority: float) -> tuple[str | None, str]:
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


@dataclass(frozen=True)
class Sequential:
    """`sequential` (the default): sequential.look's group-sequential test at the look the runs
    reached, spending the decision's α over its looks; the comparator only agrees with a bound
    above zero."""

    selection: Selection

    def decide(self, measured: Measured[E], asked: Asked, rng: random.Random) -> RuleDecision:
        selection = self.selection
        f = facts(measured, asked, selection)
        early = unfit(f, measured, selection)
        if early is not None:
            return early
        child, parent, ds = measured.child, measured.parent, f.ds
        tally = measured.tally or ComparisonTally()
        order = sorted(ds, key=eval_order)  # a stated order: sums do not depend on the caller's
        claim = claim_scope(selection, len(ds), asked.scope)
        seen = sequential.look(
            selection,
            replace(asked, look=f.look, scope=claim),
            sequential.Seen(
                [child[e] for e in order],
                [parent[e] for e in order],
                tally.child_wins,
                tally.parent_wins,
                {e: tally.per_eval[e] for e in tally.per_eval if e in ds},
            ),
        )
        return decision(replace(seen, reason=seen.reason + f.left_out), f.common)


@dataclass(frozen=True)
class Bootstrap:
    """`bootstrap`, the earlier rule kept selectable: a fixed-level percentile bootstrap whose
    interval is "inconclusive" when neither above min_effect nor below zero; only then may the
    comparator decide by its majority, and only then are runs added; there the comparator may
    promote when Δ ≥ 0 and demote only when the interval is not above zero."""

    selection: Selection

    def decide(self, measured: Measured[E], asked: Asked, rng: random.Random) -> RuleDecision:
        selection = self.selection
        f = facts(measured, asked, selection)
        early = unfit(f, measured, selection)
        if early is not None:
            return early
        delta, low, high = paired_bootstrap(
            list(f.ds.values()),
            confidence=selection.confidence,
            samples=selection.bootstrap_samples,
            rng=rng,
        )
        where = (
            f"Δ = {delta:+.3f}, {ci(selection.confidence)} [{low:+.3f}, {high:+.3f}] over "
            f"{len(f.ds)} evals × {f.runs} runs"
        )
        inconclusive = low <= selection.min_effect + _EPS and high >= -_EPS
        needs_more = inconclusive and f.look < selection.max_runs_per_eval
        side, words = majority(measured.tally, selection.comparator_majority)

        def made(said: verdict.Verdict, reason: str) -> RuleDecision:
            return decision(
                Said(
                    said,
                    reason + f.left_out,
                    delta,
                    low,
                    high,
                    selection.confidence,
                    needs_more_runs=needs_more,
                ),
                f.common,
            )

        if low > selection.min_effect + _EPS:
            return made(
                "won", f"won: {where} lies above the minimum effect {selection.min_effect}."
            )
        if verdict.side(low, high + _EPS) == "below":
            return made("lost", f"lost: {where} lies below zero.")
        if side == "child" and delta >= -_EPS:
            return made("won", f"won: {where} is inconclusive, and {words}.")
        if side == "parent" and low <= _EPS:
            return made("lost", f"lost: {where} straddles zero, and {words}.")
        more = (
            f"; more runs are needed ({f.look} of at most {selection.max_runs_per_eval} per eval)"
            if needs_more
            else ""
        )
        if side == "child":
            words = f"{words}, but Δ is negative"
        elif side == "parent":
            words = f"{words}, but the interval is above zero"
        return made("tie", f"tie: {where} is inconclusive, and {words}{more}.")


# The rules by the name selection.rule gives: a new rule is one class and one line here.
RULES: dict[str, Callable[[Selection], StepRule]] = {
    "sequential": Sequential,
    "bootstrap": Bootstrap,
}


def rule_for(selection: Selection) -> StepRule:
    """The rule selection.rule names, under these settings."""
    return RULES[selection.rule](selection)


def decide(
    measured: Measured[E], asked: Asked = Asked(), *, selection: Selection, rng: random.Random
) -> RuleDecision:
    """won / lost / tie by docs/design.md §8 under the rule selection.rule names (rule_for): the
    scores and counts as Measured holds them, asked as Asked says (comparison.py names each);
    Asked() asks a step at its fewest runs, first_runs 1, under selection's claim and α."""
    return rule_for(selection).decide(measured, asked, rng)


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
