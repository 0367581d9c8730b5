"""What a person watching a run sees: the --executor flag, the progress line (live on a terminal,
plain lines elsewhere), the ETA, elapsed time and rough finish in `status`, and what `resume`
says before it continues. Whole runs go through the real command line in this process."""

from __future__ import annotations

import io
import json
import re
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fixtures.workspace_builder import build_workspace
from inprocess import EXAMPLE, cli
from rich.console import Console

from optimizer import cli as cli_module
from optimizer import config
from optimizer.budget import pace
from optimizer.budget.estimate import resumed
from optimizer.cli import tools as cli_tools
from optimizer.config import Settings
from optimizer.errors import BadInput
from optimizer.report import spend, status
from optimizer.report.live import Reporter
from optimizer.store.db import Store
from optimizer.store.files import Workspace
from optimizer.store.lock import lock

ESCAPE = re.compile(r"\x1b|\x9b|\r")  # ESC (and so every ANSI sequence), CSI, carriage return


# -- --executor ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["run", str(EXAMPLE), "--dry-run"],
        ["benchmark", str(EXAMPLE)],
        ["execute", str(EXAMPLE), "--eval", "1"],
    ],
)
def test_the_executor_flag_reaches_the_settings_of_each_command(command, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    seen: list[str] = []

    def recorded(config_path, overrides, *, eval_config=None, flags=None, **_provider_choice):
        loaded = config.load(None, env={}, overrides=overrides or [], flags=flags)
        seen.append(loaded.settings.execute.executor)
        raise BadInput("stopped by the test once the settings were asked for")

    for module in (cli_module, cli_tools):  # run; benchmark and execute
        monkeypatch.setattr(module, "load_settings", recorded)
    cli(monkeypatch, None, *command, "--executor", "claude-code", code=2)
    assert seen == ["claude-code"]  # the shorthand of --set execute.executor (cli/shorthands.py)


# -- the ETA, from numbers ---------------------------------------------------------------------


def test_the_eta_is_the_iterations_left_at_the_pace_so_far():
    end = pace.finish(seconds_in_iterations=1200, done=2, left=3)
    assert end == pace.Finish(1800, "pace") and pace.eta_text(end, 2) == "ETA 30m00s"


def test_the_eta_is_unknown_before_the_first_iteration_finishes():
    end = pace.finish(seconds_in_iterations=0, done=0, left=5)
    assert end == pace.Finish(None, "") and pace.eta_text(end, 0) == "ETA unknown"
    capped = pace.finish(seconds_in_iterations=0, done=0, left=5, to_deadline=3600)
    assert capped == pace.Finish(3600, "deadline")
    assert pace.eta_text(capped, 0) == "ETA unknown (the deadline stops the run in 1h00m)"


def test_a_deadline_sooner_than_the_pace_decides_the_eta():
    end = pace.finish(seconds_in_iterations=600, done=1, left=10, to_deadline=1500)
    assert (
        end == pace.Finish(1500, "deadline")
        and pace.eta_text(end, 1) == "ETA 25m00s (the deadline)"
    )
    assert pace.finish(seconds_in_iterations=600, done=1, left=2, to_deadline=9000).by == "pace"
    assert pace.finish(seconds_in_iterations=600, done=1, left=2, to_deadline=-5) == pace.Finish(
        0, "deadline"
    )
    assert pace.finish(seconds_in_iterations=600, done=3, left=0).by == "limit"


def test_the_budget_caps_the_iterations_left_at_the_previews_cost():
    assert pace.iterations_left(2, 10) == 8
    # $5 left at $2 an iteration: two whole ones, and the one the budget stops in the middle of.
    assert pace.iterations_left(2, 10, budget_left_usd=5.0, usd_per_iteration=2.0) == 3
    assert pace.iterations_left(2, 10, budget_left_usd=4.0, usd_per_iteration=2.0) == 2
    assert pace.iterations_left(2, 10, budget_left_usd=-1.0, usd_per_iteration=2.0) == 0
    assert pace.iterations_left(9, 10, budget_left_usd=100.0, usd_per_iteration=2.0) == 1


def test_the_cost_of_an_iteration_is_measured_once_one_finished():
    assert pace.usd_per_iteration(estimated=3.0, spent_in_iterations=0.0, done=0) == 3.0
    assert pace.usd_per_iteration(estimated=3.0, spent_in_iterations=2.0, done=2) == 1.0
    assert pace.usd_per_iteration(estimated=None, spent_in_iterations=0.0, done=0) is None


def test_the_pace_counts_only_the_time_inside_finished_iterations():
    rows = [
        ("2026-01-01T00:00:00Z", "2026-01-01T00:10:00Z"),
        ("2026-01-01T05:00:00Z", "2026-01-01T05:20:00Z"),
        ("2026-01-01T05:20:00Z", None),
    ]
    assert pace.seconds_in_iterations(rows) == (1800.0, 2)


# -- the progress line ---------------------------------------------------------------------------


def test_the_progress_line_says_iteration_stage_spend_elapsed_and_eta(tmp_path):
    store = Store(tmp_path / "state.db")
    try:
        store.db["runs"].insert({"id": "r", "current_best": "v1"})
        store.db["iterations"].insert_all(
            [
                {
                    "number": 1,
                    "parent": "v0",
                    "started_at": "2026-01-01T00:00:00Z",
                    "finished_at": "2026-01-01T00:10:00Z",
                },
                {
                    "number": 2,
                    "parent": "v1",
                    "started_at": "2026-01-01T00:10:00Z",
                    "finished_at": None,
                },
            ]
        )
        buffer = io.StringIO()
        settings = Settings.model_validate({"loop": {"max_iterations": 4}, "budget": {"usd": 0}})
        with Reporter(
            Console(file=buffer, width=300), store, simulated=False, settings=settings
        ) as ui:
            ui.activity("iteration 2: proposal 1 from v1")
            ui.activity("v3: screening")
    finally:
        store.close()
    lines = buffer.getvalue().splitlines()
    assert lines[0].startswith("iteration 2 of 4: proposal 1 from v1 · 0 runs graded · $0.00 spent")
    assert lines[1].startswith("iteration 2 of 4: v3: screening · ")
    assert all("elapsed" in line and "ETA 30m00s" in line for line in lines)  # 3 left at 10 min


def test_the_live_line_on_a_terminal_keeps_its_brackets(tmp_path):
    store = Store(tmp_path / "state.db")
    try:
        store.db["runs"].insert({"id": "r", "current_best": "v0"})
        buffer = io.StringIO()
        console = Console(file=buffer, force_terminal=True, width=300)
        with Reporter(console, store, simulated=True, settings=Settings()):
            pass
    finally:
        store.close()
    assert "starting · 0 runs graded · $0.00 spent · best v0 … [simulated] · " in buffer.getvalue()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[Path, str]:
    """A simulated two-iteration run and what `run` printed (stdout is no terminal here)."""
    run_dir = tmp_path_factory.mktemp("watch") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("FORCE_COLOR", raising=False)
        out = cli(
            mp,
            None,
            "run",
            str(EXAMPLE),
            "--provider",
            "sim",
            "--max-iterations",
            "2",
            "--run-dir",
            str(run_dir),
        )
    return run_dir, out


@pytest.mark.slow
def test_a_run_into_a_pipe_prints_plain_lines_at_each_stage(finished_run):
    _, out = finished_run
    assert not ESCAPE.search(out), repr(ESCAPE.search(out))
    lines = out.splitlines()
    stage_lines = [line for line in lines if " spent · " in line]
    for stage in (
        "baseline: without_skill runs",
        "v0: with_skill runs",
        "iteration 1 of 2: proposal 1 from v0",
        "iteration 2 of 2: choosing a parent",
        "sealed test: v0",
    ):
        assert any(line.startswith(stage + " · ") for line in stage_lines), stage
    assert all("elapsed" in line and "ETA" in line for line in stage_lines)
    before_first = [line for line in stage_lines if not line.startswith(("iteration 2", "sealed"))]
    assert all("ETA unknown" in line for line in before_first)
    assert len(stage_lines) == len(set(stage_lines))  # one line per stage change, not per run


@pytest.mark.slow
def test_a_run_says_how_it_stopped_once(finished_run):
    _, out = finished_run
    stopped = [line for line in out.splitlines() if line.startswith("stopped")]
    assert stopped == [stopped[0]] and "current best" in stopped[0]


# -- resume ----------------------------------------------------------------------------------------


def _ledger(run_dir: Path) -> tuple[float, str]:
    conn = sqlite3.connect(run_dir / "state.db")
    try:
        spent = conn.execute("select coalesce(sum(cost_usd), 0) from calls").fetchone()[0]
        best = conn.execute("select current_best from runs").fetchone()[0]
    finally:
        conn.close()
    return spent, best


@pytest.mark.slow
def test_resume_says_where_it_continues_and_counts_what_was_spent(
    finished_run, tmp_path, monkeypatch
):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run[0], run_dir)
    spent, best = _ledger(run_dir)
    out = cli(monkeypatch, None, "resume", str(run_dir), "--max-iterations", "3")
    lines = out.splitlines()
    # and, where the reference run's proposals since its last step make a plateau, that its count
    # starts again
    assert lines[0].startswith(f"resuming at iteration 3 from {best} (current best {best})")
    estimate = lines[1]
    assert "(1 iteration left and the sealed test)" in estimate
    assert f"+ ${spent:,.2f} already spent = ~$" in estimate
    remaining, total = re.search(
        r"~\$([\d.,]+) for what remains .* = ~\$([\d.,]+) for the run", estimate
    ).groups()
    assert float(total) == pytest.approx(float(remaining) + spent, abs=0.011)
    assert [line for line in lines if line.startswith("stopped")] == [lines[-1]]


