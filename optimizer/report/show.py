"""`optimizer show` and `optimizer diff`: one version (its change, benchmark, selection numbers and
comparisons) and the difference of two. Never writes to the run folder."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from optimizer import words
from optimizer.grade.preview import natural_key
from optimizer.inputs import skill as skills
from optimizer.report import confinement, folders, read
from optimizer.report.caveats import SCORE, SCORE_LEVEL, bounded
from optimizer.report.format import emit, interval, num, pct, readable, signed
from optimizer.report.tree import node_text
from optimizer.report.view import RunView


def _print_diff_text(console: Console, diff: str | None) -> None:
    if diff is None:
        emit(console, Text("(no snapshot to diff)", style="dim"))
    elif not diff.strip():
        emit(console, Text("(no file differs)", style="dim"))
    else:
        emit(console, Syntax(diff, "diff", theme="ansi_dark", word_wrap=True))


def print_version(console: Console, run_dir: Path, version: str) -> None:
    data = read.load(run_dir)
    n = data.node(version)
    ws = data.ws
    folder = ws.version(version)
    console.rule(Text(f"{version}  ←  {n.parent or 'none'}", style="bold"))
    emit(console, node_text(n.shown()))
    box = confinement.summary(run_dir, version)
    emit(
        console,
        Text(
            f"sandbox: {confinement.describe(box)}", style="bold red" if box["unconfined"] else ""
        ),
    )
    if n.reason:
        emit(console, Text(n.reason))
    proposal = folder / "proposal.md"
    why = (
        folders.rationale(proposal.read_text(encoding="utf-8"))
        if proposal.is_file()
        else n.rationale
    )
    if why:
        emit(console, Panel(Markdown(why), title="why this change", title_align="left"))
    if n.parent:
        emit(console, Text(f"diff against {n.parent}", style="bold"))
        _print_diff_text(console, folders.version_diff(ws, n.parent, version))
    _print_benchmark(console, read.read_json(folder / "benchmark.json"))
    _print_selection(console, read.read_json(folder / "selection.json"))
    _print_comparisons(
        console,
        folders.comparisons(folder, version, n.parent),
        read.read_json(folder / "analysis.json"),
    )
    fails = folders.failing(folder)
    if fails:
        table = Table(title="failing expectations", title_justify="left", show_edge=False)
        for col in ("eval", "expectation", "failed", "evidence"):
            table.add_column(col)
        for f in fails[:20]:
            table.add_row(
                Text(f["eval_id"]),
                Text(f["text"]),
                Text(f"{f['failed']}/{f['runs']}"),
                Text(f["evidence"]),
            )
        emit(console, table)


def _print_benchmark(console: Console, bench: dict | None) -> None:
    if not isinstance(bench, dict):
        return
    summary = bench.get("run_summary") or {}
    lines = []
    for conf in ("with_skill", "without_skill"):
        s = summary.get(conf) or {}
        oe, pr = s.get("overall_efficiency") or {}, s.get("pass_rate") or {}
        if s:
            ci = interval(
                bounded([oe.get("ci_low"), oe.get("ci_high")], SCORE),
                oe.get("ci_evals"),
                sign=False,
                level=SCORE_LEVEL,
            )
            lines.append(
                f"{conf}: score {num(oe.get('mean'))}{ci}, pass rate {pct(pr.get('mean'))}, "
                f"{num((s.get('time_seconds') or {}).get('mean'), 1)}s, "
                f"{num((s.get('tokens') or {}).get('mean'), 0)} tokens"
            )
    if summary.get("delta"):
        lines.append("delta: " + ", ".join(f"{k} {v}" for k, v in summary["delta"].items()))
    emit(console, Text("benchmark", style="bold"))
    emit(console, Text("\n".join(lines)))
    rows = bench.get("per_eval") or []
    if rows:
        table = Table(show_edge=False)
        for col in (
            "eval",
            "name",
            "with_skill",
            "pass rate",
            "runs",
            "judge errors",
            "without_skill",
            "Δ",
        ):
            table.add_column(col)
        for r in rows:
            w, wo = r.get("with_skill") or {}, r.get("without_skill") or {}
            table.add_row(
                Text(str(r.get("eval_id"))),
                Text(str(r.get("eval_name") or "")),
                Text(num(w.get("mean"))),
                Text(pct(w.get("pass_rate"))),
                Text(str(w.get("runs", "—"))),
                Text(str(w.get("judge_errors", 0))),
                Text(num(wo.get("mean"))),
                Text(str(r.get("delta") or "—")),
            )
        emit(console, table)
    for note in bench.get("notes") or []:
        emit(console, Text(f"• {note}", style="dim"))


def _print_selection(console: Console, sel: dict | None) -> None:
    if not isinstance(sel, dict):
        return
    iv = sel.get("interval") or {}
    comp = sel.get("comparator") or {}
    lines = [
        f"decision: {sel.get('decision')} at {sel.get('stage', '?')} against {sel.get('parent', '?')}"
    ]
    # A child stopped at screening has no interval, comparator or run count: a line of dashes
    # ("Δ — [—, —] 95% CI, min effect —, — evals × — runs") said nothing its reason does not.
    if sel.get("delta") is not None:
        lines.append(
            f"Δ {signed(sel.get('delta'))} [{signed(iv.get('low'))}, {signed(iv.get('high'))}] "
            f"{words.ci(iv.get('confidence') or 0.95)}, min effect {sel.get('min_effect', '—')}, "
            f"{sel.get('evals', '—')} evals × {sel.get('runs_per_eval', '—')} runs"
        )
    if comp:
        lines.append(
            f"comparator: child {comp.get('child_wins', 0)}, parent {comp.get('parent_wins', 0)}, "
            f"ties {comp.get('ties', 0)}, inconsistent {comp.get('inconsistent', 0)}; swap "
            f"consistency {pct(comp.get('swap_consistency'))}"
        )
    if sel.get("total_runs") is not None:
        lines.append(f"judge errors: {sel.get('judge_errors', 0)} of {sel['total_runs']} runs")
    emit(
        console,
        Panel(
            Text("\n".join(lines) + f"\n{sel.get('reason', '')}"),
            title="selection",
            title_align="left",
        ),
    )


def _print_comparisons(console: Console, comps: list[dict], analysis: dict | None) -> None:
    parts: list[Any] = []
    if comps:
        won: dict[str, int] = {}
        for c in comps:
            key = c["winner_version"] or c["winner"]
            won[key] = won.get(key, 0) + 1
        parts.append(
            Text(
                f"{len(comps)} blind judgements (each pair in both orders), won by: "
                + ", ".join(f"{k} {v}" for k, v in won.items())
            )
        )
        for c in sorted(comps, key=lambda c: c["winner"].upper() == "TIE")[:3]:  # decisive first
            who = c["winner_version"] or c["winner"]
            parts.append(Text(f"• {c['name']} ({who}): {readable(c['reasoning'], 300)}"))
    if isinstance(analysis, dict):
        summary = (analysis.get("comparison_summary") or {}).get("comparator_reasoning")
        if summary:  # the analyzer may quote the tagged comparisons it was given, cut short
            parts.append(Text(f"analysis: {readable(summary)}"))
        for label, key in (("+", "winner_strengths"), ("−", "loser_weaknesses")):
            parts += [Text(f"  {label} {s}") for s in (analysis.get(key) or [])[:4]]
        for s in (analysis.get("improvement_suggestions") or [])[:4]:
            parts.append(Text(f"  → [{s.get('priority')}] {s.get('suggestion')}"))
    if parts:
        emit(console, Panel(Group(*parts), title="comparator and analyzer", title_align="left"))


def print_patch(stream: IO[str], notes: Console, run_dir: Path, va: str, vb: str) -> None:
    """What `diff` writes when its output is a file or a pipe: the raw unified diff alone (git
    style, a/ and b/), which `patch -p1` and `git apply` take as it is; rich would wrap its lines
    at 80 columns. The per-eval scores go to `notes` (stderr)."""
    data = read.load(run_dir)
    data.node(va), data.node(vb)  # an unknown version is bad input, before anything is written
    ws = data.ws
    if ws.skill(va).is_dir() and ws.skill(vb).is_dir():
        diff = skills.unified_diff(ws.skill(va), ws.skill(vb))
        stream.write(diff)
        if not diff:
            emit(notes, Text("(no file differs)"))
    else:
        emit(notes, Text("(no skill snapshots in this folder to diff)"))
    print_scores(notes, data, va, vb)


def print_diff(console: Console, run_dir: Path, va: str, vb: str) -> None:
    data = read.load(run_dir)
    data.node(va), data.node(vb)
    ws = data.ws
    console.rule(Text(f"{va} → {vb}", style="bold"))
    if ws.skill(va).is_dir() and ws.skill(vb).is_dir():
        _print_diff_text(console, skills.unified_diff(ws.skill(va), ws.skill(vb)))
    else:
        emit(console, Text("(no skill snapshots in this folder to diff)", style="dim"))
    print_scores(console, data, va, vb)


def print_scores(console: Console, data: RunView, va: str, vb: str) -> None:
    """The per-eval scores of two versions and their differences, with the means."""
    a, b = data.node(va), data.node(vb)
    ws = data.ws
    sa, sb = read.per_eval(ws, a), read.per_eval(ws, b)
    table = Table(title="per-eval score", title_justify="left", show_edge=False)
    for col in ("eval", va, vb, "Δ"):
        table.add_column(col)
    for e in sorted(set(sa) | set(sb), key=lambda k: natural_key(Path(k))):
        x, y = sa.get(e), sb.get(e)
        table.add_row(
            Text(e),
            Text(num(x)),
            Text(num(y)),
            Text(signed(None if x is None or y is None else y - x)),
        )
    table.add_row(
        Text("mean", style="bold"),
        Text(num(a.score)),
        Text(num(b.score)),
        Text(signed(None if a.score is None or b.score is None else b.score - a.score)),
    )
    emit(console, table)
