"""trigger.json (ours, not a seed file): a description version's probe on each split."""

from __future__ import annotations

from typing import Literal

from optimizer.schemas.common import ExactModel


class QueryOutcome(ExactModel):
    rate: float
    runs: int
    passed: bool
    should_trigger: bool


class TriggerMetrics(ExactModel):
    """probe.metrics of one split."""

    pass_rate: float | None
    precision: float | None
    recall: float | None
    f1: float | None
    ci: dict[str, list[float | None] | None]
    queries: int
    missing_queries: int
    probe_errors: int
    constant_signal: Literal["never", "always", False]
    per_query: dict[str, QueryOutcome]


class TriggerFile(ExactModel):
    """trigger.json of a description version (search/description.py)."""

    version: str
    probe: str
    train: TriggerMetrics
    validation: TriggerMetrics
