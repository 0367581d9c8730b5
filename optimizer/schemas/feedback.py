"""feedback.json (human reviews, seed 001) and eval_feedback_aggregate.json (seed 004)."""

from __future__ import annotations

from pydantic import Field

from optimizer.schemas.common import OutputModel


class Review(OutputModel):
    run_id: str
    feedback: str
    timestamp: str


class Feedback(OutputModel):
    """feedback.json, seed 001: human reviews written by `optimizer review`."""

    reviews: list[Review]
    status: str


class AggregateSuggestion(OutputModel):
    keep_null = ("assertion",)
    frequency: int = Field(ge=1)
    # null (not absent) when the suggestion is about a missing assertion
    assertion: str | None
    reason: str
    action: str


class EvalFeedbackAggregate(OutputModel):
    """eval_feedback_aggregate.json, seed 004."""

    skill_name: str
    iteration: int = Field(ge=0)
    total_runs: int = Field(ge=0)
    suggestions: list[AggregateSuggestion] = []
