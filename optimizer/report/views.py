"""Terminal views of a run folder: `status`, `lineage`, `show`, `diff`, as data (for --json) and as
rich output. Never writes to the run folder, and never prints model-written text as rich markup."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from optimizer.daemon import running_pid
from optimizer.errors import BadInput
from optimizer.inputs import skill as skills
from optimizer.report import read
from optimizer.store.files import Workspace

COLOURS = {"won": "green", "lost": "red", "tie": "yellow", "baseline": "blue"}


def _show(console: Console, *items: Any) -> None:
    # The CLI's console soft-wraps (no cropping of plain lines); panels, trees and tables must
    # still fold long model-written text inside their borders rather than crop it.
    console.print(*items, soft_wrap=False)


def num(x: Any, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def signed(x: Any, digits: int = 3) -> str:
    return "—" if x is None else f"{x:+.{digits}f}"


def pct(x: Any) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def money(x: Any) -> str:
    return "—" if x is None else f"${x:.2f}" if x >= 0.01 or x == 0 else f"${x:.4f}"


def duration(seconds: Any) -> str:
    if seconds is None:
        return "—"
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def interval(ci: Any) -> str:
    return "" if not ci else f" [{signed(ci[0])}, {signed(ci[1])}]"


# -- status ------------------------------------------------------------------------------------


def status(run_dir: Path) -> dict:
    """Where a run is, from state.db opened read-only; safe while its daemon runs."""
    ws = Workspace(run_dir)
    if not ws.state_db.is_file():
        raise BadInput(f"{run_dir}: not a run folder (no state.db); start one with `optimizer run SKILL_DIR`.")
    data = read.load(run_dir)
    run, settings = data.run, data.settings
    pid = running_pid(ws)
    best = next((n for n in data.nodes if n["is_best"]), None)
    budget = (settings.get("budget") or {})
    deadline = budget.get("deadline") or None
    iterations = data.iterations
    return {
        "run_dir": str(run_dir), "run_id": run.get("id"), "skill_name": run.get("skill_name"),
        "target": run.get("target"), "simulated": data.simulated,
        "running": pid is not None, "pid": pid,
        "status": run.get("status"), "stage": run.get("stage"),
        "started_at": run.get("started_at"), "finished_at": run.get("finished_at"),
        "iteration": max((i["number"] for i in iterations), default=0),
        "iterations_done": sum(1 for i in iterations if i.get("finished_at")),
        "max_iterations": (settings.get("loop") or {}).get("max_iterations"),
        "versions": len(data.nodes),
        "pending": [n["label"] for n in data.nodes if not n["decision"] and n.get("status") != "failed"],
        "failed": {n["label"]: n.get("error") for n in data.nodes if n.get("status") == "failed"},
        "proposals": read.proposals(iterations),
        "unscored": {"runs": len(data.unscored),
                     "last": data.unscored[-1] if data.unscored else None},
        "current_best": None if best is None else {
            "version": best["label"], "score": best["score"], "pass_rate": best["pass_rate"]},
        "spent_usd": round(data.ledger.get("spent_usd") or 0.0, 6),
        "budget_usd": budget.get("usd"),
        "calls": data.ledger.get("calls", 0), "cache_hits": data.ledger.get("cache_hits", 0),
        "saved_usd": round(data.ledger.get("saved_usd") or 0.0, 6),
        "deadline": deadline, "seconds_left": _seconds_left(deadline),
        "last_error": run.get("last_error"), "stop_reason": run.get("stop_reason"),
        "test": read.parse_json(run.get("test_json")),
        "settings": read.provenance(ws.run_toml),
        "resumes": len(data.resumes),
        "last_resumed": data.resumes[-1] if data.resumes else None,
    }


def _seconds_left(deadline: str | None) -> float | None:
    if not deadline:
        return None
    try:
        at = datetime.fromisoformat(deadline.replace("Z", "+00:00"))
    except ValueError:
        return None
    at = at if at.tzinfo else at.astimezone()  # a naive deadline is local time
    return round((at - datetime.now(UTC)).total_seconds(), 1)


def _state_line(info: dict) -> Text:
    state = info.get("status") or "unknown"
    if info["running"]:
        return Text(f"running (pid {info['pid']})", style="green")
    if state == "running":  # the row says running but nobody holds the lock
        return Text("not running: the daemon died without stopping; continue with `optimizer resume`",
                    style="red")
    return Text(state, style="red" if state == "failed" else "")


def print_status(console: Console, info: dict) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()

    def row(key: str, value: Any) -> None:
        grid.add_row(key, value if isinstance(value, Text) else Text(str(value)))

    title = f"{info.get('skill_name') or '?'}  {info['run_dir']}"
    row("run", title + ("  [SIMULATED]" if info["simulated"] else ""))
    row("state", _state_line(info))
    row("stage", info.get("stage") or "—")
    it = f"{info['iteration']} ({info['iterations_done']} done"
    row("iteration", it + (f" of {info['max_iterations']})" if info.get("max_iterations") is not None else ")"))
    pending = f", pending: {', '.join(info['pending'])}" if info["pending"] else ""
    row("versions", f"{info['versions']}{pending}")
    if info["proposals"]["proposals"]:
        row("proposals", read.proposals_line(info["proposals"]))
    if info["unscored"]["runs"]:
        last = info["unscored"]["last"]
        row("unscored", Text(f"{info['unscored']['runs']} runs our infrastructure failed (left out of "
                             f"every mean, retried on resume); e.g. {last['key']}: {last['error']}",
                             style="yellow"))
    for label, error in info["failed"].items():
        row("failed", Text(f"{label}: {error} (the run went on without it)", style="red"))
    best = info.get("current_best")
    if best:
        row("current best", Text(f"★ {best['version']}  score {num(best['score'])}  pass rate {pct(best['pass_rate'])}",
                                 style="bold green"))
    budget = info.get("budget_usd")
    row("spent", f"{money(info['spent_usd'])}" + (f" of {money(budget)}" if budget else ""))
    row("ledger", f"{info['calls']} calls paid; {info['cache_hits']} served from the ledger "
                  f"(saved {money(info['saved_usd'])})")
    if info.get("deadline"):
        left = info.get("seconds_left")
        row("deadline", f"{info['deadline']} ({'passed' if left is not None and left <= 0 else duration(left) + ' left'})")
    if info.get("last_resumed"):
        row("resumed", _resumed_line(info))
    if info.get("stop_reason"):
        row("stopped", info["stop_reason"])
    if info.get("last_error"):
        row("last error", Text(info["last_error"], style="red"))
    test = info.get("test")
    if test:
        row("sealed test", _test_line(test))
    _show(console, grid)
    if info["settings"]:
        table = Table(title="settings that are not defaults", title_justify="left", show_edge=False)
        for col in ("setting", "value", "from"):
            table.add_column(col)
        for s in info["settings"]:
            table.add_row(Text(s["key"]), Text(repr(s["value"]) if isinstance(s["value"], str) else str(s["value"])),
                          Text(s["source"]))
        _show(console, table)


def _resumed_line(info: dict) -> str:
    last = info["last_resumed"]
    times = f"{info['resumes']} times, last " if info["resumes"] > 1 else ""
    changed = last.get("changed") or {}
    what = ", ".join(f"{key} {before!r} → {after!r}" for key, (before, after) in changed.items())
    return f"{times}at {last['at']}: " + (f"changed {what}" if what else "no setting changed")


def _test_line(test: dict) -> Text:
    if test.get("incomplete"):
        return Text(f"incomplete: {test['incomplete']}", style="yellow")
    versions = test.get("versions") or {}
    parts = [f"{label} {num((v or {}).get('score'))}" for label, v in versions.items()]
    delta = f"; Δ {signed(test.get('delta'))}" if test.get("delta") is not None else ""
    return Text(f"evals {test.get('evals')}: " + ", ".join(parts) + delta)


# -- lineage -----------------------------------------------------------------------------------


def lineage(run_dir: Path) -> dict:
    """The version tree as JSON-able data: each node with its children."""
    data = read.load(run_dir)
    nodes = {n["label"]: {**n, "children": []} for n in data.nodes}
    roots = []
    for n in nodes.values():
        parent = nodes.get(n.get("parent") or "")
        (parent["children"] if parent is not None and parent is not n else roots).append(n)
    return {
        "run": {"id": data.run.get("id") or data.root.name, "skill_name": data.run.get("skill_name"),
                "source": data.source, "form": data.form, "simulated": data.simulated,
                "current_best": data.current_best, "status": data.run.get("status"),
                "stop_reason": data.run.get("stop_reason")},
        "proposals": read.proposals(data.iterations),
        "count": len(nodes),
        "tree": roots,
    }


def _node_text(n: dict) -> Text:
    text = Text(overflow="fold")
    if n.get("is_best"):
        text.append("★ ", style="bold yellow")
    text.append(n["label"], style="bold")
    decision = n.get("decision")
    if n.get("status") == "failed":
        text.append(f"  failed: {n.get('error')}", style="red")
    elif decision is None:
        text.append(f"  pending ({n.get('status') or 'proposed'})", style="dim")
    else:
        text.append(f"  {decision}", style=COLOURS.get(decision, ""))
        if n.get("stage") == "screening":
            text.append(" at screening", style="dim")
    if n.get("delta") is not None:
        text.append(f"  Δ {signed(n['delta'])}{interval(n.get('ci'))}")
    text.append(f"  score {num(n.get('score'))}")
    if n.get("score_ci"):
        text.append(f" [{num(n['score_ci'][0])}, {num(n['score_ci'][1])}]", style="dim")
    text.append(f"  pass {pct(n.get('pass_rate'))}")
    text.append(f"  {money(n.get('cost_usd'))}  {duration(n.get('seconds'))}", style="dim")
    if n.get("summary"):
        text.append(f"  {n['summary']}", style="italic")
    return text


def print_lineage(console: Console, tree: dict) -> None:
    run = tree["run"]
    head = Text(f"{run.get('skill_name') or run['id']} lineage ({tree['count']} versions, from {run['source']})",
                style="bold")
    if run["simulated"]:
        head.append("  SIMULATED", style="bold magenta")
    if run["form"] == "versions":
        _show(console, head)
        table = Table(show_edge=False)
        for col in ("iteration", "description", "pass rate", "precision", "recall"):
            table.add_column(col)
        for n in _flatten(tree["tree"]):
            table.add_row(Text(str(n.get("iteration"))), Text(n.get("description") or ""), Text(pct(n.get("pass_rate"))),
                          Text(pct(n.get("precision"))), Text(pct(n.get("recall"))))
        _show(console, table)
        return
    root = Tree(head)
    stack = [(root, n) for n in reversed(tree["tree"])]
    while stack:  # iterative, so a 200-deep chain of wins cannot hit the recursion limit
        parent, n = stack.pop()
        branch = parent.add(_node_text(n))
        stack.extend((branch, c) for c in reversed(n["children"]))
    _show(console, root)
    if tree["proposals"]["proposals"]:
        _show(console, Text(read.proposals_line(tree["proposals"]), style="dim"))
    if run.get("stop_reason"):
        _show(console, Text(f"stopped: {run['stop_reason']}", style="dim"))


def _flatten(nodes: list[dict]) -> list[dict]:
    out, stack = [], list(reversed(nodes))
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.get("children", [])))
    return out


# -- show / diff -------------------------------------------------------------------------------


def _print_diff_text(console: Console, diff: str | None) -> None:
    if diff is None:
        _show(console, Text("(no snapshot to diff)", style="dim"))
    elif not diff.strip():
        _show(console, Text("(no file differs)", style="dim"))
    else:
        _show(console, Syntax(diff, "diff", theme="ansi_dark", word_wrap=True))


def print_version(console: Console, run_dir: Path, version: str) -> None:
    data = read.load(run_dir)
    n = data.node(version)
    ws = data.ws
    folder = ws.version(version)
    console.rule(Text(f"{version}  ←  {n.get('parent') or 'none'}", style="bold"))
    _show(console, _node_text(n))
    if n.get("reason"):
        _show(console, Text(n["reason"]))
    proposal = folder / "proposal.md"
    why = read.rationale(proposal.read_text(encoding="utf-8")) if proposal.is_file() else n.get("rationale")
    if why:
        _show(console, Panel(Markdown(why), title="why this change", title_align="left"))
    if n.get("parent"):
        _show(console, Text(f"diff against {n['parent']}", style="bold"))
        _print_diff_text(console, read.version_diff(ws, n["parent"], version))
    _print_benchmark(console, read.read_json(folder / "benchmark.json"))
    _print_selection(console, read.read_json(folder / "selection.json"))
    _print_comparisons(console, read.comparisons(folder, version, n.get("parent")), read.read_json(folder / "analysis.json"))
    fails = read.failing(folder)
    if fails:
        table = Table(title="failing expectations", title_justify="left", show_edge=False)
        for col in ("eval", "expectation", "failed", "evidence"):
            table.add_column(col)
        for f in fails[:20]:
            table.add_row(Text(f["eval_id"]), Text(f["text"]), Text(f"{f['failed']}/{f['runs']}"),
                          Text(f["evidence"]))
        _show(console, table)


def _print_benchmark(console: Console, bench: dict | None) -> None:
    if not isinstance(bench, dict):
        return
    summary = bench.get("run_summary") or {}
    lines = []
    for conf in ("with_skill", "without_skill"):
        s = summary.get(conf) or {}
        oe, pr = s.get("overall_efficiency") or {}, s.get("pass_rate") or {}
        if s:
            ci = f" [{num(oe.get('ci_low'))}, {num(oe.get('ci_high'))}]" if oe.get("ci_low") is not None else ""
            lines.append(f"{conf}: score {num(oe.get('mean'))}{ci}, pass rate {pct(pr.get('mean'))}, "
                         f"{num((s.get('time_seconds') or {}).get('mean'), 1)}s, "
                         f"{num((s.get('tokens') or {}).get('mean'), 0)} tokens")
    if summary.get("delta"):
        lines.append("delta: " + ", ".join(f"{k} {v}" for k, v in summary["delta"].items()))
    _show(console, Text("benchmark", style="bold"))
    _show(console, Text("\n".join(lines)))
    rows = bench.get("per_eval") or []
    if rows:
        table = Table(show_edge=False)
        for col in ("eval", "name", "with_skill", "pass rate", "runs", "judge errors", "without_skill", "Δ"):
            table.add_column(col)
        for r in rows:
            w, wo = r.get("with_skill") or {}, r.get("without_skill") or {}
            table.add_row(Text(str(r.get("eval_id"))), Text(str(r.get("eval_name") or "")), Text(num(w.get("mean"))),
                          Text(pct(w.get("pass_rate"))), Text(str(w.get("runs", "—"))),
                          Text(str(w.get("judge_errors", 0))), Text(num(wo.get("mean"))), Text(str(r.get("delta") or "—")))
        _show(console, table)
    for note in bench.get("notes") or []:
        _show(console, Text(f"• {note}", style="dim"))


def _print_selection(console: Console, sel: dict | None) -> None:
    if not isinstance(sel, dict):
        return
    iv = sel.get("interval") or {}
    comp = sel.get("comparator") or {}
    lines = [f"decision: {sel.get('decision')} at {sel.get('stage', '?')} against {sel.get('parent', '?')}",
             f"Δ {signed(sel.get('delta'))} [{signed(iv.get('low'))}, {signed(iv.get('high'))}] "
             f"({iv.get('confidence', 0.95):.0%}), min effect {sel.get('min_effect', '—')}, "
             f"{sel.get('evals', '—')} evals × {sel.get('runs_per_eval', '—')} runs",
             f"comparator: child {comp.get('child_wins', 0)}, parent {comp.get('parent_wins', 0)}, "
             f"ties {comp.get('ties', 0)}, inconsistent {comp.get('inconsistent', 0)}; swap consistency "
             f"{pct(comp.get('swap_consistency'))}",
             f"judge errors: {sel.get('judge_errors', 0)} of {sel.get('total_runs', '—')} runs"]
    _show(console, Panel(Text("\n".join(lines) + f"\n{sel.get('reason', '')}"), title="selection",
                        title_align="left"))


def _print_comparisons(console: Console, comps: list[dict], analysis: dict | None) -> None:
    parts: list[Any] = []
    if comps:
        won: dict[str, int] = {}
        for c in comps:
            key = c["winner_version"] or c["winner"]
            won[key] = won.get(key, 0) + 1
        parts.append(Text(f"{len(comps)} blind judgements (each pair in both orders), won by: "
                          + ", ".join(f"{k} {v}" for k, v in won.items())))
        for c in sorted(comps, key=lambda c: c["winner"].upper() == "TIE")[:3]:  # decisive first
            who = c["winner_version"] or c["winner"]
            parts.append(Text(f"• {c['name']} ({who}): {c['reasoning'][:300]}"))
    if isinstance(analysis, dict):
        summary = (analysis.get("comparison_summary") or {}).get("comparator_reasoning")
        if summary:
            parts.append(Text(f"analysis: {summary}"))
        for label, key in (("+", "winner_strengths"), ("−", "loser_weaknesses")):
            parts += [Text(f"  {label} {s}") for s in (analysis.get(key) or [])[:4]]
        for s in (analysis.get("improvement_suggestions") or [])[:4]:
            parts.append(Text(f"  → [{s.get('priority')}] {s.get('suggestion')}"))
    if parts:
        _show(console, Panel(Group(*parts), title="comparator and analyzer", title_align="left"))


def print_diff(console: Console, run_dir: Path, va: str, vb: str) -> None:
    data = read.load(run_dir)
    a, b = data.node(va), data.node(vb)
    ws = data.ws
    console.rule(Text(f"{va} → {vb}", style="bold"))
    if ws.skill(va).is_dir() and ws.skill(vb).is_dir():
        _print_diff_text(console, skills.unified_diff(ws.skill(va), ws.skill(vb)))
    else:
        _show(console, Text("(no skill snapshots in this folder to diff)", style="dim"))
    sa, sb = read.per_eval(ws, a), read.per_eval(ws, b)
    table = Table(title="per-eval score", title_justify="left", show_edge=False)
    for col in ("eval", va, vb, "Δ"):
        table.add_column(col)
    for e in sorted(set(sa) | set(sb), key=lambda k: read.natural_key(Path(k))):
        x, y = sa.get(e), sb.get(e)
        table.add_row(Text(e), Text(num(x)), Text(num(y)), Text(signed(None if x is None or y is None else y - x)))
    table.add_row(Text("mean", style="bold"), Text(num(a.get("score"))), Text(num(b.get("score"))),
                  Text(signed(None if a.get("score") is None or b.get("score") is None
                              else b["score"] - a["score"])))
    _show(console, table)
