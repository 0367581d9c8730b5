"""What a proposal is made of: the evidence the proposer may see about the parent (failures, costs,
feedback; train evals only) and what comes of its answer (schemas.ProposalAnswer): a candidate
folder, or a rejection counted under the short reason of each problem (schemas.reason_of)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from optimizer.schemas import reason_of


@dataclass
class Failure:
    eval_id: int
    text: str
    count: int
    evidence: str = ""
    excerpt: str = ""  # the end of a failing run's transcript: what the agent did, not only why


@dataclass
class EvalCost:
    """What the skill costs on one train eval, as the mean over the parent's scored runs."""

    eval_id: int
    runs: int
    pass_rate: float
    tokens: float
    turns: float


@dataclass
class Feedback:
    """Everything the proposer may see about the parent; train evals only."""

    failures: list[Failure] = field(default_factory=list)
    costs: list[EvalCost] = field(default_factory=list)
    repeated_work: list[str] = field(default_factory=list)  # tool calls that recur across evals
    judge_feedback: list[str] = field(default_factory=list)
    analysis_suggestions: list[str] = field(default_factory=list)
    human_feedback: list[str] = field(default_factory=list)
    lost_attempts: list[str] = field(default_factory=list)
    missed_queries: list[tuple[str, bool]] = field(default_factory=list)


@dataclass
class Candidate:
    folder: Path
    summary: str
    rationale: str


@dataclass
class Rejected:
    problems: list[str]

    @property
    def reasons(self) -> list[str]:
        """The short reasons the rejection is counted under (status, lineage, the report)."""
        return sorted({reason_of(p) for p in self.problems})
