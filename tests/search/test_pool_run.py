"""A night with pool parents (loop.parent_selection = "pool", docs/design.md §3): every iteration
steps from v0 or a child that won before it started, and the current best is the pool's best
estimate as the ledger holds it when the night ends, wherever the last winner stands."""

from __future__ import annotations

import json
from contextlib import closing

import pytest
from inprocess import EXAMPLE, cli

from optimizer.search import standing
from optimizer.store import readonly
from optimizer.store.db import Store

# A night whose seed makes winners fall back: a later winner is not the best at the end, and an
# iteration steps from an earlier member than the newest winner (under best parents neither can be).
RUN = (
    "run", str(EXAMPLE), "--provider", "sim", "--budget-usd", "4", "--spend-all",
    "--set", "loop.parent_selection=pool", "--set", "loop.seed=7",
)  # fmt: skip


def _rows(run_dir, sql: str) -> list[dict]:
    with closing(readonly.connect(run_dir / "state.db")) as conn:
        return readonly.rows(conn, sql)


@pytest.mark.slow
def test_a_pool_night_steps_from_winners_and_ends_on_the_pools_best(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    cli(monkeypatch, None, *RUN, "--run-dir", str(run_dir))
    started = _rows(run_dir, "select number, parent from iterations order by number")
    versions = {
        r["label"]: r for r in _rows(run_dir, "select label, iteration, decision from versions")
    }
    won = [label for label, v in versions.items() if v["decision"] == "won"]
    went_back = 0
    for it in started:
        parent = versions[it["parent"]]
        assert it["parent"] == "v0" or (
            parent["decision"] == "won" and parent["iteration"] < it["number"]
        )
        newest = [w for w in won if versions[w]["iteration"] < it["number"]][-1:] or ["v0"]
        went_back += it["parent"] != newest[0]
    best = _rows(run_dir, "select current_best from runs")[0]["current_best"]
    assert best == standing.best(Store(run_dir / "state.db"))
    assert went_back and best != won[-1]
    history = json.loads((run_dir / "history.json").read_text())
    assert [v["version"] for v in history["iterations"] if v["is_current_best"]] == [best]
