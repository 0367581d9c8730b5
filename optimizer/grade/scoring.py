"""Run score arithmetic (docs/design.md §7): pass rate, rubric weighted mean, run score.
Pure functions of numbers only; never read files, call a model or round away information here."""

from __future__ import annotations

from optimizer.config import Scoring


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
