"""A step is a move of the search, not a claim (docs/design.md §8, §16): how cheaply a step may be
taken is a setting the bench measures, and the settings do what they say."""

from __future__ import annotations

import sqlite3

import pytest
from inprocess import EXAMPLE, cli

RUN = ("run", str(EXAMPLE), "--provider", "sim", "--set", "sim.seed=9", "--max-iterations", "2")


@pytest.mark.slow
def test_a_child_starts_at_first_runs_while_v0_keeps_runs_per_eval(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    cli(monkeypatch, None, *RUN, "--run-dir", str(folder), "--set", "selection.first_runs=1")
    with sqlite3.connect(folder / "state.db") as db:
        most = dict(
            db.execute(
                "select prefix, max(run_number) from gradings where configuration = 'with_skill' "
                "group by prefix"
            ).fetchall()
        )
        decided = [
            r[0] for r in db.execute("select version from decisions where stage = 'benchmark'")
        ]
    assert most["v0/"] >= 3  # v0 measured at evals.runs_per_eval
    assert decided, "no child reached the rule"
    # A child decided at its first look has one run an eval; none starts above the schedule's 1, 2, 3.
    assert min(most[f"{v}/"] for v in decided) < 3