@pytest.mark.slow
def test_resume_at_the_iteration_limit_says_so(finished_run, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run[0], run_dir)
    _, best = _ledger(run_dir)
    first = cli(monkeypatch, None, "resume", str(run_dir)).splitlines()[0]
    assert first == (
        f"resuming after iteration 2: the limit of 2 iterations is reached, so only the "
        f"sealed test is checked; raise --max-iterations to go on (current best {best})"
    )


def test_the_resume_estimate_is_what_remains_plus_what_was_spent():
    part = {"calls": 10, "tokens": 1000, "usd": 2.0, "usd_batch": 1.0}
    est = {
        "iterations": 5,
        "batch": False,
        "budget_usd": 20.0,
        "setup": {**part, "usd": 3.0},
        "per_iteration": part,
        "per_iteration_max": {**part, "usd": 4.0, "usd_batch": 2.0},
        "sealed_test": {**part, "usd": 0.5, "usd_batch": 0.5},
    }
    later = resumed(est, spent_usd=7.25, iterations_done=2, setup_done=True)
    assert later["iterations"] == 3 and later["resume"]["remaining"]["usd"] == 6.5  # 3 × 2 + 0.5
    assert later["run"]["usd"] == 13.75 and later["run_max"]["usd"] == 19.75
    assert later["iterations_in_budget"] == 6  # (20 − 7.25) / 2, floored
    text = spend.line(later)
    assert (
        "~$6.50 for what remains (3 iterations left and the sealed test) + $7.25 already spent"
        in text
    )
    assert "= ~$13.75 for the run" in text and text.endswith("budget $20.00 covers it")
    # Killed during setup: what setup still lacks is part of what remains.
    early = resumed(est, spent_usd=1.0, iterations_done=0, setup_done=False)
    assert early["resume"]["remaining"]["usd"] == 12.5  # 5 × 2 + 0.5 + (3 − 1)
    assert early["run"]["usd"] == 13.5
    poor = resumed({**est, "budget_usd": 10.0}, spent_usd=7.25, iterations_done=2, setup_done=True)
    assert spend.budget_note(poor) == (
        "budget $10.00 covers about 1 of the 3 iterations left; the run stops at the budget"
    )


