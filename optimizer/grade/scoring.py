"""Run score arithmetic (DESIGN §7): pass rate, run score, consistency, summary statistics, intervals.
Pure functions of numbers only; never read files, call a model or round away information here."""

from __future__ import annotations

import math
from collections.abc import Sequence

from optimizer.config import Scoring

# Below this mean, consistency divides by the floor instead, so a near-zero mean cannot explode it.
CONSISTENCY_FLOOR = 0.05


def pass_rate(passed: int, total: int) -> float:
    """passed / total over structural and judged expectations together; 0 for an empty list, since
    an eval with nothing checkable proves nothing."""
    return passed / total if total else 0.0


def rubric_weighted_mean(scores: dict[str, int], weights: dict[str, float]) -> float:
    """Σ score·weight / Σ weight over the dimensions scored."""
    total = sum(weights[name] for name in scores)
    return sum(scores[name] * weights[name] for name in scores) / total if total else 0.0


def run_score(
    pass_rate: float, rubric_normalized: float | None, has_rubric: bool, weights: Scoring
) -> float:
    """overall_efficiency of one run: the weighted blend when the eval has a rubric, else the pass
    rate. The weights are renormalised so a config of 2:3 means the same as 0.4:0.6."""
    if not has_rubric:
        return pass_rate
    total = weights.pass_weight + weights.rubric_weight
    if total <= 0:
        return pass_rate
    normalized = rubric_normalized or 0.0
    return (weights.pass_weight * pass_rate + weights.rubric_weight * normalized) / total


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


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


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Student-t interval of the mean: mean ± t(1−α/2, n−1)·s/√n. Chosen over a bootstrap because
    the unit here is the eval and suites are small (3–20 evals), where a bootstrap is too narrow
    and not reproducible without a seed. One value (or none) gives a degenerate interval."""
    n = len(values)
    m = mean(values)
    if n < 2:
        return (m, m)
    half = t_quantile(1 - (1 - confidence) / 2, n - 1) * stddev(values) / math.sqrt(n)
    return (m - half, m + half)


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
