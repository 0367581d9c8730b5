"""The answer the grader gives: the input schema of its forced `submit_grading` tool, checked for
completeness against the eval it grades. Never computes a summary: the arithmetic is ours."""

from __future__ import annotations

import functools
from collections import Counter

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Answer(BaseModel):
    # Extra keys a model adds (a summary it was told we compute) are ignored, not an error.
    model_config = ConfigDict(extra="ignore")


class JudgedExpectation(_Answer):
    text: str = Field(description="The expectation, copied verbatim")
    passed: bool
    evidence: str = Field(description="A quote with its file and line, or what is missing")


class ClaimAnswer(_Answer):
    claim: str
    type: str = Field(description="factual, process or quality")
    verified: bool
    evidence: str


class NotesAnswer(_Answer):
    uncertainties: list[str] = []
    needs_review: list[str] = []
    workarounds: list[str] = []


class SuggestionAnswer(_Answer):
    assertion: str | None = Field(None, description="The expectation concerned; omit for a gap")
    reason: str


class FeedbackAnswer(_Answer):
    suggestions: list[SuggestionAnswer] = []
    overall: str = ""


class ScoreAnswer(_Answer):
    score: int = Field(ge=1, le=5)
    evidence: str


class JudgeAnswer(_Answer):
    """What `submit_grading` carries; the summary and rubric arithmetic are ours, not the judge's."""

    expectations: list[JudgedExpectation] = Field(description="Every expectation, verbatim, once")
    claims: list[ClaimAnswer] = []
    user_notes_summary: NotesAnswer = NotesAnswer()
    eval_feedback: FeedbackAnswer = FeedbackAnswer()
    rubric_scores: dict[str, ScoreAnswer] = Field(
        default_factory=dict, description="Dimension name -> score 1..5 and evidence"
    )


def answer_schema(texts: list[str], dimensions: list[str]) -> type[JudgeAnswer]:
    """JudgeAnswer that also checks this eval's completeness, so a reply missing an expectation
    or a dimension fails validation and goes down the client's repair path. One class per eval:
    the client builds each class's tool definition once."""
    return _answer_schema(tuple(texts), tuple(dimensions))


@functools.lru_cache(maxsize=512)
def _answer_schema(texts: tuple[str, ...], dimensions: tuple[str, ...]) -> type[JudgeAnswer]:
    wanted = Counter(t.strip() for t in texts)
    dims = set(dimensions)

    class Answer(JudgeAnswer):
        """The grading of one run: every expectation verbatim once, every rubric dimension once."""

        model_config = ConfigDict(title="JudgeAnswer")

        @model_validator(mode="after")
        def _complete(self) -> Answer:
            got = Counter(e.text.strip() for e in self.expectations)
            problems = [f"expectation missing: {t!r}" for t in wanted if got[t] < wanted[t]]
            problems += [
                f"expectation returned more than once: {t!r}" for t in wanted if got[t] > wanted[t]
            ]
            problems += [
                f"not an expectation of this task (copy texts verbatim): {t!r}"
                for t in got
                if t not in wanted
            ]
            problems += [
                f"rubric dimension missing: {d!r}" for d in sorted(dims - self.rubric_scores.keys())
            ]
            problems += [
                f"not a rubric dimension: {d!r}" for d in sorted(self.rubric_scores.keys() - dims)
            ]
            if problems:
                raise ValueError("; ".join(problems))
            return self

    return Answer
