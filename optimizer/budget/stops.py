"""Stop rules: one class per rule, each a StopRule (a call over the loop's state) with its typed
settings, checked between units of work, never in the middle of a write. Each returns a reason (a
short sentence) or None.

The budget and the deadline bound a night; there is no iteration limit unless the user sets one.
After each finished iteration `WorthGoingOn` asks whether one more proposal is expected to buy
enough score for its cost (docs/design.md §9), from the ledger alone:
- the cost of a proposal: the search's spend (proposals and the evaluation of their children, not
  v0, the baseline or the sealed test) over the proposals made;
- what the proposals since the last loop.stop_window measured ones bought, with the noise taken
  out (budget/worth.py):
  their wins counted only beyond what equal children would win, each step shrunk toward the
  run's mean by the run's measured noise;
- the value of a point of score: loop.min_gain_per_usd, or by default the headroom v0 left over
  the budget, (1 − v0's train score) / budget: the rate at which the whole budget would buy the
  whole headroom.
The run stops when the expected gain of one more proposal per dollar falls below that value, never
before loop.stop_window measured proposals, and says so in words.not_worth_it. loop.spend_all turns it (and
loop.patience) off."""

from __future__ import annotations

import math
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

from optimizer import words
from optimizer.budget import worth
from optimizer.config import Loop
from optimizer.errors import BadInput, Interrupted
from optimizer.model.budget import Budget
from optimizer.store.iterations import Iteration
from optimizer.store.versions import Version

__all__ = ["Interrupted"]


@dataclass
class LoopState:
    iterations_done: int = 0
    iterations_without_win: int = 0
    best_score: float = 0.0
    spent_usd: float = 0.0
    proposals: int = 0  # made in finished iterations
    judged: tuple[worth.Judged, ...] = ()  # every proposal of finished iterations, in order
    recent: tuple[worth.Judged, ...] = ()  # those the stop rule may read (since a resume's start)
    search_usd: float = 0.0  # what the proposals and the evaluation of their children cost
    gain: float = 0.0  # the best's train score over v0's
    v0_score: float | None = None  # v0's train score


class StopRule(Protocol):
    """Why the run stops now, read from the loop's state alone (a clock aside); None: go on."""

    def __call__(self, state: LoopState, /) -> str | None: ...


def usd_per_proposal(s: LoopState) -> float | None:
    return s.search_usd / s.proposals if s.proposals and s.search_usd > 0 else None


def value_of_gain(
    min_gain_per_usd: float | None, v0_score: float | None, budget_usd: float
) -> float | None:
    """The score a dollar must buy: the user's loop.min_gain_per_usd, or the headroom v0 left over
    the budget; None when neither is known (no budget, v0 not measured)."""
    if min_gain_per_usd is not None:
        return min_gain_per_usd
    if budget_usd <= 0 or v0_score is None:
        return None
    return max(0.0, 1.0 - v0_score) / budget_usd


def outlook(s: LoopState, window: int = 8) -> dict[str, float | int | None]:
    """The numbers the rule reads, for the log: bought so far and expected next, per dollar."""
    cost = usd_per_proposal(s)
    tail = worth.last_measured(s.recent, window)
    w = worth.expected(tail, s.judged) if tail is not None else None
    return {
        "proposals": s.proposals,
        "usd_per_proposal": round(cost, 4) if cost else None,
        "gain_per_usd": round(s.gain / s.search_usd, 4) if s.search_usd > 0 else None,
        "window": w.proposals if w else None,
        "wins": w.wins if w else None,
        "equal_wins": w.equal_wins if w else None,
        "bought": round(w.bought, 4) if w else None,
        "expected_gain_per_usd": round(w.gain / cost, 4) if w and cost else None,
    }


def judged_of(version: Version | None, parent: Version | None = None) -> worth.Judged:
    """A proposal's version as the rule reads it (worth.Judged); an empty one when unmeasured.
    Its noise is measured from the per-eval differences to its parent (worth.measured_se); the
    decision's interval, which a step's rule widens on purpose, only where those are too few."""
    numbers = version.decided if version else None
    if version is None or numbers is None or numbers.delta is None:
        return worth.Judged(won=bool(version and version.decision == "won"))
    evals = numbers.evals
    df = evals - 1 if numbers.scope == "general" and evals else None
    se = worth.measured_se(_per_eval(version), _per_eval(parent))
    if se is None:
        se = worth.standard_error(numbers.delta, numbers.low, numbers.high, numbers.confidence, df)
    return worth.Judged(
        won=version.decision == "won",
        delta=numbers.delta,
        se=se,
        false_step=worth.false_step(numbers.confidence),
    )


def _per_eval(version: Version | None) -> dict[str, float]:
    return {str(k): float(v) for k, v in version.per_eval.items()} if version else {}


