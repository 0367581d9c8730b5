"""benchmark.md: what a person reads first of a benchmark.json, every number taken from it.
Never computes a number of its own: a value missing from benchmark.json is shown as missing."""

from __future__ import annotations

from typing import Any

from optimizer import schemas as s
from optimizer import words


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


def render_markdown(benchmark: s.Benchmark) -> str:
    """benchmark.md: what a person reads first; every number is also in benchmark.json."""
    data = benchmark.model_dump(mode="json")
    meta, rs = data["metadata"], data["run_summary"]
    ws, wo, delta = rs["with_skill"], rs.get("without_skill"), rs.get("delta", {})
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
        f"- Judge errors (excluded from the means): {data.get('judge_errors', 0)}; "
        f"executor errors (scored 0): {data.get('exec_errors', 0)}; unscored runs (our "
        f"infrastructure failed them; excluded, retried): {len(data.get('unscored') or [])}",
        "",
        "## Summary",
        "",
        "| Metric | With skill | Without skill | Delta |",
        "|---|---|---|---|",
    ]
    rows = [
        ("Pass rate", "pass_rate", True, ""),
        ("Overall score", "overall_efficiency", True, ""),
        ("Rubric (normalized)", "rubric_normalized", True, ""),
        ("Time", "time_seconds", False, " s"),
        ("Tokens", "tokens", False, ""),
    ]

    def shown(side: dict | None, key: str, pct: bool, unit: str) -> str:
        if not side:
            return "—"
        if pct and side.get("scored_runs") == 0:
            return "no value (no run could be scored)"
        return _cell(side.get(key), pct, unit)

    for label, key, pct, unit in rows:
        if ws.get(key) is None and (wo or {}).get(key) is None:
            continue
        lines.append(
            f"| {label} | {shown(ws, key, pct, unit)} | {shown(wo, key, pct, unit)} | "
            f"{delta.get(key, '—')} |"
        )
    cons = [
        ("—" if x is None or x.get("consistency") is None else f"{x['consistency']:.2f}")
        for x in (ws, wo)
    ]
    lines += [
        f"| Consistency | {cons[0]} | {cons[1]} | |",
        "",
        "## Per eval (mean score)",
        "",
        "| Eval | With skill | Without skill | Delta |",
        "|---|---|---|---|",
    ]
    for row in data.get("per_eval", []):

        def side(x: dict | None) -> str:
            if not x:
                return "—"
            m = "—" if x["mean"] is None else f"{x['mean']:.2f}"
            err = f", {words.plural(x['judge_errors'], 'judge error')}" if x["judge_errors"] else ""
            err += f", {x['unscored']} unscored" if x.get("unscored") else ""
            return f"{m} ({_runs(x['runs'])}{err})"

        lines.append(
            f"| {row['eval_id']}: {row['eval_name']} | {side(row.get('with_skill'))} | "
            f"{side(row.get('without_skill'))} | {row.get('delta') or '—'} |"
        )
    if data.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in data["notes"]]
    if data.get("unscored"):
        lines += ["", "## Unscored runs (excluded; retried on the next pass or resume)", ""]
        lines += [
            f"- eval {u['eval_id']} {u['configuration']} run {u['run_number']}: {u['cause']}"
            for u in data["unscored"]
        ]
    return "\n".join(lines) + "\n"


def _runs(n: Any) -> str:
    return words.plural(n, "run") if isinstance(n, int) else "? runs"
