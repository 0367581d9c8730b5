"""Siblings are each other's rivals in a description fleet: a sibling's should-trigger requests are
a member's should-not queries, every probe lists the siblings, a child description that takes a
sibling's requests is refused, and the morning's table shows who fired for whose requests."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from optimizer.inputs.triggers import Query, TriggerSet
from optimizer.search.description import took_from_siblings
from optimizer.search.probe import DISTRACTORS_PER_REQUEST, offered

ROOT = Path(__file__).resolve().parents[2]


def tset(*queries: tuple[str, bool]) -> TriggerSet:
    return TriggerSet([Query(i, q, t) for i, (q, t) in enumerate(queries)], Path("t.json"), "h", {})


def test_a_siblings_requests_become_should_not_queries_owned_by_it():
    mine = tset(("profile this csv", True), ("what is the weather", False))
    theirs = tset(("write a memo", True), ("profile this csv", True), ("tell a joke", False))
    both = mine.with_siblings([("memo-writer", "Writes memos.", theirs)])
    added = both.queries[len(mine.queries) :]
    assert [(q.query, q.should_trigger, q.owner) for q in added] == [
        ("write a memo", False, "memo-writer")
    ]  # its should-not query is not a request of its own; a query both have is kept once
    assert both.rivals == (("memo-writer", "Writes memos."),)
    assert both.hash != mine.hash


def test_every_probe_lists_every_sibling_beside_the_distractors():
    query = Query(0, "write a memo", True)
    rivals = [("memo-writer", "Writes memos."), ("deck-maker", "Makes slides.")]
    listed = offered("csv-report", "Profiles CSV files.", query, 1, seed=3, rivals=rivals)
    names = [name for name, _ in listed]
    assert {"csv-report", "memo-writer", "deck-maker"} <= set(names)
    assert len(names) == DISTRACTORS_PER_REQUEST + 3 and len(set(names)) == len(names)
    alone = offered("csv-report", "Profiles CSV files.", query, 1, seed=3)
    assert len(alone) == DISTRACTORS_PER_REQUEST + 1  # a single night lists as before


def rates(**by_id: float) -> dict[str, float]:
    return {k[1:]: v for k, v in by_id.items()}


def test_a_child_that_takes_a_siblings_requests_is_refused_in_one_sentence():
    queries = {
        0: Query(0, "profile this csv", True),
        1: Query(1, "write a memo", False, owner="memo-writer"),
        2: Query(2, "draft a briefing note", False, owner="memo-writer"),
        3: Query(3, "tell a joke", False),
    }
    parent = rates(q0=1.0, q1=0.0, q2=0.34, q3=0.0)
    thief = rates(q0=1.0, q1=0.67, q2=1.0, q3=0.0)
    said = took_from_siblings(thief, parent, queries)
    assert said is not None and said.startswith("refused: the description takes requests")
    assert "memo-writer's: it fires on 2 more of the 2 (the parent on 0)" in said
    assert took_from_siblings(parent, parent, queries) is None
    assert took_from_siblings(rates(q0=1.0, q1=0.0, q2=0.0, q3=1.0), parent, queries) is None


@pytest.mark.slow  # a fleet night through the command line
def test_a_planted_thief_shows_in_the_fleets_table_of_who_fired_for_whose_requests(tmp_path):
    from test_daemon import cli

    skills = tmp_path / "skills"
    shutil.copytree(ROOT / "tests" / "fixtures" / "csv-report", skills / "csv-report")
    shutil.copytree(ROOT / "examples" / "memo-writer", skills / "memo-writer")
    memo_requests = [
        "Write a one-page memo announcing the new office hours as a Word document.",
        "I need a briefing note for the board about the budget freeze, as a PDF.",
        "Make an announcement card image telling staff the kitchen is closed Friday.",
        "Draft a memo to the team about the parking changes and save it as a docx.",
    ]
    others = ["What is the capital of Australia?", "Write a haiku about autumn rain."]
    (skills / "memo-writer" / "evals" / "trigger_evals.json").write_text(
        json.dumps(
            [{"query": q, "should_trigger": True} for q in memo_requests]
            + [{"query": q, "should_trigger": False} for q in others]
        )
    )
    md = skills / "csv-report" / "SKILL.md"  # the thief: its description claims memos too
    text = md.read_text()
    head, sep, rest = text.partition("description: ")
    md.write_text(
        head
        + sep
        + "Writes one-page office memos, briefing notes, announcement cards as Word documents "
        "or PDFs for the board, the team and staff about office hours, budgets and parking; " + rest
    )
    out = tmp_path / "night"
    done = cli(
        "run", str(skills), "--target", "description", "--provider", "sim", "--budget-usd", "3",
        "--max-iterations", "1", "--out", str(out), "--unconfined",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(out / "csv-report" / "state.db") as db:
        split = json.loads(db.execute("select split_json from runs").fetchone()[0])
    owned = [q for q in split["queries"] if q.get("owner") == "memo-writer"]
    assert len(owned) == len(memo_requests)
    assert split["rivals"][0][0] == "memo-writer"
    table = (out / "summary.md").read_text().split("## Who fired for whose requests")[1]
    row = next(line for line in table.splitlines() if line.startswith("| csv-report |"))
    memo_column = row.split("|")[2].strip()  # columns: csv-report, memo-writer, other requests
    fired_at_v0 = float(memo_column.split("→")[0])
    assert fired_at_v0 > 0, table