def from_ledger(
    *,
    finished: Sequence[Iteration],
    versions: Sequence[Version],
    spent: Mapping[str | None, float],
    best: str,
    spent_usd: float,
    plateau_from: int = 0,
) -> LoopState:
    """The loop's state from rows of state.db: the finished iterations (in order), the versions
    (label, parent, iteration, decision, score and their decision's Δ and interval), the spend by
    scope (ledger.summed_by_scope). The stop rules read proposals from finished iteration
    `plateau_from` on; the run's noise is measured over all of them."""
    by_label = {v.label: v for v in versions}
    won = {label for label, v in by_label.items() if v.decision == "won"}
    wins = {by_label[label].iteration for label in won}
    streak = 0
    for row in reversed(finished[plateau_from:]):
        if row.number in wins:
            break
        streak += 1
    score: dict[str | None, float] = {label: v.score or 0.0 for label, v in by_label.items()}
    judged: list[worth.Judged] = []
    recent: list[worth.Judged] = []
    proposals, scopes = 0, set()
    for k, row in enumerate(finished):
        made = row.candidates
        for key in sorted(made, key=int):  # in the order they were proposed
            label = made[key].get("label")
            proposals += 1
            scopes.update({f"proposal {row.number}-{key}", label} - {None})
            mine = by_label.get(label) if label else None
            one = judged_of(mine, by_label.get(mine.parent or "") if mine else None)
            judged.append(one)
            if k >= plateau_from:
                recent.append(one)
    v0 = by_label.get("v0")
    return LoopState(
        iterations_done=len(finished),
        iterations_without_win=streak,
        best_score=score.get(best, 0.0),
        spent_usd=spent_usd,
        proposals=proposals,
        judged=tuple(judged),
        recent=tuple(recent),
        search_usd=math.fsum(sorted(usd for scope, usd in spent.items() if scope in scopes)),
        gain=score.get(best, 0.0) - score.get("v0", 0.0),
        v0_score=v0.score if v0 else None,
    )


def plateaus(
    loop: Loop,
    budget_usd: float,
    deadline: datetime | None = None,
    clock: Callable[[], datetime] = datetime.now,
) -> tuple[StopRule, ...]:
    """The plateau rules a run's settings ask for: none with loop.spend_all; loop.patience only
    when set."""
    if loop.spend_all:
        return ()
    patience = (Plateau(loop.patience),) if loop.patience is not None else ()
    return (
        *patience,
        WorthGoingOn(loop.min_gain_per_usd, loop.stop_window, budget_usd, deadline, clock),
    )


@dataclass(frozen=True)
class WorthGoingOn:
    """The stop from the evidence (the module's doc); a search whose proposals cost nothing, or
    whose run has too few measured proposals to tell noise from gain, never stops by it. The
    decision reads the state alone; the clock only words how long was left."""

    min_gain_per_usd: float | None
    window: int
    budget_usd: float
    deadline: datetime | None = None
    clock: Callable[[], datetime] = datetime.now

    def __call__(self, s: LoopState) -> str | None:
        cost = usd_per_proposal(s)
        tail = worth.last_measured(s.recent, self.window)
        if cost is None or tail is None:
            return None
        w = worth.expected(tail, s.judged)
        value = value_of_gain(self.min_gain_per_usd, s.v0_score, self.budget_usd)
        if w is None or value is None or w.gain / cost >= value:
            return None
        at = self.deadline
        left = (at - self.clock()).total_seconds() if at is not None else None
        return words.not_worth_it(s.spent_usd, self.budget_usd, w.proposals, w.bought, left)


@dataclass(frozen=True)
class MaxIterations:
    """The user's iteration limit; None (the default) is none."""

    n: int | None

    def __call__(self, s: LoopState) -> str | None:
        n = self.n
        return (
            f"reached {words.plural(n, 'iteration')}"
            if n is not None and s.iterations_done >= n
            else None
        )


@dataclass(frozen=True)
class Plateau:
    patience: int

    def __call__(self, s: LoopState) -> str | None:
        if s.iterations_without_win >= self.patience:
            return f"no win in {self.patience} iterations (plateau)"
        return None


@dataclass(frozen=True)
class Target:
    score: float

    def __call__(self, s: LoopState) -> str | None:
        if s.best_score >= self.score:
            return f"the best score reached the target {self.score}"
        return None


@dataclass(frozen=True)
class OverBudget:
    """The search stops where its spend would eat into what the run's one budget keeps for what
    follows it (model/budget.py reads the counted spend and the reserve)."""

    budget: Budget

    def __call__(self, s: LoopState) -> str | None:
        return self.budget.exhausted()


@dataclass(frozen=True)
class Deadline:
    at: datetime | None
    clock: Callable[[], datetime] = datetime.now

    def __call__(self, s: LoopState) -> str | None:
        at = self.at
        return (
            f"the deadline {at.isoformat(timespec='minutes')} passed"
            if at and self.clock() >= at
            else None
        )


@dataclass(frozen=True)
class StopFile:
    path: Path

    def __call__(self, s: LoopState) -> str | None:
        return f"a stop was requested ({self.path.name})" if self.path.exists() else None


@dataclass
class SignalFlag:
    """SIGINT/SIGTERM ask for a clean stop after the unit in flight; a second SIGINT abandons it.
    The flag is the stop rule that says so."""

    received: list[str] = field(default_factory=list)

    def install(self) -> None:
        def handler(signum: int, _frame: object) -> None:
            name = signal.Signals(signum).name
            if self.received and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.received.append(name)

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)

    def __call__(self, s: LoopState) -> str | None:
        return f"stopped by {self.received[0]}" if self.received else None


@dataclass(frozen=True)
class StopRules:
    """`urgent` conditions (a signal, the stop file, the budget, the deadline) are checked between
    any two units of work; `at_iteration_end` ones (iterations, target) and the `plateaus` only
    between iterations, so an iteration is never cut short for them."""

    urgent: tuple[StopRule, ...]
    at_iteration_end: tuple[StopRule, ...] = ()
    plateaus: tuple[StopRule, ...] = ()  # checked at iteration end; a resume starts them afresh

    def now(self, state: LoopState) -> str | None:
        return first(self.urgent, state)

    def any(self, state: LoopState) -> str | None:
        return first(self.urgent + self.at_iteration_end + self.plateaus, state)


def first(rules: Sequence[StopRule], state: LoopState) -> str | None:
    for rule in rules:
        reason = rule(state)
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
