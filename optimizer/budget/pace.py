"""When a run will end: the iterations it has left (the limit, and the budget at the measured cost
per iteration, or the preview's before one finished) at the pace of those it finished, capped by
the deadline. Pure functions of numbers the caller reads from state.db and a clock, so that an
estimate is tested without waiting.

The cost preview has no time model (how long a call takes depends on the provider's latency and
the rate limit, which it cannot know), so the pace is measured: the seconds spent inside finished
iterations over their count. Setup (the baseline and v0) and pauses between a stop and a resume are
not iterations and do not slow the pace down."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class Finish:
    """Seconds from now until the run stops by itself, and what decides it: "pace" (the
    iterations left at the pace so far), "deadline", "limit" (no iteration left), or "" when
    nothing can tell yet (seconds is None)."""

    seconds: float | None
    by: str


def usd_per_iteration(
    *, estimated: float | None, spent_in_iterations: float, done: int
) -> float | None:
    """What one iteration costs, for the budget's share of iterations_left: measured over the
    finished iterations as soon as there is one, like the pace of time; until then the preview's
    estimate, which assumes every proposal is benchmarked and leans high where screening stops
    some or an iteration ends at its first winner."""
    if done > 0 and spent_in_iterations > 0:
        return spent_in_iterations / done
    return estimated


def iterations_left(
    done: int,
    max_iterations: int | None,
    *,
    budget_left_usd: float | None = None,
    usd_per_iteration: float | None = None,
) -> int | None:
    """Iterations still to run, the one in progress included: the limit's and the budget's, the
    fewer; None when neither bounds them (no limit is set by default, and no budget can tell yet).
    The budget stops a run in the middle of the iteration it runs out in, so a part of an
    iteration's cost counts as one. The stop rule may end a run sooner: it is not foreseen."""
    left = None if max_iterations is None else max(0, max_iterations - done)
    if budget_left_usd is not None and usd_per_iteration:
        by_budget = max(0, math.ceil(budget_left_usd / usd_per_iteration - 1e-9))
        left = by_budget if left is None else min(left, by_budget)
    return left


def finish(
    *, seconds_in_iterations: float, done: int, left: int | None, to_deadline: float | None = None
) -> Finish:
    """The run's rough end. Without a finished iteration there is no pace, and without a bound on
    the iterations left no end by pace: only a deadline (or an exhausted limit) can tell."""
    if left is not None and left <= 0:
        return Finish(0.0, "limit")
    by_pace = seconds_in_iterations / done * left if done > 0 and left is not None else None
    if to_deadline is not None and (by_pace is None or to_deadline < by_pace):
        return Finish(max(0.0, to_deadline), "deadline")
    return Finish(by_pace, "pace") if by_pace is not None else Finish(None, "")


def seconds_in_iterations(times: Sequence[tuple[str | None, str | None]]) -> tuple[float, int]:
    """(seconds inside the finished iterations, how many) from their (started_at, finished_at),
    ISO times."""
    total, done = 0.0, 0
    for started_at, finished_at in times:
        start, end = parse_time(started_at), parse_time(finished_at)
        if start is not None and end is not None:
            total += max(0.0, (end - start).total_seconds())
            done += 1
    return total, done


def parse_time(text: str | None) -> datetime | None:
    """An ISO time of state.db or of a deadline; a naive one is local time."""
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (at if at.tzinfo else at.astimezone()).astimezone(UTC)


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def eta_text(end: Finish, done: int) -> str:
    """The ETA as the progress line says it. A deadline is an upper bound, not a pace: before the
    first iteration finishes the ETA stays unknown and the deadline is named beside it."""
    if end.by == "limit":
        return "ETA: no iteration left, the sealed test and the end"
    if end.by == "deadline" and done == 0:
        return f"ETA unknown (the deadline stops the run in {clock(end.seconds)})"
    if end.by == "deadline":
        return f"ETA {_rough(end.seconds)} (the deadline)"
    if end.by == "pace":
        return f"ETA {_rough(end.seconds)}"
    return "ETA unknown"


def _rough(seconds: float | None) -> str:
    # Seconds would claim a precision the pace of a few iterations does not have.
    return "under a minute" if seconds is not None and seconds < 60 else clock(seconds)
