"""`optimizer resume` never quietly does nothing: after a plateau it searches again with fresh
patience, and with no budget left it refuses, naming --budget-usd, before it writes anything."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from inprocess import EXAMPLE, cli

# Every proposal is a careless edit, so no child wins and one iteration is a plateau (patience
# 1): under the guarded rule, which does not step on the noise of an edit that changes little.
LOSING = (
    "--provider", "sim", "--set", "sim.proposal_quality=0", "--set", "sim.overfit_rate=0",
    "--set", "sim.harmful_rate=1", "--set", "loop.patience=1", "--set", "evals.runs_per_eval=1",
    "--set", "selection.step=guarded",
)  # fmt: skip


@pytest.fixture(scope="module")
def plateaued(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("plateau") / "run"
    with pytest.MonkeyPatch.context() as monkeypatch:
        cli(
            monkeypatch,
            None,
            "run",
            str(EXAMPLE),
            "--run-dir",
            str(run_dir),
            "--max-iterations",
            "5",
            *LOSING,
        )
    return run_dir


@pytest.fixture
def run_dir(plateaued, tmp_path) -> Path:
    return Path(shutil.copytree(plateaued, tmp_path / "run"))


def one(run_dir: Path, sql: str):
    conn = sqlite3.connect(run_dir / "state.db")
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def done(run_dir: Path) -> int:
    return one(run_dir, "select count(*) from iterations where finished_at is not null")


def spent(run_dir: Path) -> float:
    return one(run_dir, "select sum(cost_usd) from calls")


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.slow
def test_the_losing_run_stops_at_a_plateau_after_one_iteration(run_dir):
    assert done(run_dir) == 1 and "plateau" in one(run_dir, "select stop_reason from runs")


@pytest.mark.slow
def test_a_resume_after_a_plateau_searches_again_with_fresh_patience(run_dir, monkeypatch):
    said = cli(monkeypatch, None, "resume", str(run_dir), "--max-iterations", "3")
    assert "the plateau count starts again here (loop.patience = 1)" in said
    assert done(run_dir) == 2  # a new iteration, then a new plateau of its own


@pytest.mark.slow
@pytest.mark.parametrize("left", ["none", "less than an iteration"])
def test_a_resume_with_no_budget_left_refuses_naming_the_flag_and_writes_nothing(
    run_dir, monkeypatch, left
):
    budget = spent(run_dir) * (0.5 if left == "none" else 1.05)
    before = files(run_dir)
    said = cli(monkeypatch, None, "resume", str(run_dir), "--max-iterations", "3",
               "--budget-usd", f"{budget:.2f}", code=2)  # fmt: skip
    lines = said.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {run_dir}: ")
    assert "--budget-usd" in lines[0] and f"`optimizer resume {run_dir} --budget-usd " in lines[0]
    if left == "none":
        assert "its budget is spent" in lines[0]
    else:
        assert "covers none of the 2 iterations left" in lines[0]
    assert files(run_dir) == before and done(run_dir) == 1
