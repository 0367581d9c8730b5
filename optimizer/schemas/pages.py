"""The data each page of the HTML report is handed (report_files/<key>.js): its runs, their
outputs and transcripts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from optimizer.schemas.common import OutputModel


class ReportOutput(OutputModel):
    name: str
    size: int = Field(ge=0)
    kind: Literal["text", "image", "file"]


class ReportRun(OutputModel):
    """One run as a page of the HTML report shows it: its grading, outputs and transcript."""

    id: str
    path: str
    eval_id: str
    configuration: str
    run: str
    expectations: list[dict[str, Any]]
    outputs: list[ReportOutput]
    transcript: str
    judge_view: str


class ReportPage(OutputModel):
    """report_files/<key>.js beside report.html (the data it hands to the page): one version's
    change, numbers and runs, or the baseline's or the sealed test's runs."""

    runs: list[ReportRun]
    failing: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
