"""What the engine optimises: a Target says what is varied, how a candidate is proposed, how it is
evaluated and decided against its parent, and how a version is summarised. The engine knows only
the order of the steps (GEPA's adapter, kept smaller). Never holds state of its own across
processes: everything a target needs again is in state.db or the run folder."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from optimizer.search.proposal import Candidate, Rejected

# A proposal's sample number, which keys its model call in the ledger, packs (iteration, index) as
# iteration·100 + index; loop.proposals_per_iteration is capped below 100 so two never collide.
PROPOSALS_PER_ITERATION_MAX = 99


def proposal_sample(iteration: int, index: int) -> int:
    """The sample number of proposal `index` (from 0) of `iteration`: a pure function of the pair,
    so a resume asks exactly the same question, and distinct for distinct pairs."""
    if not 0 <= index <= PROPOSALS_PER_ITERATION_MAX:
        raise ValueError(f"proposal index {index} is outside 0..{PROPOSALS_PER_ITERATION_MAX}")
    return iteration * 100 + index


@dataclass(frozen=True)
class TargetDecision:
    """A target's decision on one child, which the engine records (state.record_decision) before
    the next step: the phase that decided it ("screening" or the target's own; selection.json
    keeps it in its `stage` field) and selection.json's fields (validated by schemas.SelectionFile when written)."""

    phase: str
    selection: Mapping[str, Any]
    # The versions whose runs this judging added: the engine records them (Target.record) first.
    measured: tuple[str, ...] = ()


class Target(Protocol):
    """One thing to optimise (the skill's body, its description, ...). A new target is one module
    that implements this and one line in optimizer.search.targets; the engine never changes."""

    name: str  # as --target names it, and as state.db's runs.target records it
    # The phase that decides this target's children: versions.phase of the versions it decided,
    # which are the pool its parents are drawn from (selection.json's `stage` field). "Stage"
    # names a layer of the code only; what the daemon is doing now is runs.activity.
    phase: str

    async def start(self) -> str | None:
        """Evaluate v0 (and whatever it is measured against), once per run: a resume finds it
        done. Returns a reason to stop before any proposal, or None to search."""
        ...

    async def propose(self, parent: str, dest: Path, sample: int) -> Candidate | Rejected:
        """A candidate folder made from the parent's skill at `dest`, or why there is none.
        `sample` is proposal_sample(iteration, index)."""
        ...

    async def judge(self, label: str, parent: str) -> TargetDecision | None:
        """Evaluate a registered version and decide it against its parent; the engine records the
        verdict. None when an urgent stop left it undecided: a resume judges it again."""
        ...

    async def learn(self, label: str, parent: str, verdict: TargetDecision) -> bool:
        """What the verdict teaches the next proposal (the body: its analyzer's reading of the
        winner against the loser), before the engine records the verdict. False when an urgent
        stop came first: the version stays undecided, and a resume judges it again (the ledger
        answers the calls already made)."""
        ...

    def record(self, label: str, phase: str) -> None:
        """A version's scores from its committed runs, and the summary files a decision at
        `phase` leaves beside them; the engine calls it for each of a verdict's measured
        versions before it records the verdict. Idempotent: a resume may call it again."""
        ...

    async def measure_test(self, label: str) -> dict[str, Any]:
        """The version on the sealed test split: at least {"score": float | None}."""
        ...

    def write_lineage(self, iteration: int) -> None:
        """The lineage files other tools read (history.json, ...), rebuilt from state.db."""
        ...
