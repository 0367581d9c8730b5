"""When a run will end, as status shows it: the elapsed time, the iterations left at the pace of the
finished ones (capped by the budget and the deadline) and the finish line in words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from optimizer.budget import pace
from optimizer.budget.cost_model import Estimate
from optimizer.budget.estimate import per_iteration_usd
from optimizer.report.format import duration
from optimizer.report.info import StatusInfo, Timing
from optimizer.store.iterations import Iteration
from optimizer.store.runs import Run


def timing(
    run: Run,
    iterations: list[Iteration],
    settings: dict,
    *,
    running: bool,
    spent: float,
    spent_in_iterations: float = 0.0,
) -> Timing:
    """Elapsed time since the start, and while a daemon runs, a rough finish: the iterations left
    (the limit, and the budget at the cost per finished iteration, or the preview's before one
    finished) at the pace of the finished ones, capped by the deadline; None when nothing can tell
    yet."""
    started = pace.parse_time(run.started_at)
    ended = pace.parse_time(run.finished_at) if not running else None
    now = datetime.now(UTC)
    out: Timing = {
        "elapsed_s": None
        if started is None
        else round(((ended or now) - started).total_seconds(), 1),
        "finish": None,
    }
    if not running:
        return out
    loop, budget = settings.get("loop") or {}, settings.get("budget") or {}
    seconds, done = pace.seconds_in_iterations([(i.started_at, i.finished_at) for i in iterations])
    per = None
    if budget.get("usd"):
        est: Estimate = run.estimate or Estimate()
        per = pace.usd_per_iteration(
            estimated=per_iteration_usd(est), spent_in_iterations=spent_in_iterations, done=done
        )
    left = pace.iterations_left(
        done,
        loop.get("max_iterations"),
        usd_per_iteration=per,
        budget_left_usd=budget["usd"] - spent if budget.get("usd") else None,
    )
    deadline = pace.parse_time(budget.get("deadline"))
    end = pace.finish(
        seconds_in_iterations=seconds,
        done=done,
        left=left,
        to_deadline=None if deadline is None else (deadline - now).total_seconds(),
    )
    at = None if end.seconds is None else (now + timedelta(seconds=end.seconds))
    out["finish"] = {
        "seconds": None if end.seconds is None else round(end.seconds, 1),
        "by": end.by,
        "at": None if at is None else at.isoformat(timespec="seconds"),
        "iterations_left": left,
        "iterations_done": done,
    }
    return out


def finish_line(info: StatusInfo) -> str:
    end = info.get("finish")
    if not end or end["seconds"] is None or end["at"] is None:
        return (
            "unknown: no iteration has finished yet, and no deadline is set"
            if not end or not end.get("iterations_done")
            else "unknown: no deadline, budget or iteration limit bounds it (the stop rule may end it)"
        )
    at = datetime.fromisoformat(end["at"]).astimezone()
    when = (
        at.strftime("%H:%M")
        if at.date() == datetime.now().astimezone().date()
        else at.strftime("%Y-%m-%d %H:%M")
    )
    if end["by"] == "deadline":
        return f"by {when} at the latest (the deadline; in {duration(end['seconds'])})"
    if end["by"] == "limit":
        return "soon: no iteration left, only the sealed test"
    return (
        f"about {when} (in {duration(end['seconds'])}: {end['iterations_left']} iterations left at "
        f"the pace of the {end['iterations_done']} done)"
    )


def seconds_left(deadline: str | None) -> float | None:
    if not deadline:
        return None
    try:
        at = datetime.fromisoformat(deadline.replace("Z", "+00:00"))
    except ValueError:
        return None
    at = at if at.tzinfo else at.astimezone()  # a naive deadline is local time
    return round((at - datetime.now(UTC)).total_seconds(), 1)
