"""evals/candidates.json (ours): evals drafted from the user's sessions or a run's findings,
waiting for the user's review; only an accepted candidate ever reaches evals.json."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from optimizer.schemas.common import ExactModel

CandidateKind = Literal["new_eval", "sharpen", "add_check", "drop"]
CandidateStatus = Literal["pending", "accepted", "rejected"]


class CandidateOrigin(ExactModel):
    """Where a candidate came from: a session file and its time, or a run folder."""

    source: Literal["session", "run"]
    file: str
    time: str = ""
    session_id: str = ""


class CandidateSignals(ExactModel):
    """What the session said about the outcome: the user's later messages and the tool errors."""

    corrections: list[str] = []
    follow_ups: list[str] = []
    errors: list[str] = []
    outputs: list[str] = []
    final_answer: str = ""


class CandidateEval(ExactModel):
    """The eval a candidate would add (or the sharper expectation it would put in place)."""

    name: str = ""
    prompt: str = ""
    expected_output: str = ""
    files: list[str] = []
    expectations: list[str] = []


class Candidate(ExactModel):
    id: str = Field(min_length=1)
    kind: CandidateKind
    status: CandidateStatus = "pending"
    origin: CandidateOrigin
    eval: CandidateEval
    signals: CandidateSignals = CandidateSignals()
    # Files the task used but that were not copied into evals/files/ (too large, outside the
    # project, gone): named so the user can add them by hand.
    files_named: list[str] = []
    # sharpen / add_check / drop: the eval (and for sharpen the expectation text) it is about.
    target_eval_id: int | None = None
    replaces: str | None = None
    reason: str = ""
    drafted_by: str = "heuristics"
    # Set on acceptance: the id it got in evals.json and the split its hash placed it in.
    eval_id: int | None = None
    split: Literal["train", "test"] | None = None
    decided_at: str | None = None


class CandidatesFile(ExactModel):
    skill_name: str
    candidates: list[Candidate] = []
