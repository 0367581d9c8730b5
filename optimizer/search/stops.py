"""Stop conditions: small callables over the loop's state, checked between units of work, never in
the middle of a write. Each returns a reason (a short sentence) or None."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from optimizer.errors import BadInput, Interrupted

__all__ = ["Interrupted"]


@dataclass
class LoopState:
    iterations_done: int = 0
    iterations_without_win: int = 0
    best_score: float = 0.0
    spent_usd: float = 0.0


Condition = Callable[[LoopState], str | None]


def max_iterations(n: int) -> Condition:
    return lambda s: f"reached {n} iterations" if s.iterations_done >= n else None


def plateau(patience: int) -> Condition:
    return lambda s: (
        f"no win in {patience} iterations (plateau)"
        if s.iterations_without_win >= patience
        else None
    )


def target(score: float) -> Condition:
    return lambda s: f"the best score reached the target {score}" if s.best_score >= score else None


def budget(usd: float, kept: float = 0.0) -> Condition:
    """The search stops where its spend would eat into what is `kept` for the sealed test."""
    held = f" (${kept:.2f} of it kept for the sealed test)" if kept > 0 else ""
    return lambda s: (
        f"spent ${s.spent_usd:.2f} of the ${usd:.2f} budget{held}"
        if s.spent_usd >= usd - kept
        else None
    )


def deadline(at: datetime | None, clock: Callable[[], datetime] = datetime.now) -> Condition:
    return lambda s: (
        f"the deadline {at.isoformat(timespec='minutes')} passed" if at and clock() >= at else None
    )


def stop_file(path: Path) -> Condition:
    return lambda s: f"a stop was requested ({path.name})" if path.exists() else None


@dataclass
class SignalFlag:
    """SIGINT/SIGTERM ask for a clean stop after the unit in flight; a second SIGINT abandons it."""

    received: list[str] = field(default_factory=list)

    def install(self) -> None:
        def handler(signum: int, _frame: object) -> None:
            name = signal.Signals(signum).name
            if self.received and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.received.append(name)

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)

    def condition(self) -> Condition:
        return lambda s: f"stopped by {self.received[0]}" if self.received else None


@dataclass(frozen=True)
class StopRules:
    """`urgent` conditions (a signal, the stop file, the budget, the deadline) are checked between
    any two units of work; `at_iteration_end` ones (iterations, target, plateau) only between
    iterations, so an iteration is never cut short for them."""

    urgent: tuple[Condition, ...]
    at_iteration_end: tuple[Condition, ...] = ()

    def now(self, state: LoopState) -> str | None:
        return first(self.urgent, state)

    def any(self, state: LoopState) -> str | None:
        return first(self.urgent + self.at_iteration_end, state)


def first(conditions: Sequence[Condition], state: LoopState) -> str | None:
    for condition in conditions:
        reason = condition(state)
        if reason:
            return reason
    return None


def parse_deadline(text: str, now: datetime | None = None) -> datetime | None:
    """'HH:MM' is the next such local time; anything else must be an ISO timestamp."""
    text = text.strip()
    if not text:
        return None
    now = now or datetime.now()
    try:
        if len(text) <= 5 and ":" in text:
            hour, minute = (int(p) for p in text.split(":"))
            at = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
            return at if at > now else at + timedelta(days=1)
        at = datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(
            f"deadline {text!r}: use HH:MM (local time) or an ISO timestamp like 2026-11-22T07:00."
        ) from None
    # An aware timestamp is compared in local time, as the clock the loop reads.
    return at.astimezone().replace(tzinfo=None) if at.tzinfo else at
