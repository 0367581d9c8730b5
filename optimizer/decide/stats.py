"""Small statistics: means, standard deviations, the seed files' stat blocks, consistency, Student-t
intervals, percentiles and the paired bootstrap over evals. Pure and seeded: never touch the
global random state, the clock or a file."""

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
    # No clamping needed: every resample mean lies between min(ds) and max(ds), so an interval of
    # score differences (each in [−1, 1]) stays inside [−1, 1] by construction.
    # A constant difference gives a zero-width interval at exactly Δ: every resample is the same
    # multiset, summed by the same correctly rounded fsum as Δ itself.
    return delta, percentile(means, tail), percentile(means, 1 - tail)


# Below this mean, consistency divides by the floor instead, so a near-zero mean cannot explode it.
CONSISTENCY_FLOOR = 0.05


def stddev(values: Sequence[float]) -> float:
    """Sample standard deviation (n − 1), 0 for fewer than two values, as skill-creator computes it."""
    n = len(values)
    if n < 2:
        return 0.0
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))


def stat(values: Sequence[float]) -> dict[str, float]:
    """{mean, stddev, min, max} of the seed files; all zeros for no values."""
    if not values:
        return {"mean": 0.0, "stddev": 0.0, "min": 0.0, "max": 0.0}
    return {"mean": mean(values), "stddev": stddev(values), "min": min(values), "max": max(values)}


def consistency(values: Sequence[float]) -> float:
    """max(0, 1 − stddev / max(mean, 0.05)): 1 for identical runs, 0 for very noisy ones."""
    if not values:
        return 0.0
    return consistency_of(mean(values), stddev(values))


def consistency_of(mean: float, stddev: float) -> float:
    """The same formula from a stat object's numbers, so a reader can recompute it from the file."""
    return max(0.0, 1.0 - stddev / max(mean, CONSISTENCY_FLOOR))


def mean_ci(
    values: Sequence[float],
    confidence: float = 0.95,
    *,
    bounds: tuple[float, float] = (-math.inf, math.inf),
) -> tuple[float, float]:
    """Student-t interval of the mean, mean ± t(1−α/2, n−1)·s/√n, clamped to `bounds`, the range
    the mean can take (scores [0, 1], seconds and tokens [0, ∞)). Chosen over a bootstrap because
    the unit here is the eval and suites are small (3–20 evals), where a bootstrap is too narrow
    and not reproducible without a seed. One value (or none) gives a degenerate interval.

    Why clamp rather than a bounded method: the true mean lies inside the bounds, so cutting off
    the impossible part never uncovers it (coverage is the t interval's), and the width that
    says "3 evals are few" stays. A logit-scale interval would be the textbook bounded choice,
    but it breaks on means of exactly 0 or 1, which scores often are (every run passes)."""
    n = len(values)
    m = mean(values)
    if n < 2:
        return (m, m)
    half = t_quantile(1 - (1 - confidence) / 2, n - 1) * stddev(values) / math.sqrt(n)
    low, high = bounds
    return (min(max(m - half, low), high), max(min(m + half, high), low))


def t_quantile(p: float, df: int) -> float:
    """Inverse CDF of Student's t (no scipy here): bisection on the regularized incomplete beta."""
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    if p == 0.5:
        return 0.0
    target = p if p > 0.5 else 1 - p
    low, high = 0.0, 1.0
    while _t_cdf(high, df) < target:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if _t_cdf(mid, df) < target:
            low = mid
        else:
            high = mid
        if high - low < 1e-12:
            break
    q = (low + high) / 2
    return q if p > 0.5 else -q


def t_cdf(t: float, df: int) -> float:
    """P(T ≤ t) for Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    return _t_cdf(t, df)


def _t_cdf(t: float, df: int) -> float:
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2, 0.5, x)
    return 1 - tail if t >= 0 else tail


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b), by Lentz's continued fraction."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)
    )
    if x > (a + 1) / (a + b + 2):
        # The fraction converges fast only on this side; use the symmetry I_x(a,b) = 1 − I_1−x(b,a).
        return 1 - _betainc(b, a, 1 - x)
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-14:
            break
    return front * h / a
