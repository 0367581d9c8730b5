"""benchmark.md: what a person reads first of a benchmark.json, every number taken from it.
Never computes a number of its own: a value missing from benchmark.json is shown as missing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Required, TypedDict

from optimizer import schemas as s
from optimizer import words
from optimizer.schemas import JsonObject

if TYPE_CHECKING:
    from optimizer.grade.aggregate import EvalSide, PerEvalRow


def _cell(st: Any, pct: bool = False, unit: str = "") -> str:
    if st is None:
        return "—"
    d = st if isinstance(st, dict) else st.model_dump()
    fmt = (lambda v: f"{v * 100:.0f}%") if pct else (lambda v: f"{v:,.1f}{unit}")
    text = f"{fmt(d['mean'])} ± {fmt(d['stddev'])}"
    if "ci_low" in d and d["ci_low"] != d["ci_high"]:
        # A wide interval reads as precise unless the reader sees how few evals it rests on.
        n = f", n={d['ci_evals']} evals" if d.get("ci_evals") else ""
        text += f" (95% CI {fmt(d['ci_low'])}–{fmt(d['ci_high'])}{n})"
    return text


class _Metadata(TypedDict, total=False):
    """benchmark.json's metadata, as the header reads it."""

    skill_name: Required[str]
    timestamp: Required[str]
    evals_run: Required[list[int | str]]
    simulated: bool
    executor_model: str | None
    analyzer_model: str | None
    runs_per_configuration: int | None


class _RunSummary(TypedDict, total=False):
    """benchmark.json's run_summary, as the summary table reads it: each side's stats by name."""

    with_skill: Required[JsonObject]
    without_skill: JsonObject | None
    delta: Mapping[str, str]


def render_markdown(benchmark: s.Benchmark) -> str:
    """benchmark.md: what a person reads first; every number is also in benchmark.json."""
    data = benchmark.model_dump(mode="json")
    lines = _header(
        data["metadata"],
        data.get("judge_errors", 0),
        data.get("exec_errors", 0),
        len(data.get("unscored") or []),
    )
    lines += _summary(data["run_summary"])
    lines += _per_eval(data.get("per_eval", []))
    if data.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in data["notes"]]
    if data.get("unscored"):
        lines += ["", "## Unscored runs (excluded; retried on the next pass or resume)", ""]
        lines += [
            f"- eval {u['eval_id']} {u['configuration']} run {u['run_number']}: {u['cause']}"
            for u in data["unscored"]
        ]
    return "\n".join(lines) + "\n"


def _header(meta: _Metadata, judge_errors: int, exec_errors: int, unscored: int) -> list[str]:
    """The title, a banner when the runs were simulated, and what was run, when, and how many
    runs failed or went unscored."""
    lines = [f"# Skill benchmark: {meta['skill_name']}", ""]
    if meta.get("simulated"):
        lines += [
            "**SIMULATION**: these results come from the offline simulator, not a real model.",
            "",
        ]
    lines += [
        f"- Executor model: {meta.get('executor_model') or '—'}; grader: {meta.get('analyzer_model') or '—'}",
        f"- Date: {meta['timestamp']}",
        f"- Evals: {', '.join(map(str, meta['evals_run']))} "
        f"({_runs(meta.get('runs_per_configuration'))} per configuration)",
        f"- Judge errors (excluded from the means): {judge_errors}; "
        f"executor errors (scored 0): {exec_errors}; unscored runs (our "
        f"infrastructure failed them; excluded, retried): {unscored}",
        "",
    ]
    return lines


# The summary table's rows: label, stat name, shown as a percentage, unit.
_SUMMARY_ROWS = (
    ("Pass rate", "pass_rate", True, ""),
    ("Overall score", "overall_efficiency", True, ""),
    ("Rubric (normalized)", "rubric_normalized", True, ""),
    ("Time", "time_seconds", False, " s"),
    ("Tokens", "tokens", False, ""),
)


def _summary(rs: _RunSummary) -> list[str]:
    """The summary table: each metric either side has, both sides and their delta, then the
    consistency of each side."""
    ws, wo, delta = rs["with_skill"], rs.get("without_skill"), rs.get("delta", {})
    lines = [
        "## Summary",
        "",
        "| Metric | With skill | Without skill | Delta |",
        "|---|---|---|---|",
    ]
    for label, key, pct, unit in _SUMMARY_ROWS:
        if ws.get(key) is None and (wo or {}).get(key) is None:
            continue
        lines.append(
            f"| {label} | {_shown(ws, key, pct, unit)} | {_shown(wo, key, pct, unit)} | "
            f"{delta.get(key, '—')} |"
        )
    cons = [
        ("—" if x is None or x.get("consistency") is None else f"{x['consistency']:.2f}")
        for x in (ws, wo)
    ]
    lines.append(f"| Consistency | {cons[0]} | {cons[1]} | |")
    return lines


def _shown(side: JsonObject | None, key: str, pct: bool, unit: str) -> str:
    """One side's cell of the summary table; a score of a side with no scored run has no value,
    not 0."""
    if not side:
        return "—"
    if pct and side.get("scored_runs") == 0:
        return "no value (no run could be scored)"
    return _cell(side.get(key), pct, unit)


def _per_eval(rows: Sequence[PerEvalRow]) -> list[str]:
    """The per-eval table: each side's mean score and runs, and the delta of the means."""
    lines = [
        "",
        "## Per eval (mean score)",
        "",
        "| Eval | With skill | Without skill | Delta |",
        "|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['eval_id']}: {row['eval_name']} | {_side(row.get('with_skill'))} | "
            f"{_side(row.get('without_skill'))} | {row.get('delta') or '—'} |"
        )
    return lines


def _side(x: EvalSide | None) -> str:
    """One side's cell of the per-eval table: its mean, its runs, and those in no mean."""
    if not x:
        return "—"
    m = "—" if x["mean"] is None else f"{x['mean']:.2f}"
    err = f", {words.plural(x['judge_errors'], 'judge error')}" if x["judge_errors"] else ""
    err += f", {x['unscored']} unscored" if x.get("unscored") else ""
    return f"{m} ({_runs(x['runs'])}{err})"


def _runs(n: Any) -> str:
    return words.plural(n, "run") if isinstance(n, int) else "? runs"
