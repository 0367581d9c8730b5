"""analysis.json: the analyzer's reading of a comparison, with its improvement suggestions."""

from __future__ import annotations

from typing import Literal

from optimizer.schemas.common import OutputModel
from optimizer.schemas.comparison import ComparisonSummary


class FollowingSide(OutputModel):
    score: float
    issues: list[str] = []


class InstructionFollowing(OutputModel):
    winner: FollowingSide
    loser: FollowingSide


class ImprovementSuggestion(OutputModel):
    priority: Literal["high", "medium", "low"]
    category: str
    suggestion: str
    expected_impact: str


class TranscriptInsights(OutputModel):
    winner_execution_pattern: str
    loser_execution_pattern: str


class Analysis(OutputModel):
    """analysis.json, seed 002 (post-hoc analyzer)."""

    comparison_summary: ComparisonSummary
    winner_strengths: list[str] = []
    loser_weaknesses: list[str] = []
    instruction_following: InstructionFollowing | None = None
    improvement_suggestions: list[ImprovementSuggestion] = []
    transcript_insights: TranscriptInsights | None = None
