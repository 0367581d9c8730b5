"""The search's one event stream: the dispatcher calls its handlers in order, and what a step
emits through RunState reaches state.db, the run log and the live line from that one call."""

from __future__ import annotations

import json
from types import SimpleNamespace

from rich.console import Console

from optimizer import events
from optimizer.budget.stops import StopRules
from optimizer.config import Settings
from optimizer.report.live import Reporter
from optimizer.search.state import RunState
from optimizer.store import runs
from optimizer.store.db import Store
from optimizer.store.files import Workspace


def test_handlers_are_called_in_the_order_they_subscribed():
    seen: list[tuple[str, events.Event]] = []
    stream = events.Events()
    for name in ("first", "second", "third"):
        stream.subscribe(lambda event, name=name: seen.append((name, event)))
    stream.emit(events.Activity("v1: screening"))
    stream.emit(events.TrialGraded())
    assert seen == [
        ("first", events.Activity("v1: screening")),
        ("second", events.Activity("v1: screening")),
        ("third", events.Activity("v1: screening")),
        ("first", events.TrialGraded()),
        ("second", events.TrialGraded()),
        ("third", events.TrialGraded()),
    ]


def test_one_emit_reaches_state_db_the_log_and_the_live_line(tmp_path, log_capture):
    ws = Workspace(tmp_path / "run")
    store = Store(tmp_path / "state.db")
    try:
        split = {"train": [0, 1], "test": []}
        store.db["runs"].insert(
            {"id": "run", "skill_name": "s", "split_json": json.dumps(split), "current_best": "v0"}
        )
        console = Console(record=True, width=300, color_system=None)
        reporter = Reporter(console, store, simulated=False)
        client = SimpleNamespace(spent_usd=lambda: 0.0)
        run = RunState(ws, store, client, Settings(), reporter.on, StopRules(()))  # type: ignore[arg-type]
        run.emit(events.Activity("v1: screening"))
        run.emit(events.TrialGraded())
        run.emit(events.Decided("v1", "v0", "won", "benchmark", "won: Δ = +0.2 above zero.", True))
        stage = (runs.row(store) or runs.Run()).activity
    finally:
        store.close()
    assert stage == "v1: screening"
    assert reporter.runs == 1
    assert console.export_text().splitlines()[-1] == "v1 won: Δ = +0.2 above zero."
    # The log has exactly the line record_decision wrote before the stream, and only that one.
    assert log_capture == [
        {
            "event": "selection.decided",
            "log_level": "info",
            "version": "v1",
            "parent": "v0",
            "decision": "won",
            "phase": "benchmark",
            "reason": "won: Δ = +0.2 above zero.",
            "promoted": True,
        }
    ]


def test_a_refused_proposal_is_said_with_why_and_what_it_cost(tmp_path):
    from optimizer.search import copied

    store = Store(tmp_path / "state.db")
    try:
        store.db["runs"].insert({"id": "run", "skill_name": "s", "current_best": "v0"})
        store.db["calls"].insert(
            {"hash": "h", "role": "proposer", "scope": "proposal 1-1", "cost_usd": 0.41}
        )
        console = Console(record=True, width=300, color_system=None)
        reporter = Reporter(console, store, simulated=False)
        problem = copied.problem(["Team price"])
        reporter.on(events.ProposalMade(1, 1, {"rejected": str([problem])}, problem))
        reporter.on(events.ProposalMade(1, 0, {"label": "v1"}))  # made a version: no line
    finally:
        store.close()
    assert console.export_text().splitlines() == [
        "iteration 1: proposal 2 refused: copies specific values of the evals into the skill "
        "('Team price'); $0.41"
    ]
