"""The sequential promotion rule's statistics (DESIGN §8, docs/selection.md): one look per number of
runs per eval, each allowed a fixed share of the false-promotion budget, two tests per look (the
scores and the blind comparator), and a futility stop. Pure: no rng, no files, no clock.

Why this shape: the loop re-tests after every added run, and re-testing a fixed 95% interval
inflates the error rate with each look. Spending α = 1 − confidence across the looks and across
the two tests bounds the chance of ever promoting an equal child by α (a union bound), whatever
the looks' correlation and however early the loop stops."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

from optimizer.grade.stats import mean, stddev, t_quantile

# Cumulative share of α spent by the k-th of K looks: (k/K)^SPEND_POWER. 3 keeps a little for the
# first look (clear children stop there) and most for the last, best-informed one; with 1 or 2
# bench/selection.py measured less power at +0.10 and the same false-promotion rate.
SPEND_POWER = 3.0
# The scores and the comparator each get half of α: neither test can spend the other's share.
SCORE_SHARE = 0.5
_NORMAL = NormalDist()


def look_alpha(alpha: float, runs: int, max_runs: int, first_runs: int = 1) -> float:
    """α this look may spend: α·[(k/K)^p − ((k−1)/K)^p] for the k-th of K possible looks, from
    first_runs to max_runs runs per eval. Summed over the K looks it is α."""
    first = max(1, min(first_runs, max_runs))
    k = max(1, min(runs, max_runs) - first + 1)
    looks = max_runs - first + 1
    return alpha * ((k / looks) ** SPEND_POWER - ((k - 1) / looks) ** SPEND_POWER)


@dataclass(frozen=True)
class ScoreTest:
    delta: float
    low: float  # one-sided bounds at the look's score α (the reported interval)
    high: float
    t: float  # the Student-t quantile behind them
    se: float


def score_test(ds: Sequence[float], alpha: float) -> ScoreTest:
    """Student-t bounds on the mean per-eval difference. Not a bootstrap: over 3–10 evals a
    percentile bootstrap is far too narrow (it ignores that s itself is estimated from n points);
    t(n−1) widens with few evals as it should. One eval gives an unbounded interval."""
    n, delta = len(ds), mean(ds)
    if n < 2:
        return ScoreTest(delta, -math.inf, math.inf, math.inf, math.inf)
    se = stddev(ds) / math.sqrt(n)
    t = t_quantile(1 - alpha, n - 1)
    return ScoreTest(delta, delta - t * se, delta + t * se, t, se)


@dataclass(frozen=True)
class ComparatorTest:
    wins: int
    losses: int
    z: float  # for the child: > 0 when it wins more; 0 when too few verdicts
    p_child: float  # one-sided p-values
    p_parent: float


def comparator_test(
    wins: int, losses: int, per_eval: Mapping[Any, Mapping[str, int]], min_verdicts: int
) -> ComparatorTest:
    """A sign test on the decisive swap-consistent verdicts, z = (w − l ∓ 1)/√V with a continuity
    correction. V is the larger of the binomial variance (w + l) and the between-eval variance of
    the per-eval margins: verdicts of one eval share its difficulty, and counting them as
    independent would overstate the evidence when one eval carries the margin."""
    n = wins + losses
    if n < min_verdicts:
        return ComparatorTest(wins, losses, 0.0, 1.0, 1.0)
    variance = float(n)
    margins = [(c.get("child_wins", 0) - c.get("parent_wins", 0),
                c.get("child_wins", 0) + c.get("parent_wins", 0)) for c in per_eval.values()]
    margins = [m for m in margins if m[1]]
    if len(margins) >= 2:
        rate = (wins - losses) / n
        spread = math.fsum((x - k * rate) ** 2 for x, k in margins)
        variance = max(variance, spread * len(margins) / (len(margins) - 1))
    root = math.sqrt(variance)
    z = (wins - losses) / root
    p_child = 1 - _NORMAL.cdf((wins - losses - 1) / root)
    p_parent = 1 - _NORMAL.cdf((losses - wins - 1) / root)
    return ComparatorTest(wins, losses, z, p_child, p_parent)


def conditional_power(z_now: float, fraction: float, z_final: float) -> float:
    """P(the final look's statistic clears z_final) if the trend seen so far continues (the
    B-value formula: Φ((z/√t − c)/√(1 − t)), t the information fraction)."""
    if fraction >= 1:
        return 1.0 if z_now >= z_final else 0.0
    if math.isinf(z_now):
        return 1.0 if z_now > 0 else 0.0
    return _NORMAL.cdf((z_now / math.sqrt(fraction) - z_final) / math.sqrt(1 - fraction))


def promotion_power(
    scores: ScoreTest, comparator: ComparatorTest, *, n_evals: int, runs: int, max_runs: int,
    first_runs: int, alpha: float,
) -> float:
    """The better of the two tests' conditional power to promote at the last look (R runs per
    eval), with runs per eval as the information fraction. Approximate for the scores (adding
    runs does not shrink the between-eval spread), but futility only ever stops runs, so a wrong
    guess costs power, never a false promotion."""
    fraction = min(1.0, runs / max_runs)
    last = look_alpha(alpha, max_runs, max_runs, first_runs)
    cmp_final = _NORMAL.inv_cdf(1 - last * (1 - SCORE_SHARE))
    cp_cmp = conditional_power(comparator.z, fraction, cmp_final)
    if n_evals < 2:
        return cp_cmp
    score_final = t_quantile(1 - last * SCORE_SHARE, n_evals - 1)
    # Against zero, not min_effect: a bound above zero wins too when the comparator agrees.
    if scores.se == 0:
        z_score = math.inf if scores.delta > 0 else -math.inf
    else:
        z_score = scores.delta / scores.se
    return max(cp_cmp, conditional_power(z_score, fraction, score_final))


@dataclass(frozen=True)
class Look:
    """One look's outcome, for select.decide to wrap into a Decision."""

    decision: Literal["won", "lost", "tie"]
    reason: str
    delta: float
    low: float | None
    high: float | None
    confidence: float  # of the reported two-sided interval: 1 − 2·(this look's score α)
    needs_more_runs: bool
    futile: bool
    look_alpha: float
    comparator_p: float
    promotion_power: float | None


