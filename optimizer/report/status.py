"""`optimizer status`: where a run is, as data (--json) and as rich output, from state.db opened
read-only; safe while its daemon runs. Never writes to the run folder."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from optimizer import words
from optimizer.errors import BadInput
from optimizer.execute import INTERNAL_ERROR
from optimizer.grow import outlook
from optimizer.report import adopted, caveats, confinement, finish, folders, read, sealed, spend
from optimizer.report.format import duration, emit, interval, money, num, pct, signed
from optimizer.report.info import (
    Defects,
    StatusFound,
    StatusInfo,
    StatusMoney,
    StatusProgress,
    StatusRun,
    StatusSetup,
)
from optimizer.report.view import Node, RunView
from optimizer.store.errors import StoreError
from optimizer.store.files import Workspace
from optimizer.store.lock import running_pid
from optimizer.store.rows import UnscoredKey


def status(run_dir: Path, data: RunView | None = None) -> StatusInfo:
    """Where a run is, from state.db opened read-only; safe while its daemon runs. `data`: the
    run as read.load read it already, so the report does not read 200 versions twice."""
    ws = Workspace(run_dir)
    if not ws.state_db.is_file():
        raise BadInput(words.not_a_run(run_dir, fix="start one with `optimizer run SKILL_DIR`."))
    data = data or read.load(run_dir)
    pid = running_pid(ws)
    budget = data.settings.get("budget") or {}
    return {
        **_which_info(ws, data, pid),
        **_progress_info(data),
        **_found_info(data, str(run_dir)),
        **_money_info(ws, data, budget.get("usd"), budget.get("deadline") or None),
        **_setup_info(ws, data),
        **finish.timing(
            data.run,
            data.iterations,
            data.settings,
            running=pid is not None,
            spent=_budgeted(data),
            spent_in_iterations=data.ledger.get("iterations_usd") or 0.0,
        ),
    }


def _which_info(ws: Workspace, data: RunView, pid: int | None) -> StatusRun:
    run = data.run
    return {
        "run_dir": str(ws.root),
        "run_id": run.id,
        "skill_name": run.skill_name,
        "target": run.target,
        "simulated": data.simulated,
        "probe": _probe(ws),
        "running": pid is not None,
        "pid": pid,
        "status": run.status,
        "activity": run.activity,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


def _progress_info(data: RunView) -> StatusProgress:
    iterations = data.iterations
    return {
        "iteration": max((i.number for i in iterations), default=0),
        "iterations_done": sum(1 for i in iterations if i.finished_at),
        "max_iterations": (data.settings.get("loop") or {}).get("max_iterations"),
        "versions": len(data.nodes),
        "pending": [n.label for n in data.nodes if not n.decision and n.status != "failed"],
        "failed": {n.label: n.error for n in data.nodes if n.status == "failed"},
        "proposals": read.proposals(iterations),
        "unscored": {
            "runs": len(data.unscored),
            "last": data.unscored[-1] if data.unscored else None,
        },
        "defects": _defects(data.unscored),
    }


def _found_info(data: RunView, run_dir: str) -> StatusFound:
    best = next((n for n in data.nodes if n.is_best), None)
    return {
        "current_best": None
        if best is None
        else {
            "version": best.label,
            "score": best.score,
            "pass_rate": best.pass_rate,
            "score_ci": best.score_ci,
            "score_evals": best.score_evals,
            "verdict": best.verdict,
        },
        **adopted.as_json(data.adoptions),
        "adopted_line": adopted.adopted_line(data.adoptions, data.current_best, run_dir),
        "adoption_lines": [adopted.line(a) for a in data.adoptions],
        "other_wins": caveats.stray_wins(data.nodes, data.current_best),  # and why not the best
        "promotions": caveats.promotions(data.nodes),  # the night's family and what bounds it
        "warnings": data.warnings,
    }


def _money_info(
    ws: Workspace, data: RunView, budget_usd: float | None, deadline: str | None
) -> StatusMoney:
    run = data.run
    return {
        "spent_usd": round(data.ledger.get("spent_usd") or 0.0, 6),
        "budgeted_usd": round(_budgeted(data), 6),
        # The one wording of the spend, every view (adoptions apart: model/budget.py).
        "spent_text": adopted.spent_words(
            data.ledger.get("spent_usd") or 0.0,
            budget_usd,
            [a.model_dump(mode="json") for a in data.adoptions],
        ),
        "budget_usd": budget_usd,
        "estimate": _estimate(ws.root),
        "calls": data.ledger.get("calls", 0),
        "cache_hits": data.ledger.get("cache_hits", 0),
        "saved_usd": round(data.ledger.get("saved_usd") or 0.0, 6),
        "deadline": deadline,
        "seconds_left": finish.seconds_left(deadline),
        "last_error": run.last_error,
        "stop_reason": run.stop_reason,
        "ended": words.ended(run.status, run.stop_reason),  # one wording, every view
    }


def _setup_info(ws: Workspace, data: RunView) -> StatusSetup:
    run = data.run
    done = sum(1 for i in data.iterations if i.finished_at)
    return {
        "test": _with_train_delta(run.test, data.nodes),
        "sealed_todo": sealed.finish_line(str(ws.root), run, done, _budgeted(data)),
        "settings": folders.provenance(ws.run_toml),
        "resumes": len(data.resumes),
        "last_resumed": (
            {"at": data.resumes[-1].at, "changed": data.resumes[-1].changed}
            if data.resumes
            else None
        ),
        "sandbox": confinement.summary(ws.root),
        "power": outlook.for_run(run, data.settings),
    }


def _defects(unscored: list[UnscoredKey]) -> Defects:
    """Runs an unexpected exception of ours ended ("internal error: <type>: ..."): bugs to
    report, counted by type, apart from the provider's and the sandbox's failures."""
    found = [u for u in unscored if str(u.get("error") or "").startswith(INTERNAL_ERROR)]
    kinds = Counter(str(u["error"])[len(INTERNAL_ERROR) :].split(":", 1)[0].strip() for u in found)
    return {
        "runs": len(found),
        "by_type": dict(sorted(kinds.items())),
        "last": found[-1] if found else None,
    }


def _with_train_delta(test: Any, nodes: list[Node]) -> Any:
    gain = caveats.train_delta(test, nodes)
    return test if gain is None else {**test, "train_delta": gain}


def _probe(ws: Workspace) -> str | None:
    """How a description run measures triggering (recorded with v0's probe), else None."""
    found = read.read_json(ws.version("v0") / "trigger.json")
    probe = found.get("probe") if isinstance(found, dict) else None
    return probe if isinstance(probe, str) else None


def _estimate(run_dir: Path) -> dict[str, Any] | None:
    """The cost estimate shown when the run started, against what the ledger says was spent."""
    try:
        return spend.estimate_vs_actual(run_dir)
    except (StoreError, OSError, ValueError, KeyError):
        return None  # an older run folder, or one whose estimate could not be made


def _state_line(info: StatusInfo) -> Text:
    state = info.get("status") or "unknown"
    if info["running"]:
        return Text(f"running (pid {info['pid']})", style="green")
    if state == "running":  # the row says running but nobody holds the lock
        return Text(
            "not running: the daemon died without stopping; continue with `optimizer resume`",
            style="red",
        )
    return Text(state, style="red" if state == "failed" else "")


Row = tuple[str, object]  # a line of the grid: its key and what it says (a Text, or shown as str)


def print_status(console: Console, info: StatusInfo) -> None:
    """status's grid, section by section (what runs, its health, what it found, its money and
    time), then the settings that are not defaults."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for section in (_what_runs, _health, _found, _money_and_time):
        for key, value in section(info):
            grid.add_row(key, value if isinstance(value, Text) else Text(str(value)))
    emit(console, grid)
    if info["settings"]:
        table = Table(title="settings that are not defaults", title_justify="left", show_edge=False)
        for col in ("setting", "value", "from"):
            table.add_column(col)
        for s in info["settings"]:
            table.add_row(
                Text(s["key"]),
                Text(repr(s["value"]) if isinstance(s["value"], str) else str(s["value"])),
                Text(s["source"]),
            )
        emit(console, table)


def _what_runs(info: StatusInfo) -> Iterator[Row]:
    title = f"{info.get('skill_name') or '?'}  {info['run_dir']}"
    yield "run", title + ("  [SIMULATED]" if info["simulated"] else "")
    yield "state", _state_line(info)
    yield "activity", info.get("activity") or "—"
    if probe := info.get("probe"):
        yield (
            "probe",
            {
                "claude-code": "the Claude Code CLI, one `claude -p` per query",
                "api": "one routing request per query (the API probe)",
            }.get(probe, probe),
        )
    if box := info.get("sandbox"):
        yield (
            "sandbox",
            Text(confinement.describe(box), style="bold red" if box["unconfined"] else ""),
        )
    it = f"{info['iteration']} ({info['iterations_done']} done"
    yield (
        "iteration",
        it + (f" of {info['max_iterations']})" if info.get("max_iterations") is not None else ")"),
    )
    pending = f", pending: {', '.join(info['pending'])}" if info["pending"] else ""
    yield "versions", f"{info['versions']}{pending}"
    if info["proposals"]["proposals"]:
        yield "proposals", read.proposals_line(info["proposals"])


def _health(info: StatusInfo) -> Iterator[Row]:
    """Runs we could not score, internal errors of ours, versions that failed."""
    if info["unscored"]["runs"]:
        last = info["unscored"]["last"]
        assert last is not None  # there are unscored runs
        yield (
            "unscored",
            Text(
                f"{info['unscored']['runs']} runs our infrastructure failed (left out of "
                f"every mean, retried on resume); e.g. {last['key']}: {last['error']}",
                style="yellow",
            ),
        )
    defects = info.get("defects") or {}
    if defects.get("runs"):
        kinds = ", ".join(f"{kind} x{n}" for kind, n in defects["by_type"].items())
        yield (
            "defects",
            Text(
                f"{defects['runs']} runs ended by an internal error of ours ({kinds}; "
                "tracebacks in optimizer.log, run.internal_error): please report them",
                style="bold red",
            ),
        )
    for label, error in info["failed"].items():
        yield "failed", Text(f"{label}: {error} (the run went on without it)", style="red")


def _found(info: StatusInfo) -> Iterator[Row]:
    """The current best, the adoption, the other winners."""
    if best := info.get("current_best"):
        ci = interval(
            best.get("score_ci"), best.get("score_evals"), sign=False, level=caveats.SCORE_LEVEL
        )
        won = f"  {best['verdict']}" if best.get("verdict") else ""
        yield (
            "current best",
            Text(
                f"★ {best['version']}  score {num(best['score'])}{ci}  pass rate "
                f"{pct(best['pass_rate'])}{won}",
                style="bold green",
            ),
        )
    yield "adopted", info["adopted_line"]
    for said in info["adoption_lines"][-3:]:  # the latest; lineage lists them all
        yield "adoption", said
    for label, verdict in info.get("other_wins", {}).items():
        yield "also won", f"{label} {verdict}"
    if info.get("promotions"):
        yield "promotions", info["promotions"]


def _money_and_time(info: StatusInfo) -> Iterator[Row]:
    """The spend, the ledger, the clock, why it stopped, the sealed test, power and warnings."""
    budget = info.get("budget_usd")
    yield "spent", info.get("spent_text") or adopted.spent_words(info["spent_usd"], budget, [])
    if line := (info.get("estimate") or {}).get("line"):
        yield "estimate", line
    yield (
        "ledger",
        f"{info['calls']} calls paid; {info['cache_hits']} served from the ledger "
        f"(saved {money(info['saved_usd'])})",
    )
    if info.get("elapsed_s") is not None:
        yield "elapsed", duration(info["elapsed_s"]) + " since the start"
    if info["running"]:
        yield "finish", finish.finish_line(info)
    if info.get("deadline"):
        left = info.get("seconds_left")
        passed = left is not None and left <= 0
        yield "deadline", f"{info['deadline']} ({'passed' if passed else duration(left) + ' left'})"
    if info.get("last_resumed"):
        yield "resumed", _resumed_line(info)
    if stop_reason := info.get("stop_reason"):
        yield "stopped", words.after_stopped(stop_reason)
    if last_error := info.get("last_error"):
        yield "last error", Text(last_error, style="red")
    if sealed_todo := info.get("sealed_todo"):
        yield "sealed test", Text(sealed_todo, style="yellow")
    elif test := info.get("test"):
        yield "sealed test", _test_line(test)
    if power := info.get("power"):
        yield "power", power["line"]
    for warning in info.get("warnings") or []:
        yield "warning", Text(warning, style="bold yellow")


def _resumed_line(info: StatusInfo) -> str:
    last = info["last_resumed"]
    assert last is not None  # only a resumed run has this line
    times = f"{info['resumes']} times, last " if info["resumes"] > 1 else ""
    changed = last.get("changed") or {}
    what = ", ".join(f"{key} {before!r} → {after!r}" for key, (before, after) in changed.items())
    return f"{times}at {last['at']}: " + (f"changed {what}" if what else "no setting changed")


def _test_line(test: Mapping[str, Any]) -> Text:
    if test.get("incomplete"):
        return Text(f"incomplete: {test['incomplete']}", style="yellow")
    versions = test.get("versions") or {}
    parts = [f"{label} {num((v or {}).get('score'))}" for label, v in versions.items()]
    alone = test.get("delta") is None or len(versions) < 2  # v0 alone: no Δ against itself
    delta = "" if alone else f"; Δ {signed(test.get('delta'))}"
    if test.get("train_delta") is not None:
        delta += f" (on the train evals Δ {signed(test['train_delta'])})"
    return Text(
        f"{words.numbered('eval', test.get('evals') or [])}: "
        + ", ".join(parts)
        + delta
        + " (the check of generality: evals the search never saw)"
    )


def _budgeted(data: RunView) -> float:
    """The spend the budget counts (history.json alone has no ledger: its total, 0)."""
    found = data.ledger.get("budgeted_usd")
    return found if found is not None else data.ledger.get("spent_usd") or 0.0
