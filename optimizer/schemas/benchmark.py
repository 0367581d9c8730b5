"""benchmark.json (full form, seeds 002 and 004): every run of every configuration and the
summaries over them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from optimizer.schemas.common import OutputModel
from optimizer.schemas.grading import GradedExpectation

Configuration = Literal["with_skill", "without_skill"]


class BenchmarkMetadata(OutputModel):
    skill_name: str
    timestamp: str
    skill_path: str | None = None
    executor_model: str | None = None
    analyzer_model: str | None = None
    evals_run: list[int | str] = []
    runs_per_configuration: int | None = Field(default=None, ge=1)


class RunResult(OutputModel):
    pass_rate: float = Field(ge=0, le=1)
    passed: int = Field(ge=0)
    failed: int | None = Field(default=None, ge=0)
    total: int = Field(ge=0)
    time_seconds: float = Field(ge=0)
    tokens: int = Field(ge=0)
    tool_calls: int | None = Field(default=None, ge=0)
    errors: int = Field(ge=0)


class BenchmarkRun(OutputModel):
    # Seed 002: `config` or a top-level `pass_rate` makes the viewer show empty values.
    misnamed = {
        "config": "configuration",
        **{
            k: f"result.{k}"
            for k in ("pass_rate", "passed", "failed", "total", "time_seconds", "tokens")
        },
    }
    eval_id: int
    eval_name: str
    configuration: Configuration
    run_number: int = Field(ge=1)
    result: RunResult
    expectations: list[GradedExpectation] = []
    notes: list[str] = []


class Stat(OutputModel):
    mean: float
    stddev: float = Field(ge=0)
    min: float
    max: float


class ConfigSummary(OutputModel):
    misnamed = {"mean_pass_rate": "pass_rate.mean"}
    pass_rate: Stat
    time_seconds: Stat
    tokens: Stat
    rubric_normalized: Stat | None = None
    overall_efficiency: Stat | None = None
    consistency: float | None = Field(default=None, ge=0, le=1)
    rubric_dimensions: dict[str, Stat] | None = None


class RunSummary(OutputModel):
    misnamed = {"deltas": "delta"}
    with_skill: ConfigSummary
    # absent when baseline_comparison is off
    without_skill: ConfigSummary | None = None
    delta: dict[str, str] = {}


class Benchmark(OutputModel):
    """benchmark.json, seed 002 (+ seed 004 rubric stats in run_summary)."""

    misnamed = {"summaries": "run_summary", "deltas": "run_summary.delta"}
    metadata: BenchmarkMetadata
    runs: list[BenchmarkRun]
    run_summary: RunSummary
    notes: list[str] = []


class BenchmarkFragment(OutputModel):
    """Seed 004 shows only `run_summary`; kept so its example checks, never written."""

    run_summary: RunSummary