# -- status --------------------------------------------------------------------------------------


def _paced(root: Path, *, deadline: str = "", finished: int = 2) -> None:
    """Iterations of 10 minutes each, `finished` of them done, of a limit of 5; no budget."""
    store = Store(root / "state.db")
    try:
        settings = Settings.model_validate(
            {"loop": {"max_iterations": 5}, "budget": {"usd": 0, "deadline": deadline}}
        )
        with store.atomic():
            store.db.execute("delete from iterations")
            for n in range(1, finished + 2):
                start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=10 * (n - 1))
                store.db["iterations"].insert(
                    {
                        "number": n,
                        "parent": "v0",
                        "started_at": start.isoformat(),
                        "finished_at": (start + timedelta(minutes=10)).isoformat()
                        if n <= finished
                        else None,
                    }
                )
            store.db["runs"].update(root.name, {"settings_json": settings.model_dump_json()})
    finally:
        store.close()


def render(info: dict) -> str:
    console = Console(record=True, width=200, color_system=None)
    status.print_status(console, info)
    return console.export_text()


def test_status_shows_elapsed_time_and_a_rough_finish_while_running(tmp_path):
    built = build_workspace(tmp_path / "run", versions=3, status="running")
    _paced(built.root)
    with lock(Workspace(built.root)):
        info = status.status(built.root)
    assert info["elapsed_s"] > 0
    assert info["finish"]["by"] == "pace" and info["finish"]["seconds"] == 1800  # 3 left × 10 min
    text = render(info)
    assert re.search(r"elapsed\s+\S+ since the start", text)
    assert re.search(
        r"finish\s+about \d\d:\d\d \(in 30m00s: 3 iterations left at the pace of the 2 done\)", text
    )


