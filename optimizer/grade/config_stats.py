"""The numbers of one configuration's graded runs (the rules are in grade/aggregate.py): a
metric's mean over evals of per-eval means, its spread over runs and its interval over evals;
each eval's means; and a difference as benchmark.json writes it. judge_error and unscored runs
are in no score's mean."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from optimizer import schemas as s
from optimizer.decide.stats import consistency_of, mean, mean_ci, stat
from optimizer.grade.outcome import GradeOutcome

if TYPE_CHECKING:
    from optimizer.execute.record import TrialRecord
    from optimizer.inputs.evals import Eval

CONFIG_ORDER: tuple[s.Configuration, ...] = ("with_skill", "without_skill")
DELTA_FORMATS = {
    "pass_rate": "{:+.2f}",
    "time_seconds": "{:+.1f}",
    "tokens": "{:+.0f}",
    "rubric_normalized": "{:+.2f}",
    "overall_efficiency": "{:+.2f}",
}

Item = tuple["Eval", "TrialRecord", GradeOutcome]  # (eval, run record, graded outcome)


def delta_string(metric: str, value: float) -> str:
    text = DELTA_FORMATS.get(metric, "{:+.2f}").format(value)
    # "-0.00" would claim a direction that rounding erased
    return text.replace("-", "+", 1) if float(text) == 0 else text


def _scored(items: Iterable[Item]) -> list[Item]:
    return [it for it in items if it[2].status not in ("judge_error", "unscored")]


def run_time(item: Item) -> float:
    _, record, outcome = item
    if record is not None and getattr(record, "duration_s", None) is not None:
        return float(record.duration_s)
    timing = outcome.grading.timing
    return float(timing.executor_duration_seconds or 0.0) if timing else 0.0


def run_tokens(item: Item) -> int:
    return int(getattr(item[1], "tokens", 0) or 0)


SCORE_RANGE = (0.0, 1.0)
COUNT_RANGE = (0.0, math.inf)  # seconds and tokens
DIMENSION_RANGE = (1.0, 5.0)  # a rubric dimension's 1–5 score


def summary_stat(
    items: Sequence[Item],
    value: Callable[[Item], float | None],
    bounds: tuple[float, float] = SCORE_RANGE,
) -> s.Stat | None:
    """The stat of one metric (the rules of grade/aggregate.py); None when no run has a value."""
    by_eval: dict[int, list[float]] = defaultdict(list)
    for it in items:
        v = value(it)
        if v is not None:
            by_eval[it[0].id].append(float(v))
    if not by_eval:
        return None
    runs = [v for vs in by_eval.values() for v in vs]
    per_eval = [mean(vs) for _, vs in sorted(by_eval.items())]
    out = stat(runs)
    out["mean"] = mean(per_eval)
    if len(per_eval) > 1:
        low, high = mean_ci(per_eval, bounds=bounds)
        out.update(ci_low=low, ci_high=high, ci_evals=len(per_eval))
    return s.Stat(**{k: round(v, 4) for k, v in out.items()})


def config_summary(items: Sequence[Item], unscored: int = 0) -> s.ConfigSummary:
    scored = _scored(items)
    pr = summary_stat(scored, lambda it: it[2].pass_rate)
    rubric = summary_stat(scored, lambda it: it[2].rubric_normalized if it[0].rubric else None)
    oe = summary_stat(scored, lambda it: it[2].score)
    dims: dict[str, s.Stat] = {}
    for name in sorted({d.name for it in scored for d in it[0].rubric}):

        def dim_score(it: Item, name: str = name) -> float | None:
            found = (it[2].grading.rubric_scores or {}).get(name)
            return found.score if found is not None else None

        dim = summary_stat(scored, dim_score, DIMENSION_RANGE)
        if dim is not None:
            dims[name] = dim
    zero = stat([])
    return s.ConfigSummary(
        pass_rate=pr or s.Stat(**zero),
        time_seconds=summary_stat(items, run_time, COUNT_RANGE) or s.Stat(**zero),
        tokens=summary_stat(items, run_tokens, COUNT_RANGE) or s.Stat(**zero),
        rubric_normalized=rubric,
        overall_efficiency=oe,
        consistency=round(consistency_of(oe.mean, oe.stddev), 4) if oe else None,
        rubric_dimensions=dims or None,
        runs=len(items),
        judge_errors=len(items) - len(scored),
        scored_runs=len(scored),
        unscored=unscored,
    )


def config_of(item: Item) -> str:
    return str(getattr(item[1], "configuration", ""))


def eval_means(items: Sequence[Item]) -> dict[int, tuple[float, float, int]]:
    """eval id -> (mean score, mean pass rate, scored runs)."""
    by_eval: dict[int, list[GradeOutcome]] = defaultdict(list)
    for it in _scored(items):
        by_eval[it[0].id].append(it[2])
    return {
        k: (mean([o.score or 0.0 for o in v]), mean([o.pass_rate for o in v]), len(v))
        for k, v in by_eval.items()
    }
