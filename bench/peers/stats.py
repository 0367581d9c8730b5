"""Figures of bench/peers.py across (skill, seed) units: gain per dollar as a ratio of sums, and
paired bootstrap intervals that resample units, so every method is compared on the same worlds.
Pure functions of the outcomes and a seed."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

RESAMPLES = 4000


@dataclass(frozen=True)
class Unit:
    """One method on one (skill, seed): its gain on the sealed test over v0, what it cost."""

    skill: str
    seed: int
    gain: float
    headroom: float | None  # gain / (ceiling - v0); None when v0 is at the ceiling
    worse: bool
    usd: float


def per_dollar(units: Sequence[Unit]) -> float:
    """Sealed-test gain per dollar: total gain over total spend (a mean of ratios would let one
    cheap lucky run dominate)."""
    spent = math.fsum(u.usd for u in units)
    return math.fsum(u.gain for u in units) / spent if spent > 0 else 0.0


def ratio(ours: float, peer: float) -> float:
    """ours / peer, +inf when the peer gained nothing per dollar and we gained (ours is then at
    least any multiple of it), 0 when neither gained."""
    if peer > 0:
        return ours / peer
    return math.inf if ours > 0 else 0.0


def mean_gain(units: Sequence[Unit]) -> float:
    """The mean sealed-test gain over v0: what a user gets in the morning, on average."""
    return math.fsum(u.gain for u in units) / len(units) if units else 0.0


def paired_ratio(
    ours: Sequence[Unit],
    peer: Sequence[Unit],
    *,
    seed: int = 0,
    level: float = 0.95,
    figure: Callable[[Sequence[Unit]], float] = per_dollar,
) -> tuple[float, float, float]:
    """The ratio of a figure (gain per dollar unless said) and its percentile interval over
    resamples of the units (the same units drawn for both: paired)."""
    assert [(u.skill, u.seed) for u in ours] == [(u.skill, u.seed) for u in peer]
    point = ratio(figure(ours), figure(peer))
    rng = random.Random(seed)
    n = len(ours)
    draws = []
    for _ in range(RESAMPLES):
        idx = [rng.randrange(n) for _ in range(n)]
        draws.append(ratio(figure([ours[i] for i in idx]), figure([peer[i] for i in idx])))
    draws.sort()
    lo = draws[int((1 - level) / 2 * RESAMPLES)]
    hi = draws[min(RESAMPLES - 1, int((1 + level) / 2 * RESAMPLES))]
    return point, lo, hi


def mean_interval(
    values: Sequence[float], *, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """Mean and percentile bootstrap interval (for a paired difference, pass the differences)."""
    if not values:
        return math.nan, math.nan, math.nan
    rng = random.Random(seed)
    n = len(values)
    means = sorted(
        math.fsum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(RESAMPLES)
    )
    return (
        math.fsum(values) / n,
        means[int((1 - level) / 2 * RESAMPLES)],
        means[min(RESAMPLES - 1, int((1 + level) / 2 * RESAMPLES))],
    )


def worse_rate(units: Sequence[Unit]) -> float:
    return sum(u.worse for u in units) / len(units) if units else math.nan


def fmt_ratio(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.2f}"