def test_status_counts_the_budget_in_iterations_at_their_measured_cost(tmp_path):
    """The preview says $10 an iteration; the two finished ones cost $1 each. With $13 of $20
    left, the budget is not what ends the run: the limit's 3 iterations are, at 10 minutes each."""
    built = build_workspace(tmp_path / "run", versions=3, status="running")
    _paced(built.root)
    store = Store(built.root / "state.db")
    try:
        settings = Settings.model_validate({"loop": {"max_iterations": 5}, "budget": {"usd": 20}})
        estimate = {"batch": False, "per_iteration": {"usd": 10.0, "usd_batch": 5.0}}
        calls = [  # (scope, dollars, minute): setup, iteration 1, iteration 2, iteration 3 so far
            ("v0", 2.0, -5),
            ("proposal 1-0", 0.5, 1),
            ("v2", 1.5, 15),
            ("v3", 3.0, 25),
        ]
        with store.atomic():
            store.db.execute("delete from calls")
            for i, (scope, usd, minute) in enumerate(calls):
                at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minute)
                store.db["calls"].insert(
                    {
                        "hash": f"h{i}",
                        "role": "executor",
                        "outcome": "ok",
                        "cost_usd": usd,
                        "scope": scope,
                        "created_at": at.isoformat(timespec="seconds").replace("+00:00", "Z"),
                    }
                )
            store.db["runs"].update(
                built.root.name,
                {
                    "settings_json": settings.model_dump_json(),
                    "estimate_json": json.dumps(estimate),
                },
            )
    finally:
        store.close()
    with lock(Workspace(built.root)):
        info = status.status(built.root)
    assert info["spent_usd"] == 7.0
    # At the preview's $10, $13 would buy 2 iterations (20 minutes); measured, the limit decides.
    assert info["finish"]["by"] == "pace" and info["finish"]["seconds"] == 1800


def test_status_finish_is_the_deadline_or_unknown_without_a_pace(tmp_path):
    soon = (datetime.now(UTC) + timedelta(minutes=20)).isoformat(timespec="seconds")
    built = build_workspace(tmp_path / "run", versions=3, status="running")
    _paced(built.root, deadline=soon)
    with lock(Workspace(built.root)):
        info = status.status(built.root)
    assert info["finish"]["by"] == "deadline" and 1100 < info["finish"]["seconds"] <= 1200
    assert "at the latest (the deadline" in render(info)
    _paced(built.root, finished=0)
    with lock(Workspace(built.root)):
        info = status.status(built.root)
    assert info["finish"]["seconds"] is None
    assert re.search(r"finish\s+unknown", render(info))


def test_status_of_a_stopped_run_shows_elapsed_time_and_no_finish(tmp_path):
    built = build_workspace(tmp_path / "run", versions=3)
    info = status.status(built.root)
    assert info["finish"] is None and info["elapsed_s"] > 0
    assert json.dumps(info) and "finish" not in render(info).split("elapsed")[1].split("\n")[1]
