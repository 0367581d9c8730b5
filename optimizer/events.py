"""What the search reports as it goes, as one typed stream: each event is emitted once, at the step
that caused it, and its subscribers (RunState's: state.db, the log, the live line) each take what
they need from it. Before, a step wrote the log and the live line itself, and the two could drift
apart. Handlers run synchronously and in subscription order, so a subscriber that reads state.db
(the live line) sees what an earlier one wrote, and the log's context (contextvars) is the step's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog

log = structlog.get_logger()


@dataclass(frozen=True)
class Activity:
    """What the search does now ("iteration 3: proposal 1 from v1"): state.db and the live line."""

    text: str


@dataclass(frozen=True)
class TrialGraded:
    """One more run (or trigger probe) scored: the live line's count."""


@dataclass(frozen=True)
class Decided:
    """A version's verdict against its parent, once its decision is recorded in state.db."""

    label: str
    parent: str
    verdict: str
    phase: str
    reason: str
    promoted: bool


@dataclass(frozen=True)
class ProposalMade:
    """Proposal k of iteration n and its outcome (a label, a duplicate or the rejection), as text."""

    iteration: int
    k: int
    outcome: Mapping[str, str]
    refused: str = ""  # why it was refused, in the proposer's words: the first problem, if any


@dataclass(frozen=True)
class Outlook:
    """An iteration is finished: the numbers the plateau rules read (stops.outlook)."""

    iteration: int
    numbers: Mapping[str, float | int | None]


@dataclass(frozen=True)
class ReserveKept:
    """What is held back from the search for the sealed test and an adoption at the end."""

    usd: float


@dataclass(frozen=True)
class Stopping:
    """The loop has stopped, for this reason; the sealed test and the adoption still follow."""

    reason: str


@dataclass(frozen=True)
class Finished:
    """The run is over: why, and the best version."""

    reason: str
    best: str


Event = (
    Activity | TrialGraded | Decided | ProposalMade | Outlook | ReserveKept | Stopping | Finished
)
Handler = Callable[[Event], None]


class Events:
    """A dispatcher: subscribe handlers, emit events to all of them, in order, now."""

    def __init__(self) -> None:
        self._handlers: list[Handler] = []

    def subscribe(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def emit(self, event: Event) -> None:
        for handler in self._handlers:
            handler(event)


def to_log(event: Event) -> None:
    """The run log's line for an event, with the names and fields it had before the stream (the
    report, `optimizer logs` and the tests read them). Activity, TrialGraded and Finished are not
    logged: state.db and the live line hold them, and runs.stopped records the end."""
    match event:
        case Decided():
            log.info(
                "selection.decided",
                version=event.label,
                parent=event.parent,
                decision=event.verdict,
                phase=event.phase,
                reason=event.reason,
                promoted=event.promoted,
            )
        case ProposalMade():
            log.info("proposal.made", iteration=event.iteration, k=event.k, **event.outcome)
        case Outlook():
            log.info("search.outlook", iteration=event.iteration, **event.numbers)
        case ReserveKept():
            log.info("budget.kept_for_sealed_test", usd=event.usd)
        case Stopping():
            log.info("run.stopping", reason=event.reason)
        case Activity() | TrialGraded() | Finished():
            pass
