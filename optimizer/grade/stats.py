"""Small statistics for selection: means, percentiles and the paired bootstrap over evals.
Pure and seeded: never touch the global random state, the clock or a file."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("mean of no values")
    return math.fsum(values) / len(values)


def percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default) of an already sorted list."""
    if not ordered:
        raise ValueError("percentile of no values")
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def paired_bootstrap(
    ds: Sequence[float], *, confidence: float, samples: int, rng: random.Random
) -> tuple[float, float, float]:
    """(Δ, low, high): Δ is the mean paired difference; the interval is the percentile interval
    of the mean over `samples` resamples of the evals with replacement.

    Evals, not runs, are resampled: the question is whether the child is better on tasks like
    these, and runs of one eval are not independent of each other."""
    if not ds:
        raise ValueError("paired_bootstrap needs at least one difference")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    values = list(ds)
    n = len(values)
    delta = mean(values)
    # One draw of n·samples items, then slices: about twice as fast as one draw per resample,
    # which matters to bench/selection.py (thousands of decisions in a minute).
    flat = rng.choices(values, k=n * max(1, samples))
    means = sorted(math.fsum(flat[i : i + n]) / n for i in range(0, len(flat), n))
    tail = (1 - confidence) / 2
    # A constant difference gives a zero-width interval at exactly Δ: every resample is the same
    # multiset, summed by the same correctly rounded fsum as Δ itself.
    return delta, percentile(means, tail), percentile(means, 1 - tail)
