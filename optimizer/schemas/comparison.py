"""comparison.json: the blind comparator's verdict on two outputs, with its rubric and
expectation results."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from optimizer.schemas.common import OutputModel


class RubricSide(OutputModel):
    content: dict[str, int]
    structure: dict[str, int]
    content_score: float
    structure_score: float
    overall_score: float


class OutputQuality(OutputModel):
    score: float
    strengths: list[str] = []
    weaknesses: list[str] = []


class ExpectationCheck(OutputModel):
    misnamed = {"name": "text", "met": "passed"}
    text: str
    passed: bool


class ExpectationResults(OutputModel):
    passed: int = Field(ge=0)
    total: int = Field(ge=0)
    pass_rate: float = Field(ge=0, le=1)
    details: list[ExpectationCheck] = []


class SidesRubric(OutputModel):
    A: RubricSide
    B: RubricSide


class SidesQuality(OutputModel):
    A: OutputQuality
    B: OutputQuality


class SidesExpectations(OutputModel):
    A: ExpectationResults
    B: ExpectationResults


class Comparison(OutputModel):
    """comparison-N.json, the rubric form of seed 002 (what the blind comparator writes)."""

    winner: Literal["A", "B", "TIE"]
    reasoning: str
    rubric: SidesRubric
    output_quality: SidesQuality
    expectation_results: SidesExpectations | None = None


class ComparisonSummary(OutputModel):
    winner: str
    winner_skill: str
    loser_skill: str
    comparator_reasoning: str
