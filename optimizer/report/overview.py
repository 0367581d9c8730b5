"""What the report's overview shows above and beside its charts, as data: the headline, the next
commands, train and sealed scores side by side and the winning diff (all from the morning
summary, so report.html and summary.md say the same thing), the score chart's points (pending
versions included), and the suggestions for the evals, one row per expectation."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import structlog
from typing_extensions import TypedDict

from optimizer import words
from optimizer.grow.suggest import becomes_candidate
from optimizer.report import summary
from optimizer.report.info import StatusInfo
from optimizer.report.view import RunView
from optimizer.schemas import Json, JsonObject, SummaryNumbers

log = structlog.get_logger()
SUGGESTIONS_SHOWN = 10  # rows of the suggestions table; the rest are counted ("and 12 more")
_EVAL_PREFIX = re.compile(r"^\s*Eval\s+(\S+?):\s*")


class ScoreRow(TypedDict):
    """One split's scores beside each other (train or sealed test), as the overview shows them."""

    split: str
    v0: float | None
    best: float | None
    delta: float | None
    interval: str | None
    evals: int


class Headline(TypedDict):
    """The morning summary's headline, scores, diff and next commands."""

    headline: str
    best: str
    won: bool
    ended: str
    scores: list[ScoreRow]
    diff: str | None
    next: list[JsonObject]


class ChartPoint(TypedDict):
    """A version on the score chart, pending or not."""

    label: Json
    score: Json
    score_ci: Json
    decision: Json
    parent: Json
    is_best: bool
    pending: bool
    failed: bool


class Suggestion(TypedDict):
    """One expectation's advice, over the evals it came from."""

    assertion: Json
    reason: str
    action: Json
    frequency: int
    evals: list[str]
    candidate: bool


class Suggestions(TypedDict):
    """The suggestions table: its rows, how many more, and how many become candidate evals."""

    total_runs: Json
    suggestions: list[Suggestion]
    more: int
    items: int
    candidates: int


def headline(run_dir: Path, data: RunView, status: StatusInfo | None) -> Headline | None:
    """The morning summary's headline, scores, diff and next commands; None without state.db."""
    if status is None:
        return None
    try:
        s = summary.build(run_dir, data=data, info=status)
    except Exception:  # a broken snapshot or version file must not stop the whole report
        log.exception("report.headline_failed", run=str(run_dir))
        return None
    return {
        "headline": s.headline,
        "best": s.best,
        "won": s.won,
        "ended": words.ended(s.status, s.stop_reason),
        "scores": [_row("train", s.train, s.won), _row("sealed test", s.sealed, s.won)],
        "diff": s.diff,
        "next": [step.model_dump() for step in s.next],
    }


def _row(split: str, n: SummaryNumbers | None, won: bool) -> ScoreRow:
    if n is None:
        return {
            "split": split,
            "v0": None,
            "best": None,
            "delta": None,
            "interval": None,
            "evals": 0,
        }
    interval = (
        f"[{n.low:+.3f}, {n.high:+.3f}] {n.level or format(n.confidence, '.0%')}"
        if n.low is not None and n.high is not None
        else "no interval from one eval"
        if n.evals == 1
        else None
    )
    return {
        "split": split,
        "v0": n.v0,
        "best": n.best if won else None,
        "delta": n.delta if won else None,
        "interval": interval if won else None,
        "evals": n.evals,
    }


def chart(nodes: Sequence[JsonObject]) -> list[ChartPoint]:
    """Every version in order for the score chart: a pending one (not decided yet, or still
    being measured) is a point too, at its score when it has one, marked as pending."""
    return [
        {
            "label": n["label"],
            "score": n.get("score"),
            "score_ci": n.get("score_ci"),
            "decision": n.get("decision"),
            "parent": n.get("parent"),
            "is_best": bool(n.get("is_best")),
            "pending": not n.get("decision") and n.get("status") != "failed",
            "failed": n.get("status") == "failed",
        }
        for n in nodes
    ]


def suggestions(aggregate: object) -> Suggestions | None:
    """eval_feedback_aggregate.json, one row per expectation: the same advice about one
    expectation in several evals is one row with its count and the evals it came from, the most
    frequent first, at most SUGGESTIONS_SHOWN rows and how many more."""
    if not isinstance(aggregate, dict):
        return None
    groups: dict[tuple[str, str], Suggestion] = {}
    for item in aggregate.get("suggestions") or []:
        if not isinstance(item, dict):
            continue
        reason = str(item.get("reason") or "")
        m = _EVAL_PREFIX.match(reason)
        said = reason[m.end() :] if m else reason
        assertion = item.get("assertion")
        said = said.removeprefix(f"expectation '{assertion}' ")  # the table names it already
        key = (
            assertion if assertion is not None else f"(missing) {said}",
            str(item.get("action") or ""),
        )
        group = groups.setdefault(
            key,
            {
                "assertion": assertion,
                "reason": said,
                "action": item.get("action") or "",
                "frequency": 0,
                "evals": [],
                "candidate": False,
            },
        )
        if group["reason"] != said:  # "… is flaky - passed 6 of 9 runs" in one, 7 of 9 in another
            group["reason"] = group["reason"].split(" - ")[0]
        group["frequency"] += int(item.get("frequency") or 1)
        if becomes_candidate(assertion, reason, item.get("source")):
            group["candidate"] = True
        if m and m.group(1) not in group["evals"]:
            group["evals"].append(m.group(1))
    rows = sorted(groups.values(), key=lambda g: -g["frequency"])  # stable: first seen first
    return {
        "total_runs": aggregate.get("total_runs"),
        "suggestions": rows[:SUGGESTIONS_SHOWN],
        "more": max(0, len(rows) - SUGGESTIONS_SHOWN),
        "items": sum(g["frequency"] for g in rows),
        # Rows `evals suggest` turns into candidate evals; the rest are notes to read.
        "candidates": sum(g["candidate"] for g in rows),
    }
