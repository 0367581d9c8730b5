"""The gate's statistics (`optimizer gate`, docs/design.md §17): is HEAD not worse than BASE by more than a
margin? Evals are the units, a Student-t bound over their paired differences at the promotion
rule's confidence. Pure: no rng, no files, no clock. Never a normal approximation, never an
interval of zero width.

Why a floor on the spread: when every eval's difference is the same (often 0: the runs scored
alike), s is 0 and a t bound collapses onto the mean, claiming certainty that a handful of
evals cannot give. The floor is the spread the differences would have if one eval had moved by
one step of the scores' resolution (1 / (runs × expectations) of its coarsest eval): a change
the runs could not have told from none. It never narrows an interval the data make wider."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from optimizer.decide.stats import mean, stddev, t_quantile

Outcome = Literal["not_worse", "worse", "inconclusive"]
_t = functools.lru_cache(maxsize=256)(t_quantile)  # a bisection each call; bench/gate.py makes 10⁵


@dataclass(frozen=True)
class NonInferiority:
    outcome: Outcome
    delta: float  # mean over evals of (HEAD − BASE)
    low: float  # one-sided lower bound at `confidence`
    high: float  # one-sided upper bound at `confidence`
    confidence: float
    margin: float
    evals: int
    spread: float  # the standard deviation used: the evals' own, or the floor when larger
    floored: bool  # the floor was used: the evals' differences were (nearly) all alike
    t: float
    reason: str


def resolution(runs: int, expectations: Mapping[int, int]) -> float:
    """The smallest step one eval's mean score can move by: one expectation of one run, of the
    eval with the fewest expectations (the coarsest), over `runs` runs."""
    fewest = min((k for k in expectations.values() if k > 0), default=1)
    return 1.0 / (max(1, runs) * fewest)


def check(
    diffs: Mapping[int, float], *, confidence: float, margin: float, step: float
) -> NonInferiority:
    """HEAD is `not_worse` when the lower bound of mean(HEAD − BASE) is above −margin, `worse`
    when it is not and the upper bound is below zero (shown lower than BASE, and not within the
    margin), else `inconclusive` (the gate treats it as a failure: not worse was not shown). Both bounds are one-sided at `confidence`, so the interval
    [low, high] is a two-sided one at 1 − 2·(1 − confidence)."""
    ds = [diffs[e] for e in sorted(diffs)]
    n = len(ds)
    if n < 2:
        raise ValueError("a non-inferiority test needs at least two evals")
    delta = mean(ds)
    floor = step / math.sqrt(n)  # the sample sd of (step, 0, …, 0): one eval moved by one step
    own = stddev(ds)
    spread = max(own, floor)
    t = _t(confidence, n - 1)
    half = t * spread / math.sqrt(n)
    low, high = delta - half, delta + half
    where = (
        f"Δ = {delta:+.3f} (HEAD − BASE, mean over {n} evals), {confidence:.0%} lower bound "
        f"{low:+.3f}, upper bound {high:+.3f} (Student-t, {n - 1} degrees of freedom"
        + (
            f"; the evals' differences were alike, so the spread is floored at {floor:.3f}, "
            f"one eval moved by one score step of {step:.3f}"
            if own < floor
            else ""
        )
        + ")"
    )
    if low > -margin:
        outcome: Outcome = "not_worse"
        reason = f"not worse: {where}; the lower bound is above −{margin}."
    elif high < 0:  # the whole interval below zero: HEAD scores lower, by more than it may
        outcome = "worse"
        reason = f"worse: {where}; even the upper bound is below " + (
            f"−{margin}." if high < -margin else f"zero, and the lower bound below −{margin}."
        )
    else:
        outcome = "inconclusive"
        reason = (
            f"not shown to be not worse: {where}; the lower bound is not above −{margin}. "
            "More evals narrow the interval most; more runs per eval help when runs vary."
        )
    return NonInferiority(
        outcome, delta, low, high, confidence, margin, n, spread, own < floor, t, reason
    )
