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

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from optimizer import schemas as s
from optimizer.grade.config_stats import (
    CONFIG_ORDER,
    DELTA_FORMATS,
    Item,
    config_of,
    config_summary,
    delta_string,
    eval_means,
    run_time,
    run_tokens,
)
from optimizer.grade.notes import analyst_notes

if TYPE_CHECKING:
    from optimizer.inputs.evals import Eval


def _run_entry(item: Item) -> s.BenchmarkRun:
    eval, record, outcome = item
    g = outcome.grading
    metrics = g.execution_metrics
    tool_calls = (
        metrics.total_tool_calls
        if metrics
        else sum((getattr(record, "tool_calls", None) or {}).values())
    )
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
            time_seconds=round(run_time(item), 3),
            tokens=run_tokens(item),
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


def _configuration(item: Item) -> s.Configuration:
    config = config_of(item)
    if config not in CONFIG_ORDER:  # aggregate() has sorted the runs by CONFIG_ORDER.index already
        raise ValueError(f"unknown configuration {config!r}; use with_skill or without_skill")
    return config


def _scored_runs(summary: s.ConfigSummary) -> int:
    extra = summary.model_extra
    assert extra is not None  # output models allow extra fields, so pydantic always keeps this dict
    return extra["scored_runs"]


class Provenance(TypedDict, total=False):
    """Where the runs come from, as benchmark.json's metadata records it: aggregate()'s keywords,
    each optional (the timestamp is now when not given)."""

    skill_path: str | None
    executor_model: str | None
    analyzer_model: str | None
    timestamp: str | None
    runs_per_configuration: int | None
    simulated: bool


class EvalSide(TypedDict):
    """One configuration's cell of a per_eval row: means over its scored runs, and its counts."""

    mean: float | None
    pass_rate: float | None
    runs: int
    judge_errors: int
    unscored: int


class PerEvalRow(TypedDict):
    """One row of benchmark.json's per_eval; a side is None when the eval has no run there."""

    eval_id: int
    eval_name: str
    with_skill: EvalSide | None
    without_skill: EvalSide | None
    delta: str | None


class UnscoredRun(TypedDict):
    """One entry of benchmark.json's unscored list: a run in no mean, and why."""

    eval_id: int
    configuration: s.Configuration
    run_number: int
    cause: str


# Each configuration's runs, read by name.
_ByConfig = Mapping[str, Sequence[Item]]


def aggregate(
    skill_name: str,
    evals: Sequence[Any],
    outcomes_by_config: Mapping[str, Sequence[Item]],
    **provenance: Unpack[Provenance],
) -> s.Benchmark:
    """benchmark.json for these graded runs; configurations are read by name, never by position."""
    if stray := sorted(set(provenance) - set(Provenance.__annotations__)):
        raise TypeError(f"aggregate() got unexpected keyword arguments {stray}")  # as a signature
    unknown = set(outcomes_by_config) - set(CONFIG_ORDER)
    if unknown:
        raise ValueError(
            f"unknown configuration(s) {sorted(unknown)}; use with_skill or without_skill"
        )
    order = {e.id: i for i, e in enumerate(sorted(evals, key=lambda e: e.id))}
    given = {c: list(outcomes_by_config.get(c) or []) for c in CONFIG_ORDER}
    items: dict[str, list[Item]] = {
        c: [it for it in given[c] if it[2].status != "unscored"] for c in CONFIG_ORDER
    }
    lost: dict[str, list[Item]] = {
        c: [it for it in given[c] if it[2].status == "unscored"] for c in CONFIG_ORDER
    }
    summaries = {c: config_summary(items[c], len(lost[c])) for c in CONFIG_ORDER if given[c]}
    if "with_skill" not in summaries:
        raise ValueError("no with_skill runs to aggregate")
    delta = _delta(summaries)
    runs = _sorted_runs(order, items)
    per_eval = _per_eval(evals, items, lost)
    notes = analyst_notes(evals, items)
    metadata = _metadata(skill_name, evals, provenance)
    return s.Benchmark(
        metadata=metadata,
        runs=[_run_entry(it) for it in runs],
        run_summary=s.RunSummary(
            with_skill=summaries["with_skill"],
            without_skill=summaries.get("without_skill"),
            delta=delta,
        ),
        notes=[n.text for n in notes],
        per_eval=per_eval,
        judge_errors=sum(
            1 for c in CONFIG_ORDER for it in items[c] if it[2].status == "judge_error"
        ),
        exec_errors=sum(1 for c in CONFIG_ORDER for it in items[c] if it[2].status == "exec_error"),
        unscored=_unscored(lost),
    )


