"""optimizer/words.py, the one place that words counts, money, cut texts, stop reasons and
decisions: a count agrees with its noun, dollars are cents, a cut text ends at a whole word with
an ellipsis, and every stop reason and decision reason the code can produce is said once, with
no parentheses inside parentheses; then the lines that use it (the live run, lineage, status)."""

from __future__ import annotations

import ast
import re
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest
from rich.console import Console

from optimizer import words
from optimizer.budget import stops
from optimizer.model.budget import Budget
from optimizer.report import read
from optimizer.report.live import Reporter
from optimizer.store.db import Store

PACKAGE = Path(__file__).resolve().parents[2] / "optimizer"


def test_counts_agree_with_their_nouns():
    assert words.plural(1, "duplicate") == "1 duplicate"
    assert words.plural(0, "duplicate") == "0 duplicates"
    assert words.plural(6, "time") == "6 times"
    assert words.plural(2, "match") == "2 matches"
    assert words.plural(3, "query", "queries") == "3 queries"
    assert read.proposals_line(
        {"proposals": 1, "versions": 1, "duplicates": 1, "rejected": 0, "reasons": {}}
    ) == ("1 proposal: 1 version, 1 duplicate, 0 rejected")  # was "1 proposals: 1 versions"


def test_dollars_are_cents_and_amounts_under_a_cent_keep_two_digits():
    assert words.dollars(4.7961) == "$4.80"  # was "$4.7961"
    assert words.dollars(0.0) == "$0.00" and words.dollars(-0.0) == "$0.00"
    assert words.dollars(0.25) == "$0.25"
    assert words.dollars(0.0042) == "$0.0042"
    assert words.dollars(0.00001) == "under $0.0001"
    assert words.dollars(None) == "—"


@pytest.mark.parametrize("limit", [20, 41, 42, 43, 60, 200])
def test_a_cut_text_ends_at_a_whole_word_with_an_ellipsis(limit):
    text = "End with a `## Summary` that gives the outcome and the main findings in two sentences."
    cut = words.clip(text, limit)
    assert len(cut) <= limit
    if len(text) <= limit:
        assert cut == text
    else:
        assert cut.endswith("…") and not cut.endswith((" …", ",…", ":…"))
        assert text.startswith(cut[:-1]) and text[len(cut) - 1] in " ,.:`"  # a word boundary


def test_joined_phrases_drop_their_own_full_stops():
    joined = words.phrases(["Point out gaps under a `## Notes` heading.", "End with a summary."])
    assert joined == "Point out gaps under a `## Notes` heading; End with a summary"  # "heading.;"


def _stop_reasons(tmp_path: Path) -> list[str]:
    """Every reason a stop condition (budget/stops.py) gives, from the conditions themselves, and
    the client's budget refusal, which reaches the run as its reason (search/engine.py)."""
    flag = stops.SignalFlag(received=["SIGINT"])
    stop_file = tmp_path / "STOP"
    stop_file.write_text("")
    state = stops.LoopState(iterations_done=3, iterations_without_win=3, best_score=1.0)
    state.spent_usd = 5.0
    conditions = [
        stops.MaxIterations(3),
        stops.Plateau(3),
        stops.Target(0.9),
        stops.OverBudget(Budget(5.0, counted_usd=5.0)),
        stops.Deadline(datetime(2026, 1, 1), clock=lambda: datetime(2026, 1, 2)),
        stops.StopFile(stop_file),
        flag,
    ]
    found = [c(state) for c in conditions]
    assert all(found), found
    budget_refusal = (
        "The next grader call to claude-x (estimated $0.07) would take the run's spend from "
        "$4.95 past its budget of $5.00, so it was not started."
    )
    return [r for r in found if r] + [budget_refusal]


def test_every_stop_reason_is_said_once_after_stopped(tmp_path):
    for reason in _stop_reasons(tmp_path):
        line = words.ended("stopped", reason)
        assert line.startswith("stopped"), line
        assert "stopped" not in line[len("stopped") :], line  # "stopped (stopped by SIGINT)"
        assert not re.search(r"\([^()]*\(", line), line  # "(… (plateau))"
        assert not line.endswith("."), line
        status_row = words.after_stopped(reason)
        assert not status_row.startswith(("stopped", ":")) and status_row, status_row
    assert words.ended("stopped", "stopped by SIGINT") == "stopped by SIGINT"
    assert words.ended("stopped", "no win in 3 iterations (plateau)") == (
        "stopped: no win in 3 iterations (plateau)"
    )


def _decision_reasons() -> list[tuple[str, str]]:
    """(verdict, reason's opening) of every decision reason written in the decision and search modules: the
    string and f-string literals that open with "won:", "lost:" or "tie:"."""
    found = []
    for name in (
        "decide/step.py",
        "decide/sequential.py",
        "decide/adopt.py",
        "search/engine.py",
        "budget/stops.py",
        "search/description.py",
    ):
        tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            text = None
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr) and node.values:
                first = node.values[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    text = first.value
            m = re.match(r"(won|lost|tie): ", text or "")
            if m:
                found.append((m.group(1), text or ""))
    return found


def test_every_decision_reason_in_the_code_says_its_verdict_once():
    reasons = _decision_reasons()
    assert {v for v, _ in reasons} == {"won", "lost", "tie"} and len(reasons) >= 10
    for verdict, reason in reasons:
        line = words.decision("v4", verdict, reason + "Δ = -0.045")
        assert line.startswith(f"v4 {verdict}: "), line
        assert not line.startswith(f"v4 {verdict}: {verdict}:"), line  # "v4 tie: tie:"
    screened = "stopped at screening: mean difference -0.243 over 2 evals is below -0.15 (clearly worse than the parent)."
    assert words.decision("v2", "lost", screened) == f"v2 lost: {screened}"


def test_the_decisions_of_a_real_run_are_said_once_each(simulated):
    with sqlite3.connect(simulated / "state.db") as db:
        rows = db.execute("select version, decision, reason from decisions").fetchall()
    assert rows
    for label, verdict, reason in rows:
        line = words.decision(label, verdict, reason)
        assert f"{verdict}: {verdict}:" not in line and line.count(f" {verdict}: ") == 1, line


def test_the_live_run_says_a_decision_and_a_stop_once(tmp_path):
    console = Console(record=True, width=300, color_system=None)
    store = Store(tmp_path / "state.db")
    try:
        ui = Reporter(console, store, simulated=False)
        ui.decided("v1", "won", "won: Δ = +0.223 lies above zero.")
        ui.decided("v4", "tie", "tie: Δ = -0.045 is inconclusive.")
        ui.finished("stopped by SIGINT", "v1")
        ui.finished("no win in 3 iterations (plateau)", "v1")
    finally:
        store.close()
    assert console.export_text().splitlines() == [
        "v1 won: Δ = +0.223 lies above zero.",
        "v4 tie: Δ = -0.045 is inconclusive.",
        "stopped by SIGINT; current best: v1",
        "stopped: no win in 3 iterations (plateau); current best: v1",
    ]


def test_an_interval_names_its_level_as_a_ci():
    assert words.ci(0.95) == "95% CI" and words.ci(0.2) == "20% CI"
    assert words.ci(0.965) == "96.5% CI" and words.ci(0.9994) == "99.940% CI"


def test_a_step_scope_is_worded_one_way():
    from optimizer.decide import sequential
    from optimizer.report import summary

    assert words.step_scope("general") == sequential.STEP["general"] == summary.SCOPES["general"]
    assert words.step_scope("tasks") == "a step on these tasks" == summary.SCOPES["these_tasks"]
    assert words.step_scope("general", "queries") == "a step over queries like these"
