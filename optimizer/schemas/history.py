"""history.json: the lineage of versions, in the `iterations` form of seed 002 and the
`versions` form of seed 001."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from optimizer.schemas.common import OutputModel
from optimizer.schemas.selection import Adoption


class HistoryIteration(OutputModel):
    keep_null = ("parent",)
    misnamed = {"pass_rate": "expectation_pass_rate", "result": "grading_result"}
    version: str
    parent: str | None
    expectation_pass_rate: float = Field(ge=0, le=1)
    grading_result: Literal["baseline", "won", "lost", "tie"]
    is_current_best: bool


class History(OutputModel):
    """history.json in the `iterations` form of seed 002 (body runs)."""

    started_at: str
    skill_name: str
    current_best: str
    iterations: list[HistoryIteration]
    # Ours, beside the seed's: the version the user has (the last certified adoption's) and every
    # adoption with its claim; current_best stays the search's best, where a resume goes on.
    adopted: str = "v0"
    adoptions: list[Adoption] = []

    @model_validator(mode="after")
    def _best_agrees(self) -> History:
        flagged = [it.version for it in self.iterations if it.is_current_best]
        if self.iterations and flagged != [self.current_best]:
            raise ValueError(
                f"current_best is '{self.current_best}' but is_current_best marks {flagged}"
            )
        return self


class HistoryVersion(OutputModel):
    description: str
    pass_rate: float = Field(ge=0, le=1)
    precision: float | None = Field(default=None, ge=0, le=1)
    recall: float | None = Field(default=None, ge=0, le=1)
    iteration: int = Field(ge=0)


class HistoryVersions(OutputModel):
    """history.json in the `versions` form of seed 001 (description runs)."""

    versions: list[HistoryVersion]