def _delta(summaries: Mapping[s.Configuration, s.ConfigSummary]) -> dict[str, str]:
    """with_skill minus without_skill, metric by metric, as benchmark.json writes it; empty
    without a baseline."""
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
    return delta


def _sorted_runs(order: Mapping[int, int], items: _ByConfig) -> list[Item]:
    """Every run of both configurations by eval (`order`: eval id -> place), configuration and
    run number, so no list or folder order reaches benchmark.json."""
    return sorted(
        (it for c in CONFIG_ORDER for it in items[c]),
        key=lambda it: (
            order.get(it[0].id, len(order)),
            CONFIG_ORDER.index(config_of(it)),
            it[1].run_number,
        ),
    )


def _per_eval(evals: Sequence[Eval], items: _ByConfig, lost: _ByConfig) -> list[PerEvalRow]:
    """One row per eval, by id: each configuration's means and counts, and the difference of the
    mean scores when both have one."""
    means = {c: eval_means(items[c]) for c in CONFIG_ORDER}
    per_eval = []
    for e in sorted(evals, key=lambda e: e.id):
        sides = {c: _eval_side(e.id, items[c], lost[c], means[c]) for c in CONFIG_ORDER}
        ws, wo = means["with_skill"].get(e.id), means["without_skill"].get(e.id)
        per_eval.append(
            PerEvalRow(
                eval_id=e.id,
                eval_name=e.name,
                with_skill=sides["with_skill"],
                without_skill=sides["without_skill"],
                delta=delta_string("overall_efficiency", ws[0] - wo[0]) if ws and wo else None,
            )
        )
    return per_eval


def _eval_side(
    eval_id: int,
    items: Sequence[Item],
    lost: Sequence[Item],
    means: Mapping[int, tuple[float, float, int]],
) -> EvalSide | None:
    """One configuration's cell of an eval's row; None when the eval has no run there at all."""
    n_all = sum(1 for it in items if it[0].id == eval_id)
    n_lost = sum(1 for it in lost if it[0].id == eval_id)
    got = means.get(eval_id)
    return (
        None
        if not n_all + n_lost
        else EvalSide(
            mean=round(got[0], 4) if got else None,
            pass_rate=round(got[1], 4) if got else None,
            runs=n_all,
            judge_errors=n_all - (got[2] if got else 0),
            unscored=n_lost,
        )
    )


def _unscored(lost: _ByConfig) -> list[UnscoredRun]:
    """The unscored runs, by configuration, eval and run number, each with its cause."""
    return [
        UnscoredRun(
            eval_id=it[0].id,
            configuration=c,
            run_number=int(it[1].run_number),
            cause=it[2].error or "",
        )
        for c in CONFIG_ORDER
        for it in sorted(lost[c], key=lambda it: (it[0].id, it[1].run_number))
    ]


def _metadata(
    skill_name: str, evals: Sequence[Eval], provenance: Provenance
) -> s.BenchmarkMetadata:
    """benchmark.json's metadata: the skill, where the runs come from, when, and which evals."""
    stamp = provenance.get("timestamp") or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return s.BenchmarkMetadata(
        skill_name=skill_name,
        skill_path=provenance.get("skill_path"),
        executor_model=provenance.get("executor_model"),
        analyzer_model=provenance.get("analyzer_model"),
        timestamp=stamp,
        evals_run=sorted(e.id for e in evals),
        runs_per_configuration=provenance.get("runs_per_configuration"),
        simulated=provenance.get("simulated", False),
    )
