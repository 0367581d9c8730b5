"""Benchmark statistics: graded runs of both configurations -> benchmark.json (seeds 002 + 004) and
benchmark.md, with analyst notes computed without a model. Never let list or folder order change a
number, and never fold a judge_error run into a mean.

How the numbers are made (documented for readers of benchmark.json):
- Each stat's `mean` is the mean over evals of the per-eval mean over runs, so an eval with more
  runs does not weigh more; `stddev` (sample), `min` and `max` are over the individual runs, as
  skill-creator computes them; `ci_low`/`ci_high` are a 95% Student-t interval over the per-eval
  means (the eval is the unit of sampling), clamped to the range the metric can take (rates and
  scores [0, 1], rubric dimensions [1, 5], seconds and tokens ≥ 0; see stats.mean_ci for why),
  and `ci_evals` is how many evals it rests on. With one eval there is no interval: a zero-width
  one would claim a certainty one eval cannot give.
- `consistency` = max(0, 1 − stddev / max(mean, 0.05)) of the overall_efficiency stat above it.
- judge_error runs are listed in `runs` (with `status`) and counted (`judge_errors`, notes), but
  left out of pass_rate, rubric and overall_efficiency; their time and tokens still count, since
  the executor really spent them. exec_error runs count everywhere, with score 0.
- unscored runs (our infrastructure failed them, docs/design.md §7) are in no mean and not in `runs`:
  they are listed in the added `unscored` field with their cause and counted per configuration.
  A configuration none of whose runs could be scored has `scored_runs: 0`, and benchmark.md
  shows no value for it (the seed's stat fields stay, at zero, for readers that need them).
- `delta` is with_skill minus without_skill, by name: "+0.50" (rates), "+13.0" (seconds), "+1700"
  (tokens).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from optimizer import schemas as s
from optimizer import words
from optimizer.decide.stats import consistency_of, mean, mean_ci, stat
from optimizer.grade.judge import GATE_SKIPPED, GradeOutcome

CONFIG_ORDER: tuple[s.Configuration, ...] = ("with_skill", "without_skill")
DELTA_FORMATS = {
    "pass_rate": "{:+.2f}", "time_seconds": "{:+.1f}", "tokens": "{:+.0f}",
    "rubric_normalized": "{:+.2f}", "overall_efficiency": "{:+.2f}",
}

Item = tuple[Any, Any, GradeOutcome]  # (eval, run record, graded outcome)


@dataclass(frozen=True)
class Note:
    # judge_error, exec_error, gated, skill_hurts, non_discriminating, flaky, skill_not_invoked, cost
    kind: str
    eval_id: int | None
    expectation: str | None
    text: str


def delta_string(metric: str, value: float) -> str:
    text = DELTA_FORMATS.get(metric, "{:+.2f}").format(value)
    # "-0.00" would claim a direction that rounding erased
    return text.replace("-", "+", 1) if float(text) == 0 else text


def _scored(items: Iterable[Item]) -> list[Item]:
    return [it for it in items if it[2].status not in ("judge_error", "unscored")]


def _time(item: Item) -> float:
    _, record, outcome = item
    if record is not None and getattr(record, "duration_s", None) is not None:
        return float(record.duration_s)
    timing = outcome.grading.timing
    return float(timing.executor_duration_seconds or 0.0) if timing else 0.0


def _tokens(item: Item) -> int:
    return int(getattr(item[1], "tokens", 0) or 0)


SCORE_RANGE = (0.0, 1.0)
COUNT_RANGE = (0.0, math.inf)  # seconds and tokens
DIMENSION_RANGE = (1.0, 5.0)  # a rubric dimension's 1–5 score


def _summary_stat(items: Sequence[Item], value: Callable[[Item], float | None],
                  bounds: tuple[float, float] = SCORE_RANGE) -> s.Stat | None:
    """The stat of one metric (see the module rules); None when no run has a value."""
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


def _config_summary(items: Sequence[Item], unscored: int = 0) -> s.ConfigSummary:
    scored = _scored(items)
    pr = _summary_stat(scored, lambda it: it[2].pass_rate)
    rubric = _summary_stat(scored, lambda it: it[2].rubric_normalized if it[0].rubric else None)
    oe = _summary_stat(scored, lambda it: it[2].score)
    dims: dict[str, s.Stat] = {}
    for name in sorted({d.name for it in scored for d in it[0].rubric}):
        def dim_score(it: Item, name: str = name) -> float | None:
            found = (it[2].grading.rubric_scores or {}).get(name)
            return found.score if found is not None else None
        dim = _summary_stat(scored, dim_score, DIMENSION_RANGE)
        if dim is not None:
            dims[name] = dim
    zero = stat([])
    return s.ConfigSummary(
        pass_rate=pr or s.Stat(**zero),
        time_seconds=_summary_stat(items, _time, COUNT_RANGE) or s.Stat(**zero),
        tokens=_summary_stat(items, _tokens, COUNT_RANGE) or s.Stat(**zero),
        rubric_normalized=rubric,
        overall_efficiency=oe,
        consistency=round(consistency_of(oe.mean, oe.stddev), 4) if oe else None,
        rubric_dimensions=dims or None,
        runs=len(items),
        judge_errors=len(items) - len(scored),
        scored_runs=len(scored),
        unscored=unscored,
    )


def _run_entry(item: Item) -> s.BenchmarkRun:
    eval, record, outcome = item
    g = outcome.grading
    metrics = g.execution_metrics
    tool_calls = metrics.total_tool_calls if metrics else sum((getattr(record, "tool_calls", None) or {}).values())
    notes = []
    if g.user_notes_summary:
        u = g.user_notes_summary
        notes = [*u.uncertainties, *u.needs_review, *u.workarounds]
    if outcome.status in ("judge_error", "exec_error") and outcome.error:
        notes.insert(0, f"{outcome.status}: {outcome.error}")
    if outcome.status == "gated":
        notes.insert(0, "structural gate failed: the judge was skipped")
    return s.BenchmarkRun(
        eval_id=eval.id,
        eval_name=eval.name,
        configuration=_configuration(item),
        run_number=int(record.run_number),
        result=s.RunResult(
            pass_rate=g.summary.pass_rate,
            passed=g.summary.passed,
            failed=g.summary.failed,
            total=g.summary.total,
            time_seconds=round(_time(item), 3),
            tokens=_tokens(item),
            tool_calls=tool_calls,
            errors=metrics.errors_encountered if metrics else int(outcome.status == "exec_error"),
        ),
        expectations=g.expectations,
        notes=notes,
        status=outcome.status,
        score=None if outcome.score is None else round(outcome.score, 4),
        rubric_normalized=outcome.rubric_normalized,
        skill_invoked=getattr(record, "skill_invoked", None),
    )


def _config_of(item: Item) -> str:
    return str(getattr(item[1], "configuration", ""))


def _configuration(item: Item) -> s.Configuration:
    config = _config_of(item)
    if config not in CONFIG_ORDER:  # aggregate() has sorted the runs by CONFIG_ORDER.index already
        raise ValueError(f"unknown configuration {config!r}; use with_skill or without_skill")
    return config


def _scored_runs(summary: s.ConfigSummary) -> int:
    extra = summary.model_extra
    assert extra is not None  # output models allow extra fields, so pydantic always keeps this dict
    return extra["scored_runs"]


def _eval_means(items: Sequence[Item]) -> dict[int, tuple[float, float, int]]:
    """eval id -> (mean score, mean pass rate, scored runs)."""
    by_eval: dict[int, list[GradeOutcome]] = defaultdict(list)
    for it in _scored(items):
        by_eval[it[0].id].append(it[2])
    return {
        k: (mean([o.score or 0.0 for o in v]), mean([o.pass_rate for o in v]), len(v))
        for k, v in by_eval.items()
    }


def aggregate(
    skill_name: str,
    evals: Sequence[Any],
    outcomes_by_config: Mapping[str, Sequence[Item]],
    *,
    skill_path: str | None = None,
    executor_model: str | None = None,
    analyzer_model: str | None = None,
    timestamp: str | None = None,
    runs_per_configuration: int | None = None,
    simulated: bool = False,
) -> s.Benchmark:
    """benchmark.json for these graded runs; configurations are read by name, never by position."""
    unknown = set(outcomes_by_config) - set(CONFIG_ORDER)
    if unknown:
        raise ValueError(f"unknown configuration(s) {sorted(unknown)}; use with_skill or without_skill")
    order = {e.id: i for i, e in enumerate(sorted(evals, key=lambda e: e.id))}
    given = {c: list(outcomes_by_config.get(c) or []) for c in CONFIG_ORDER}
    items: dict[str, list[Item]] = {
        c: [it for it in given[c] if it[2].status != "unscored"] for c in CONFIG_ORDER
    }
    lost = {c: [it for it in given[c] if it[2].status == "unscored"] for c in CONFIG_ORDER}
    summaries = {c: _config_summary(items[c], len(lost[c])) for c in CONFIG_ORDER if given[c]}
    if "with_skill" not in summaries:
        raise ValueError("no with_skill runs to aggregate")
    delta: dict[str, str] = {}
    if "without_skill" in summaries:
        a, b = summaries["with_skill"], summaries["without_skill"]
        for metric in DELTA_FORMATS:
            sa, sb = getattr(a, metric), getattr(b, metric)
            # A side with no scored run has no value, not 0: no difference can be taken from it.
            scored_metric = metric not in ("time_seconds", "tokens")
            if scored_metric and not (_scored_runs(a) and _scored_runs(b)):
                continue
            if sa is not None and sb is not None:
                delta[metric] = delta_string(metric, sa.mean - sb.mean)
    runs = sorted(
        (it for c in CONFIG_ORDER for it in items[c]),
        key=lambda it: (order.get(it[0].id, len(order)), CONFIG_ORDER.index(_config_of(it)), it[1].run_number),
    )
    means = {c: _eval_means(items[c]) for c in CONFIG_ORDER}
    per_eval = []
    for e in sorted(evals, key=lambda e: e.id):
        row: dict[str, Any] = {"eval_id": e.id, "eval_name": e.name}
        for c in CONFIG_ORDER:
            n_all = sum(1 for it in items[c] if it[0].id == e.id)
            n_lost = sum(1 for it in lost[c] if it[0].id == e.id)
            got = means[c].get(e.id)
            row[c] = None if not n_all + n_lost else {
                "mean": round(got[0], 4) if got else None,
                "pass_rate": round(got[1], 4) if got else None,
                "runs": n_all,
                "judge_errors": n_all - (got[2] if got else 0),
                "unscored": n_lost,
            }
        ws, wo = means["with_skill"].get(e.id), means["without_skill"].get(e.id)
        row["delta"] = delta_string("overall_efficiency", ws[0] - wo[0]) if ws and wo else None
        per_eval.append(row)
    notes = analyst_notes(evals, items)
    stamp = timestamp or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return s.Benchmark(
        metadata=s.BenchmarkMetadata(
            skill_name=skill_name,
            skill_path=skill_path,
            executor_model=executor_model,
            analyzer_model=analyzer_model,
            timestamp=stamp,
            evals_run=sorted(e.id for e in evals),
            runs_per_configuration=runs_per_configuration,
            simulated=simulated,
        ),
        runs=[_run_entry(it) for it in runs],
        run_summary=s.RunSummary(
            with_skill=summaries["with_skill"],
            without_skill=summaries.get("without_skill"),
            delta=delta,
        ),
        notes=[n.text for n in notes],
        per_eval=per_eval,
        judge_errors=sum(1 for c in CONFIG_ORDER for it in items[c] if it[2].status == "judge_error"),
        exec_errors=sum(1 for c in CONFIG_ORDER for it in items[c] if it[2].status == "exec_error"),
        unscored=[{"eval_id": it[0].id, "configuration": c, "run_number": int(it[1].run_number),
                   "cause": it[2].error or ""}
                  for c in CONFIG_ORDER
                  for it in sorted(lost[c], key=lambda it: (it[0].id, it[1].run_number))],
    )


# --- analyst notes ------------------------------------------------------------------------------


def _results(item: Item) -> list[tuple[str, bool]]:
    """The expectations a run really evaluated: none for failed or unjudged runs, and not the
    judged ones a gate skipped."""
    if item[2].status in ("exec_error", "judge_error", "unscored"):
        return []
    return [(e.text, e.passed) for e in item[2].grading.expectations if e.evidence != GATE_SKIPPED]


def analyst_notes(evals: Sequence[Any], outcomes_by_config: Mapping[str, Sequence[Item]]) -> list[Note]:
    """Observations a benchmark reader needs, in a fixed order, each tied to an eval and an
    expectation where it has one (the daemon's eval-feedback aggregate counts them)."""
    items = {c: list(outcomes_by_config.get(c) or []) for c in CONFIG_ORDER}
    names = {e.id: e.name for e in evals}
    ids = sorted(names)
    notes: list[Note] = []
    for status, kind, what in (
        ("judge_error", "judge_error", "a judge error, excluded from the means"),
        ("exec_error", "exec_error", "an executor error or a timeout, scored 0"),
        ("gated", "gated", "a failed structural gate, so the judge was skipped"),
    ):
        bad = sorted(
            (it[0].id, _config_of(it), it[1].run_number)
            for c in CONFIG_ORDER for it in items[c] if it[2].status == status
        )
        if bad:
            where = ", ".join(f"eval {i} {c} run {n}" for i, c, n in bad[:10])
            where += f", and {len(bad) - 10} more" if len(bad) > 10 else ""  # not cut silently
            notes.append(Note(kind, None, None, f"{words.plural(len(bad), 'run')} had {what}: {where}"))
    means = {c: _eval_means(items[c]) for c in CONFIG_ORDER}
    for i in ids:
        ws, wo = means["with_skill"].get(i), means["without_skill"].get(i)
        if ws and wo and ws[0] < wo[0]:
            notes.append(Note("skill_hurts", i, None, (
                f"Eval {i} ({names[i]}): the skill hurts - with_skill scores {ws[0]:.2f} on average, "
                f"without_skill {wo[0]:.2f}")))
    per: dict[tuple[int, str], dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for c in CONFIG_ORDER:
        for it in items[c]:
            for text, passed in _results(it):
                per[(it[0].id, c)][text].append(passed)
    for i in ids:
        with_results = per.get((i, "with_skill"), {})
        without_results = per.get((i, "without_skill"), {})
        for text in with_results:
            if text in without_results and all(with_results[text]) and all(without_results[text]):
                notes.append(Note("non_discriminating", i, text, (
                    f"Eval {i}: expectation '{text}' passes in every run of both configurations "
                    "- does not discriminate the skill's value")))
    for i in ids:
        for c in CONFIG_ORDER:
            for text, results in per.get((i, c), {}).items():
                if len(results) >= 2 and len(set(results)) == 2:
                    notes.append(Note("flaky", i, text, (
                        f"Eval {i}: expectation '{text}' is flaky in {c} - passed {sum(results)} "
                        f"of {len(results)} runs")))
    for i in ids:
        runs = [it for it in items["with_skill"]
                if it[0].id == i and it[2].status not in ("exec_error", "unscored")]
        missed = sorted(it[1].run_number for it in runs if getattr(it[1], "skill_invoked", None) is False)
        if missed:
            notes.append(Note("skill_not_invoked", i, None, (
                f"Eval {i}: the skill was never invoked in {len(missed)} of "
                f"{words.plural(len(runs), 'with_skill run')} "
                f"({'run' if len(missed) == 1 else 'runs'} {', '.join(map(str, missed))})")))
    if items["with_skill"] and items["without_skill"]:
        a, b = _config_summary(items["with_skill"]), _config_summary(items["without_skill"])
        dt = delta_string("time_seconds", a.time_seconds.mean - b.time_seconds.mean)
        dk = delta_string("tokens", a.tokens.mean - b.tokens.mean)
        dp = delta_string("pass_rate", a.pass_rate.mean - b.pass_rate.mean)
        notes.append(Note("cost", None, None, (
            f"The skill costs {dt} s and {dk} tokens per run on average, and changes the pass rate "
            f"by {dp}")))
    return notes
