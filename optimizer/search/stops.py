"""Stop conditions: small callables over the loop's state, checked between units of work, never in
the middle of a write. Each returns a reason (a short sentence) or None.

The budget is a ceiling (docs/design.md §19): after each finished iteration `worth_going_on` asks
whether one more proposal is expected to buy enough score per dollar. From the ledger alone:
- the cost of a proposal: the search's spend (proposals and the evaluation of their children, not
  v0, the baseline or the sealed test) over the proposals made;
- the chance the next proposal steps: the rule of succession over the proposals made since the
  last step, all of them from the current best: 1 / (proposals without a step + 2);
- the size of a step: the mean of the steps made (a child's train score over its parent's), with
  a prior step of STEP_PRIOR counted as one, so a search with no step yet expects a small one.
The expected gain of the next proposal is chance × size; the run stops when that gain per dollar
falls below loop.min_gain_per_usd, never before loop.min_proposals_without_step proposals
without a step, and says so in words.not_worth_it. loop.spend_all turns it (and loop.patience)
off."""

from __future__ import annotations

import math
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from optimizer import words
from optimizer.config import Loop
from optimizer.errors import BadInput, Interrupted
from optimizer.store.iterations import Iteration
from optimizer.store.rows import VersionOutcome

__all__ = ["Interrupted"]


@dataclass
class LoopState:
    iterations_done: int = 0
    iterations_without_win: int = 0
    best_score: float = 0.0
    spent_usd: float = 0.0
    proposals: int = 0  # made in finished iterations
    proposals_without_step: int = 0  # since the last step (or the search's start)
    steps: tuple[float, ...] = ()  # each step's train score gain over its parent
    search_usd: float = 0.0  # what the proposals and the evaluation of their children cost
    gain: float = 0.0  # the best's train score over v0's


Condition = Callable[[LoopState], str | None]

# The step a search expects before it has made one: above selection.min_effect (0.03), below the
# +0.13 SkillOpt's four proposals bought in docs/peers.md; it weighs as one step in the mean.
STEP_PRIOR = 0.05


def usd_per_proposal(s: LoopState) -> float | None:
    return s.search_usd / s.proposals if s.proposals and s.search_usd > 0 else None


def expected_gain(s: LoopState) -> float:
    """The train score the next proposal is expected to add: the chance it steps (the rule of
    succession over the proposals since the last step) times the mean step, prior included."""
    size = (STEP_PRIOR + sum(max(0.0, x) for x in s.steps)) / (1 + len(s.steps))
    return size / (s.proposals_without_step + 2)


def outlook(s: LoopState) -> dict[str, float | int | None]:
    """The numbers the rule reads, for the log: bought so far and expected next, per dollar."""
    cost = usd_per_proposal(s)
    return {
        "proposals": s.proposals,
        "without_step": s.proposals_without_step,
        "usd_per_proposal": round(cost, 4) if cost else None,
        "gain_per_usd": round(s.gain / s.search_usd, 4) if s.search_usd > 0 else None,
        "expected_gain_per_usd": round(expected_gain(s) / cost, 4) if cost else None,
    }


