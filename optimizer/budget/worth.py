"""Whether going on is worth its cost (docs/design.md §9): the score one more proposal is expected
to add, estimated from the run's own decisions with the noise of a step taken out. Pure functions
of the judged proposals, in the order they were proposed; every sum is taken over sorted values, so
no order of reading moves a digit.

A step's Δ (the child's train score over its parent's) is its true gain plus noise whose variance
the run measured (the spread of its per-eval differences; its decision's interval where there are
too few evals). Two corrections turn raw steps into evidence:
- an equal child steps too: each decision steps one with its rule's one-sided level (0.4 under
  cheap steps), so a window whose wins are no more than the sum of those levels bought nothing
  that equal children would not have bought;
- a step's size is shrunk toward the run's mean Δ by empirical Bayes: the spread of the true
  gains is the variance of the Δs less their mean noise variance (method of moments), and each Δ
  keeps the share spread / (spread + its noise) of its distance from the mean.
The expected gain of one more proposal is the shrunk size of the window's wins (none below zero)
over the window's proposals. Where the run's Δs spread no more than their noise, every win is worth
the run's mean Δ and no more, whatever its own Δ: the wins an equal child would have won add
nothing beyond it. The wins in excess of an equal child's (their count less the sum of the
decisions' levels) are reported beside it; as a gate they were too few to tell from chance: on
synthetic ledgers a gate on them stopped runs whose every other proposal gained +0.15."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from optimizer.decide.sequential import t_quantile  # cached: every proposal asks the same one

# The Δs' variance is read at its lower bound at this many standard deviations (one-sided 80%):
# with eight to twenty-four proposals its estimate alone is off by 30-50%, and a spread that chance
# gives one run in five would credit equal children's wins with their noise.
SPREAD_Z = 0.8416
MIN_EVALS = 3  # per-eval differences a step's noise is measured from; fewer: its interval's


@dataclass(frozen=True)
class Judged:
    """One proposal as the rule reads it. delta and se are None for a proposal that was never
    measured (rejected, a duplicate, stopped at the screen without a Δ, failed)."""

    won: bool = False
    delta: float | None = None
    se: float | None = None
    false_step: float = 0.0  # the chance its decision steps an equal child


@dataclass(frozen=True)
class Prior:
    """The run's true steps as the method of moments sees them: their mean and spread."""

    mean: float
    spread: float  # variance of the true gains: the Δs' variance less their noise


@dataclass(frozen=True)
class Worth:
    proposals: int  # in the window
    wins: int
    equal_wins: float  # what equal children would have won in the window
    bought: float  # the shrunk gain of the window's wins (none below zero)
    gain: float  # expected of one more proposal


def standard_error(
    delta: float | None,
    low: float | None,
    high: float | None,
    confidence: float | None,
    df: int | None,
) -> float | None:
    """Δ's standard error from its two-sided interval at `confidence` (Student-t with df degrees of
    freedom; the normal without them). The wider side, since a bound may be cut at ±1."""
    if None in (delta, low, high, confidence) or not 0 < confidence < 1:  # type: ignore[operator]
        return None
    assert delta is not None and low is not None and high is not None and confidence is not None
    half = max(delta - low, high - delta)
    p = (1 + confidence) / 2
    q = t_quantile(p, df) if df and df >= 1 else NormalDist().inv_cdf(p)
    return half / q if half > 0 and q > 0 else None


def measured_se(child: Mapping[str, float], parent: Mapping[str, float]) -> float | None:
    """Δ's standard error as the run measured it: the spread of the per-eval differences over
    the evals, over their count (what Δ = their mean varies by from one set of runs to the
    next); None under MIN_EVALS evals in common, or with no spread at all."""
    common = sorted(set(child) & set(parent))
    if len(common) < MIN_EVALS:
        return None
    ds = [child[e] - parent[e] for e in common]
    mean = math.fsum(ds) / len(ds)
    variance = math.fsum((d - mean) ** 2 for d in ds) / (len(ds) - 1)
    return math.sqrt(variance / len(ds)) if variance > 0 else None


def false_step(confidence: float | None) -> float:
    """The chance a decision steps an equal child: the one-sided level of its interval."""
    return (1 - confidence) / 2 if confidence is not None and 0 < confidence < 1 else 0.0


def prior(judged: Sequence[Judged]) -> Prior | None:
    """The mean and spread of the true steps over every measured proposal; None under two."""
    measured = sorted((j.delta, j.se) for j in judged if j.delta is not None and j.se is not None)
    n = len(measured)
    if n < 2:
        return None
    mean = math.fsum(d for d, _ in measured) / n
    variance = math.fsum((d - mean) ** 2 for d, _ in measured) / (n - 1)
    noise = math.fsum(se**2 for _, se in measured) / n
    return Prior(mean, max(0.0, variance * (n - 1) / chi2_upper(n - 1, SPREAD_Z) - noise))


def chi2_upper(df: int, z: float) -> float:
    """The chi-square quantile z standard deviations above its middle (Wilson-Hilferty): the
    variance's lower bound is (n − 1) s² over it."""
    k = float(df)
    return k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3


def shrunk(j: Judged, p: Prior) -> float:
    """The step's expected true gain: its Δ drawn toward the run's mean by its noise."""
    if j.delta is None or j.se is None:
        return p.mean
    total = p.spread + j.se**2
    keep = p.spread / total if total > 0 else 0.0
    return p.mean + keep * (j.delta - p.mean)


def last_measured(judged: Sequence[Judged], n: int) -> Sequence[Judged] | None:
    """The shortest tail of `judged` that holds n measured proposals (with the unmeasured ones
    among them, which cost as much); None while there are fewer: a proposal stopped before its Δ
    is no evidence of what the next one would buy."""
    seen = 0
    for k in range(len(judged) - 1, -1, -1):
        seen += judged[k].delta is not None
        if seen == n:
            return judged[k:]
    return None


def expected(window: Sequence[Judged], run: Sequence[Judged]) -> Worth | None:
    """What the window's proposals bought and one more is expected to buy; None while the run has
    too few measured proposals to tell noise from gain."""
    p = prior(run)
    if p is None or not window:
        return None
    wins = [j for j in window if j.won]
    equal = math.fsum(sorted(j.false_step for j in window if j.delta is not None))
    bought = math.fsum(sorted(max(0.0, shrunk(j, p)) for j in wins))
    return Worth(len(window), len(wins), round(equal, 6), bought, bought / len(window))