def _bound(x: float) -> float | None:
    return None if math.isinf(x) else x


def look(
    ds: Sequence[float], wins: int, losses: int, per_eval: Mapping[Any, Mapping[str, int]], *,
    runs: int, max_runs: int, first_runs: int, confidence: float, min_effect: float,
    futility: float, min_verdicts: int,
) -> Look:
    """won / lost / tie at this look. won: the score bound clears min_effect, or clears zero with
    more comparator wins than losses, or the sign test favours the child at this look's α and
    Δ ≥ 0. lost: the plain interval at `confidence` is below zero, or the sign test favours the
    parent and the lower bound is not above zero. Otherwise more runs, unless runs are at the cap
    or the conditional power to promote is below `futility`."""
    alpha = 1 - confidence
    spent = look_alpha(alpha, runs, max_runs, first_runs)
    a_score, a_cmp = spent * SCORE_SHARE, spent * (1 - SCORE_SHARE)
    s = score_test(ds, a_score)
    c = comparator_test(wins, losses, per_eval, min_verdicts)
    n = len(ds)
    level = 1 - 2 * a_score
    where = (f"Δ = {s.delta:+.3f} with {level:.1%} Student-t interval [{s.low:+.3f}, {s.high:+.3f}] "
             f"over {n} evals × {runs} runs (this look spends α = {spent:.4f} of {alpha:.2f})")
    if n < 2:
        where = f"Δ = {s.delta:+.3f} over 1 eval × {runs} runs (no interval from one eval)"
    votes = (f"the comparator favoured the child in {wins} and the parent in {losses} decisive "
             f"swap-consistent verdicts")

    def out(decision: Literal["won", "lost", "tie"], reason: str, more: bool = False, futile: bool = False,
            power: float | None = None) -> Look:
        return Look(decision, reason, s.delta, _bound(s.low), _bound(s.high), level, more, futile,
                    spent, c.p_child, power)

    if s.low > min_effect:
        return out("won", f"won: {where} lies above the minimum effect {min_effect}.")
    if s.low > 0 and wins > losses:
        # No extra α: this is a subset of "the bound is above zero", whose chance for an equal
        # child is the score share already spent; the comparator only has to agree.
        return out("won", f"won: {where} lies above zero though not above the minimum effect "
                          f"{min_effect}, and {votes}.")
    # Losing is not promoting: the parent stays either way, so `lost` needs no share of the
    # spent α, only the plain two-sided interval at the configured confidence below zero.
    worse = score_test(ds, alpha / 2)
    if worse.high < 0:
        return out("lost", f"lost: {where}; its {confidence:.0%} upper bound {worse.high:+.3f} "
                           "lies below zero.")
    if c.p_child <= a_cmp and s.delta >= 0:
        return out("won", f"won: {where} is inconclusive, and {votes} (sign test p = "
                          f"{c.p_child:.4f} ≤ {a_cmp:.4f}).")
    if c.p_parent <= a_cmp and s.low <= 0:
        return out("lost", f"lost: {where} straddles zero, and {votes} (sign test p = "
                           f"{c.p_parent:.4f} ≤ {a_cmp:.4f}).")
    tail = f"{votes} (sign test p = {c.p_child:.3f} for the child, more than {a_cmp:.4f})"
    if runs >= max_runs:
        return out("tie", f"tie: {where} is inconclusive, and {tail}; runs are at the cap of "
                          f"{max_runs} per eval.")
    power = promotion_power(s, c, n_evals=n, runs=runs, max_runs=max_runs, first_runs=first_runs,
                            alpha=alpha)
    if power < futility:
        return out("tie", f"tie: {where} is inconclusive, and {tail}; no more runs are added: if "
                          f"the trend holds, the chance of promotion at {max_runs} runs is "
                          f"{power:.1%}, below selection.futility = {futility:.0%}.",
                   futile=True, power=power)
    return out("tie", f"tie: {where} is inconclusive, and {tail}; more runs are needed ({runs} of "
                      f"at most {max_runs} per eval; chance of promotion if the trend holds "
                      f"{power:.1%}).", more=True, power=power)