def from_ledger(
    *,
    finished: Sequence[Iteration],
    versions: Sequence[VersionOutcome],
    spent: Mapping[str | None, float],
    best: str,
    spent_usd: float,
    plateau_from: int = 0,
    min_step: float = 0.0,
) -> LoopState:
    """The loop's state from rows of state.db: the finished iterations (in order), the versions (label, parent, iteration, decision, score), the spend by scope
    (ledger.summed_by_scope). The counts without a win start at finished iteration `plateau_from`."""
    by_label = {v["label"]: v for v in versions}
    won = {label for label, v in by_label.items() if v["decision"] == "won"}
    wins = {by_label[label]["iteration"] for label in won}
    streak = 0
    for row in reversed(finished[plateau_from:]):
        if row.number in wins:
            break
        streak += 1
    score: dict[str | None, float] = {label: v["score"] or 0.0 for label, v in by_label.items()}
    # A win smaller than min_step does not end a run of proposals without a step: with cheap steps
    # an equal child wins often, and each such win would put the plateau off again.
    counted = {
        label
        for label in won
        if score[label] - score.get(by_label[label]["parent"], 0.0) >= min_step
    }
    proposals, without_step, scopes = 0, 0, set()
    for k, row in enumerate(finished):
        made = row.candidates
        for key in sorted(made, key=int):  # in the order they were proposed
            label = made[key].get("label")
            proposals += 1
            scopes.update({f"proposal {row.number}-{key}", label} - {None})
            if k >= plateau_from:
                without_step = 0 if label in counted else without_step + 1
    return LoopState(
        iterations_done=len(finished),
        iterations_without_win=streak,
        best_score=score.get(best, 0.0),
        spent_usd=spent_usd,
        proposals=proposals,
        proposals_without_step=without_step,
        steps=tuple(score[v] - score.get(by_label[v]["parent"], 0.0) for v in sorted(won)),
        search_usd=math.fsum(sorted(usd for scope, usd in spent.items() if scope in scopes)),
        gain=score.get(best, 0.0) - score.get("v0", 0.0),
    )


def plateaus(loop: Loop, budget_usd: float) -> tuple[Condition, ...]:
    """The plateau rules a run's settings ask for: none with loop.spend_all."""
    if loop.spend_all:
        return ()
    return (
        plateau(loop.patience),
        worth_going_on(loop.min_gain_per_usd, loop.min_proposals_without_step, budget_usd),
    )


def worth_going_on(min_gain_per_usd: float, min_without_step: int, budget_usd: float) -> Condition:
    """The plateau in gain per dollar; a search whose proposals cost nothing never stops by it."""

    def check(s: LoopState) -> str | None:
        cost = usd_per_proposal(s)
        if s.proposals_without_step < min_without_step or cost is None:
            return None
        if expected_gain(s) / cost >= min_gain_per_usd:
            return None
        return words.not_worth_it(s.spent_usd, budget_usd, s.proposals_without_step)

    return check


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


@dataclass(frozen=True)
class Kept:
    """What the search leaves of the budget: the sealed test's reserve and the first looks of an
    adoption at the run's end, each named where the budget stops the search."""

    test_usd: float
    adoption_usd: float

    @property
    def usd(self) -> float:
        return self.test_usd + self.adoption_usd

    def words(self, lead: str = " of it kept") -> str:
        """'$0.69 of it kept for the sealed test, $2.26 for the adoption at the end'."""
        named = [
            (usd, what)
            for usd, what in (
                (self.test_usd, "the sealed test"),
                (self.adoption_usd, "the adoption at the end"),
            )
            if usd > 0
        ]
        return ", ".join(
            f"${usd:.2f}{lead if k == 0 else ''} for {what}" for k, (usd, what) in enumerate(named)
        )


NONE_KEPT = Kept(0.0, 0.0)


def budget(usd: float, kept: Kept = NONE_KEPT) -> Condition:
    """The search stops where its spend would eat into what is `kept` for what follows it."""
    held = f" ({kept.words()})" if kept.usd > 0 else ""
    return lambda s: (
        f"spent ${s.spent_usd:.2f} of the ${usd:.2f} budget{held}"
        if s.spent_usd >= usd - kept.usd
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
    any two units of work; `at_iteration_end` ones (iterations, target) and the `plateaus` only
    between iterations, so an iteration is never cut short for them."""

    urgent: tuple[Condition, ...]
    at_iteration_end: tuple[Condition, ...] = ()
    plateaus: tuple[Condition, ...] = ()  # checked at iteration end; a resume starts them afresh

    def now(self, state: LoopState) -> str | None:
        return first(self.urgent, state)

    def any(self, state: LoopState) -> str | None:
        return first(self.urgent + self.at_iteration_end + self.plateaus, state)


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
