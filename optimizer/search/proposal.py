"""What a proposal is made of: the proposer's answer (a summary, a rationale, edits), the evidence
it may see about the parent (failures, costs, feedback; train evals only), and what comes of it:
a candidate folder, or a rejection counted under the short reason of each problem."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class Edit(BaseModel):
    path: str = Field(description="Relative path inside the skill folder, e.g. SKILL.md")
    action: Literal["write", "replace", "delete"]
    content: str | None = Field(None, description="Whole new content, for write")
    old: str | None = Field(None, description="Exact text to replace, for replace")
    new: str | None = Field(None, description="Replacement text, for replace")


class ProposalAnswer(BaseModel):
    summary: str = Field(description="One line: what changed")
    rationale: str = Field(description="Why, citing the evidence")
    edits: list[Edit] = Field(min_length=1)


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


# The short name each kind of problem is counted under, by a phrase of its sentence; the sentences
# themselves are written for the proposer, which gets them back to fix its answer.
REASONS = (
    ("copies eval values", "copies specific values of the evals"),
    ("restates eval wording", "restates the evals' own wording"),
    ("old text not found", "does not occur"),
    ("old text not unique", "occurs "),
    ("old text empty", "'old' is empty"),
    ("outside the skill folder", "only files inside the skill folder"),
    ("description only", "description proposal"),
    ("name changed", "the name changed"),
    ("too large", "keep each file under"),
    ("too large", "keep it under"),
    ("answer not in the proposal form", "did not fit the proposal form"),
    ("internal error", "internal error"),
    ("file edit failed", "cannot be done"),
    ("file edit failed", "no such file"),
    ("file edit failed", "content is missing"),
    ("file edit failed", "needs both 'old' and 'new'"),
    ("SKILL.md deleted", "may not be deleted"),
)


def reason_of(problem: str) -> str:
    for reason, phrase in REASONS:
        if phrase in problem:
            return reason
    return "SKILL.md rules"  # skillmd.check_skill_md: front matter, name, description, body
