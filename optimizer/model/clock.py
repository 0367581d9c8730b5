"""A run's clock: the time a skill's run has used, without the time spent waiting on the model
provider (its queue, its retries, its latency beyond normal generation). Holds time only: it must
never make a call, read the ledger or decide a score."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

_clock_here: contextvars.ContextVar[RunClock | None] = contextvars.ContextVar(
    "run_clock", default=None
)


@dataclass
class RunClock:
    """Paused while at least one model call is in flight; each finished call then charges back
    its normal generation time (output tokens / tokens_per_s, never more than it took), so a skill
    that makes the model write at length still pays for it. tokens_per_s = 0 charges nothing."""

    tokens_per_s: float
    started: float = field(default_factory=time.monotonic)
    paused_s: float = 0.0  # finished pauses
    charged_s: float = 0.0  # normal generation time of finished calls, charged back
    model_s: float = 0.0  # every call's whole time, in flight overlaps counted once
    calls: int = 0
    _open: int = 0
    _paused_at: float = 0.0

    def call_started(self) -> None:
        if self._open == 0:
            self._paused_at = time.monotonic()
        self._open += 1

    def call_ended(self, seconds: float, output_tokens: int) -> None:
        """One call ended after `seconds` with `output_tokens` (0 when it failed or is unknown)."""
        self._open = max(0, self._open - 1)
        if self._open == 0:
            self.paused_s += time.monotonic() - self._paused_at
        self.calls += 1
        if self.tokens_per_s > 0 and output_tokens > 0:
            self.charged_s += min(seconds, output_tokens / self.tokens_per_s)

    def paused(self) -> bool:
        return self._open > 0

    def _pause_now(self) -> float:
        return (time.monotonic() - self._paused_at) if self._open else 0.0

    def wall_s(self) -> float:
        return time.monotonic() - self.started

    def waiting_s(self) -> float:
        """Time spent waiting on the provider, beyond the model's normal generation time."""
        paused = self.paused_s + self._pause_now()
        return max(0.0, paused - min(self.charged_s, paused))

    def model_charged_s(self) -> float:
        """The model's normal generation time, the part of its calls the skill is charged for."""
        return min(self.charged_s, self.paused_s + self._pause_now())

    def skill_s(self) -> float:
        """The run's time that counts against its limit: everything but the waiting."""
        return max(0.0, self.wall_s() - self.waiting_s())


@contextmanager
def run_clock(tokens_per_s: float) -> Iterator[RunClock]:
    """A fresh clock for the calls made inside (and in tasks created inside)."""
    clock = RunClock(tokens_per_s)
    token = _clock_here.set(clock)
    try:
        yield clock
    finally:
        _clock_here.reset(token)


def current_clock() -> RunClock | None:
    return _clock_here.get()


class ModelCall:
    """`with ModelCall(clock) as call: ...; call.tokens = n` around one call's whole wait (its
    queue, retries and answer); a no-op without a clock. A class: it is entered on every call."""

    __slots__ = ("clock", "started", "tokens")

    def __init__(self, clock: RunClock | None) -> None:
        self.clock = clock
        self.started = 0.0
        self.tokens = 0

    def __enter__(self) -> ModelCall:
        self.started = time.monotonic()
        if self.clock is not None:
            self.clock.call_started()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.clock is not None:
            self.clock.call_ended(time.monotonic() - self.started, self.tokens)
