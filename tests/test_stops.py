"""A stop leaves the version in progress undecided, whatever stage it lands in, and a resume ends
where an uninterrupted run ends: no interim decision is ever recorded (DESIGN §8)."""

from __future__ import annotations

import sqlite3

from inprocess import EXAMPLE, cli, history

from optimizer.search.reporter import Reporter

RUN = ("run", str(EXAMPLE), "--provider", "sim", "--max-iterations", "2", "--set", "sim.seed=11")
# One stop at the start of each of these stages, in this order (the seed-11 run goes through all).
STAGES = ["v1: screening", "v2: benchmark (3 runs", "v2: benchmark (4 runs",
          "v2: blind comparison", "iteration 2: proposal 1", "v3: benchmark (5 runs",
          "v3: analysis", "iteration 2: proposal 2"]


def decision(run_dir, label: str) -> str | None:
    conn = sqlite3.connect(run_dir / "state.db")
    try:
        row = conn.execute("select decision from versions where label = ?", [label]).fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def test_a_stop_at_any_stage_then_resume_ends_with_the_uninterrupted_history(tmp_path, monkeypatch):
    cli(monkeypatch, None, *RUN, "--run-dir", str(tmp_path / "reference"))
    run_dir = tmp_path / "run"
    pending = list(STAGES)
    seen: list[str] = []
    show = Reporter.stage

    def stage(self, text: str) -> None:
        if pending and text.startswith(pending[0]):
            seen.append(pending.pop(0))
            (run_dir / "STOP").write_text("stop requested by the test\n")
        show(self, text)

    monkeypatch.setattr(Reporter, "stage", stage)
    out = cli(monkeypatch, None, *RUN, "--run-dir", str(run_dir))
    stops = 0
    while "STOP" in out:
        stops += 1
        label = seen[-1].split(":")[0]
        if label.startswith("v") and "analysis" not in seen[-1]:
            # stopped inside its evaluation: no decision, not even an interim one
            assert decision(run_dir, label) is None, (seen[-1], decision(run_dir, label))
        out = cli(monkeypatch, None, "resume", str(run_dir))
    assert seen == STAGES and stops == len(STAGES)
    assert history(run_dir) == history(tmp_path / "reference")
