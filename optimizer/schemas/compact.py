"""Compact forms of seed 001 (grading, benchmark, comparison): read as input dialects, never
written."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from optimizer.schemas.benchmark import Configuration
from optimizer.schemas.common import OutputModel
from optimizer.schemas.grading import GradedExpectation


class CompactMetrics(OutputModel):
    execution_time_ms: int | None = None
    tokens_used: int | None = None
    tool_calls: int | None = None


class CompactGrading(OutputModel):
    expectations: list[GradedExpectation]
    pass_rate: float = Field(ge=0, le=1)
    metrics: CompactMetrics | None = None
    claims: list[str] = []
    critique: str = ""


class CompactRun(OutputModel):
    eval_id: int
    config: Configuration
    pass_rate: float = Field(ge=0, le=1)


class CompactConfigSummary(OutputModel):
    mean_pass_rate: float = Field(ge=0, le=1)
    stddev: float = Field(ge=0)


class CompactSummaries(OutputModel):
    with_skill: CompactConfigSummary | None = None
    without_skill: CompactConfigSummary | None = None


class CompactBenchmark(OutputModel):
    metadata: dict[str, Any] = {}
    runs: list[CompactRun]
    summaries: CompactSummaries
    deltas: dict[str, float] = {}


class SimpleComparison(OutputModel):
    winner: Literal["output_a", "output_b", "tie"]
    reasoning: str
    scores: dict[str, float] = {}
    content_score: dict[str, float] = {}
    structure_score: dict[str, float] = {}
