"""A step is a move of the search, not a claim (docs/design.md §8, §16): how cheaply a step may be
taken is a setting the bench measures, and the settings do what they say."""

from __future__ import annotations

import sqlite3

import pytest
from inprocess import EXAMPLE, cli

RUN = ("run", str(EXAMPLE), "--provider", "sim", "--set", "sim.seed=1", "--max-iterations", "2")


@pytest.mark.slow
def test_a_child_starts_at_first_runs_while_v0_keeps_runs_per_eval(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    guarded = ("--set", "selection.step=guarded", "--set", "selection.first_runs=1")
    cli(monkeypatch, None, *RUN, "--run-dir", str(folder), *guarded)
    with sqlite3.connect(folder / "state.db") as db:
        most = dict(
            db.execute(
                "select prefix, max(run_number) from gradings where configuration = 'with_skill' "
                "group by prefix"
            ).fetchall()
        )
        decided = [
            r[0] for r in db.execute("select version from decisions where phase = 'benchmark'")
        ]
    assert most["v0/"] >= 3  # v0 measured at evals.runs_per_eval under guarded steps
    assert decided, "no child reached the rule"
    # A child decided at its first look has one run an eval; none starts above the schedule's 1, 2, 3.
    assert min(most[f"{v}/"] for v in decided) < 3


@pytest.mark.slow
def test_a_cheap_step_is_one_look_at_one_run_an_eval_without_the_comparator(tmp_path, monkeypatch):
    import json

    folder = tmp_path / "run"
    cli(monkeypatch, None, *RUN, "--run-dir", str(folder), "--set", "selection.step=cheap")
    with sqlite3.connect(folder / "state.db") as db:
        chosen = [
            json.loads(r[0])
            for r in db.execute("select selection_json from decisions where phase = 'benchmark'")
        ]
        asked = db.execute("select count(*) from calls where role = 'comparator'").fetchone()[0]
    assert chosen, "no child reached the rule"
    assert all(d["max_runs_per_eval"] == 1 and d["comparator"]["pairs"] == 0 for d in chosen)
    assert all(d["interval"]["confidence"] <= 0.6 + 1e-9 for d in chosen)
    assert asked == 0


def test_the_cheap_preset_changes_only_what_a_step_is_decided_under():
    from optimizer.config import Selection
    from optimizer.decide import step

    guarded = Selection(step="guarded")
    assert step.for_steps(guarded) is guarded
    cheap = step.for_steps(Selection(step="cheap", screen_margin=0.2))
    assert (cheap.first_runs, cheap.max_runs_per_eval, cheap.confidence) == (1, 1, 0.6)
    assert cheap.screen_margin == 0.2 and cheap.night == "none"


@pytest.mark.slow
def test_v0_runs_sets_v0s_train_runs_and_the_sealed_test_keeps_runs_per_eval(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    at_start = ("--set", "selection.v0_runs=2", "--set", "selection.parent_runs=0")
    cli(monkeypatch, None, *RUN, "--run-dir", str(folder), *at_start)
    with sqlite3.connect(folder / "state.db") as db:
        most = dict(
            db.execute(
                "select prefix, max(run_number) from gradings where configuration = 'with_skill' "
                "group by prefix"
            ).fetchall()
        )
    assert most["v0/"] == 2
    assert most["test/v0/"] == 3  # evals.runs_per_eval


@pytest.mark.slow
def test_cheap_steps_run_v0_once_an_eval_unless_v0_runs_says_otherwise(tmp_path, monkeypatch):
    from optimizer.decide.step import CHEAP_V0_RUNS

    folder = tmp_path / "run"
    cli(monkeypatch, None, *RUN, "--run-dir", str(folder), "--set", "selection.parent_runs=0")
    with sqlite3.connect(folder / "state.db") as db:
        v0 = db.execute(
            "select eval_id, max(run_number) from gradings where prefix = 'v0/' group by eval_id"
        ).fetchall()
    assert v0 and {n for _, n in v0} == {CHEAP_V0_RUNS}


@pytest.mark.slow
def test_a_parent_is_measured_again_as_its_children_are_judged(tmp_path, monkeypatch):
    """selection.parent_runs: a parent read at one lucky run would block every child; each child
    decided against it adds a run an eval of it, up to the setting, and never more."""
    siblings = ("--set", "loop.judge_proposals=all", "--max-iterations", "3")
    for cap in (0, 3):
        folder = tmp_path / f"cap-{cap}"
        cli(
            monkeypatch,
            None,
            *RUN,
            "--run-dir",
            str(folder),
            *siblings,
            "--set",
            f"selection.parent_runs={cap}",
        )
        with sqlite3.connect(folder / "state.db") as db:
            judged = dict(
                db.execute(
                    "select parent, count(*) from versions where decision is not null "
                    "and parent is not null group by parent"
                ).fetchall()
            )
            most = {
                p: db.execute(
                    "select max(run_number) from gradings where prefix = ?", (f"{p}/",)
                ).fetchone()[0]
                for p in judged
            }
        assert max(judged.values()) >= 2, "no parent had two children decided"
        for parent, n in judged.items():
            # The last child read its parent at 1 + the children before it, within the cap.
            assert most[parent] == (min(cap, n) if cap else 1), (cap, parent, n, most)


def test_runs_read_grows_with_the_children_judged_up_to_the_cap():
    from optimizer.decide.parents import runs_read

    assert runs_read({1: 1, 2: 2}, floor=0, judged=0, most=6) == {1: 1, 2: 2}
    assert runs_read({1: 1, 2: 2}, floor=0, judged=2, most=6) == {1: 3, 2: 3}
    assert runs_read({1: 1}, floor=0, judged=9, most=6) == {1: 6}
    assert runs_read({1: 1}, floor=0, judged=9, most=0) == {1: 1}
    assert runs_read({1: 1, 2: 8}, floor=4, judged=0, most=6) == {1: 4, 2: 8}
