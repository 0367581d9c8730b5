"""The proposer's answer (a summary, a rationale, edits to the skill's files) and the short reason
each kind of refused proposal is counted under (the estimate sizes the answer's tool; the views
count refusals by reason)."""

from __future__ import annotations

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
