"""A stop leaves the version in progress undecided, whatever stage it lands in, and a resume ends
where an uninterrupted run ends: no interim decision is ever recorded (docs/design.md §8)."""

from __future__ import annotations

import sqlite3

import pytest
from inprocess import EXAMPLE, cli, history

from optimizer.report.live import Reporter

pytestmark = pytest.mark.slow  # a whole run stopped and resumed at every stage

# The guarded step rule: the stops are tried at every stage it has (looks, the comparator).
RUN = (
    "run", str(EXAMPLE), "--provider", "sim", "--max-iterations", "2", "--set", "sim.seed=17",
    "--set", "selection.step=guarded",
)  # fmt: skip
# A stop lands at the first stage of each of these kinds that the uninterrupted run goes through:
# every step of an iteration, the adaptive extra runs included.
KINDS = (
    "screening",
    "benchmark (3 runs",
    "benchmark (4 runs",
    "blind comparison",
    "proposal",
    "analysis",
)


def stops_for(stages: list[str]) -> list[str]:
    """The first stage of each kind, in the order the run reaches them, never one right after
    another chosen stop: a stop is honoured before the next stage's work, but that stage may
    already be announced (a stop during a proposal is seen at the candidate's screening)."""
    picked: list[str] = []
    for k, text in enumerate(stages):
        kinds = [kind for kind in KINDS if kind in text]
        taken = {kind for p in picked for kind in KINDS if kind in p}
        if kinds and kinds[0] not in taken and not (picked and stages[k - 1] == picked[-1]):
            picked.append(text)
    missing = [kind for kind in KINDS if not any(kind in p for p in picked)]
    assert not missing, f"the reference run never reached {missing}: {stages}"
    return picked


def decision(run_dir, label: str) -> str | None:
    conn = sqlite3.connect(run_dir / "state.db")
    try:
        row = conn.execute("select decision from versions where label = ?", [label]).fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def test_a_stop_at_any_stage_then_resume_ends_with_the_uninterrupted_history(tmp_path, monkeypatch):
    show = Reporter.activity
    reached: list[str] = []

    def record(self, text: str) -> None:
        reached.append(text)
        show(self, text)

    with monkeypatch.context() as patch:
        patch.setattr(Reporter, "activity", record)
        cli(patch, None, *RUN, "--run-dir", str(tmp_path / "reference"))
    stages = stops_for(reached)
    run_dir = tmp_path / "run"
    pending = list(stages)
    seen: list[str] = []

    def stage(self, text: str) -> None:
        if pending and text == pending[0]:
            seen.append(pending.pop(0))
            (run_dir / "STOP").write_text("stop requested by the test\n")
        show(self, text)

    monkeypatch.setattr(Reporter, "activity", stage)
    out = cli(monkeypatch, None, *RUN, "--run-dir", str(run_dir))
    stops = 0
    while "STOP" in out:
        stops += 1
        label = seen[-1].split(":")[0]
        if label.startswith("v") and "analysis" not in seen[-1]:
            # stopped inside its evaluation: no decision, not even an interim one
            assert decision(run_dir, label) is None, (seen[-1], decision(run_dir, label))
        out = cli(monkeypatch, None, "resume", str(run_dir))
    assert seen == stages and stops == len(stages)
    assert history(run_dir) == history(tmp_path / "reference")


def test_a_stop_before_the_first_unit_of_work_spends_nothing(tmp_path, monkeypatch):
    """`stop` right after `run --detach`: the night stops before its first run, and pays for no
    sealed test of a v0 it never scored."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "STOP").write_text("stop requested by the test\n")
    out = cli(monkeypatch, None, *RUN, "--run-dir", str(run_dir))
    assert "STOP" in out
    conn = sqlite3.connect(run_dir / "state.db")
    try:
        calls, spent = conn.execute(
            "select count(*), coalesce(sum(cost_usd), 0) from calls"
        ).fetchone()
    finally:
        conn.close()
    assert (calls, spent) == (0, 0)
