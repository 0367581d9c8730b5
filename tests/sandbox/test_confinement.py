"""Confinement as the user meets it: no unconfined run without consent, the confinement of every
run recorded and shown, a total size limit on each run's workspace, clean outputs, plain text in
pipes, and `optimizer doctor`. Nothing here depends on timing; nothing reaches the network."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest
import tiers

from optimizer import logs
from optimizer import sandbox as sb
from optimizer.config import Settings
from optimizer.errors import ResourceLimit
from optimizer.execute import get_executor
from optimizer.execute.agent import run_bash
from optimizer.grade.benchmark import run_once
from optimizer.inputs.evals import load_evals
from optimizer.report import confinement as shown
from optimizer.report import html
from optimizer.sandbox import SandboxPolicy, SandboxResult, doctor
from optimizer.sandbox.disk import MIN_ENTRY_BYTES, measure
from optimizer.store.db import Store

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "fixtures" / "csv-report"
needs_bwrap = tiers.needs(
    "bubblewrap",
    None if sb.bwrap_available() else "bubblewrap is missing here (apt-get install bubblewrap)",
)
MODES = [pytest.param("bwrap", marks=needs_bwrap), "none"]
# Ten 10 MB files, each written whole; a 30 MB workspace holds three of them.
TEN_FILES = (
    "for i in 1 2 3 4 5 6 7 8 9 10; do head -c 10485760 /dev/zero > /workspace/outputs/f$i; done"
)


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """bubblewrap hidden from PATH: the probe itself finds nothing (its cached answer dropped)."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}{os.pathsep}{Path(sys.executable).parent}")
    sb.bwrap_available.cache_clear()
    yield
    monkeypatch.undo()
    sb.bwrap_available.cache_clear()


def settings_with(**sections: dict) -> Settings:
    return Settings.model_validate({"llm": {"provider": "sim"}, **sections})


# ---------------------------------------------------------------- A: no unconfined run by default


@pytest.mark.parametrize("command", ["run", "execute", "benchmark"])
def test_without_bubblewrap_auto_refuses_before_anything_is_written(
    cli, no_bwrap, tmp_path: Path, command: str
) -> None:
    target = tmp_path / "out"
    where = {
        "run": ["--run-dir", target, "--max-iterations", "0"],
        "execute": ["--eval", "1", "--out", target],
        "benchmark": ["--out", target],
    }[command]
    result = cli(command, EXAMPLE, *where)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "apt-get install bubblewrap" in lines[0] and "--unconfined" in lines[0]
    )
    assert "Traceback" not in result.output
    assert not target.exists()


def test_unconfined_flag_runs_says_so_once_and_records_it(cli, no_bwrap, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = cli("execute", EXAMPLE, "--eval", "1", "--out", out, "--unconfined")
    assert result.exit_code == 0, result.output
    assert result.output.count("UNCONFINED") == 1
    assert "\x1b" not in result.output  # B: a pipe gets no escape codes, logs included
    metrics = json.loads((out / "with_skill/run-1/outputs/metrics.json").read_text())
    assert (metrics["confined"], metrics["sandbox"]) == (False, "none")
    with sqlite3.connect(out / "state.db") as conn:
        assert conn.execute("select confined, sandbox from trials").fetchall() == [(0, "none")]


@needs_bwrap
async def test_a_confined_run_is_recorded_as_such(tmp_path: Path, client, store) -> None:
    run_dir, scored = await run_once(
        settings_with(),
        client,
        store,
        skill_dir=EXAMPLE,
        eval_id=1,
        without_skill=False,
        out_dir=tmp_path,
    )
    assert scored.status == "ok"
    metrics = json.loads((run_dir / "outputs/metrics.json").read_text())
    assert (metrics["confined"], metrics["sandbox"]) == (True, "bwrap")
    assert store.query("select confined, sandbox from trials") == [
        {"confined": 1, "sandbox": "bwrap"}
    ]


def test_migration_adds_the_confinement_columns(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    try:
        assert {"confined", "sandbox"} <= set(store.db["trials"].columns_dict)
    finally:
        store.close()


@pytest.mark.slow
def test_status_show_and_report_say_how_runs_were_confined(cli, no_bwrap, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    started = cli(
        "run",
        EXAMPLE,
        "--run-dir",
        run_dir,
        "--max-iterations",
        "0",
        "--unconfined",
        "--set",
        "evals.runs_per_eval=1",
        "--set",
        "evals.baseline_comparison=false",
    )
    assert started.exit_code == 0, started.output
    assert started.output.count("sandbox: UNCONFINED") == 1
    status = cli("status", run_dir)
    line = next(x for x in status.output.splitlines() if x.startswith("sandbox"))
    assert "UNCONFINED" in line and "\x1b" not in status.output
    info = json.loads(cli("status", run_dir, "--json").output)["sandbox"]
    assert info["unconfined"] == info["runs"] > 0 and info["by"] == {"none": info["runs"]}
    assert "UNCONFINED" in cli("show", run_dir, "v0").output
    cli("report", run_dir)
    page = (run_dir / "report.html").read_text()
    assert 'id="sandbox-banner">UNCONFINED' in page
    assert 'id="sandbox-banner">UNCONFINED' in html.render(
        run_dir, options=html.PageOptions(review=True)
    )  # the review page


def test_confined_runs_read_as_confined() -> None:
    assert (
        shown.describe({"runs": 4, "unconfined": 0, "by": {"bwrap": 4}})
        == "bwrap (confined), 4 runs"
    )
    mixed = shown.describe({"runs": 5, "unconfined": 2, "by": {"bwrap": 3, "host": 2}})
    assert mixed.startswith("UNCONFINED: 2 of 5 runs") and "Claude Code" in mixed
    assert shown.describe({"runs": 0, "unconfined": 0, "by": {}}) == "no run recorded yet"


# ---------------------------------------------------------------- B: plain text where no terminal


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_colours_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert logs.colours_for(_Tty()) is True
    assert logs.colours_for(io.StringIO()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert logs.colours_for(_Tty()) is False


# ---------------------------------------------------------------- C: the workspace's total size


@pytest.mark.parametrize("mode", MODES)
def test_many_files_hit_the_workspace_limit(tmp_path: Path, mode: str) -> None:
    """Ten 10 MB files, each under the per-file cap, against 30 MB for the whole workspace: the
    run is stopped as a resource-limit failure, never a timeout or a failure of ours. The last
    measure after the command ends decides, so a watcher poll that came late changes nothing."""
    (tmp_path / "outputs").mkdir()
    policy = SandboxPolicy(mode=mode, timeout_s=60, max_workspace_mb=30)  # type: ignore[arg-type]
    result = sb.run(TEN_FILES, work_dir=tmp_path, skill_dir=None, policy=policy)
    assert result.resource_limit == "workspace" and not result.ok
    assert not result.infra and not result.timed_out
    assert "sandbox.max_workspace_mb" in (result.error or "") and "30 MB" in (result.error or "")
    # Nothing more runs in a workspace over its limit.
    again = sb.run("touch /workspace/more", work_dir=tmp_path, skill_dir=None, policy=policy)
    assert again.resource_limit == "workspace" and not (tmp_path / "more").exists()


@pytest.mark.parametrize("mode", MODES)
def test_the_watcher_stops_a_writer_that_would_not_stop(tmp_path: Path, mode: str) -> None:
    policy = SandboxPolicy(mode=mode, timeout_s=120, max_workspace_mb=30)  # type: ignore[arg-type]
    forever = "i=0; while :; do head -c 10485760 /dev/zero > /workspace/f$i; i=$((i+1)); done"
    result = sb.run(forever, work_dir=tmp_path, skill_dir=None, policy=policy)
    assert result.resource_limit == "workspace" and not result.timed_out


def test_empty_files_count_as_what_they_cost_the_disk(tmp_path: Path) -> None:
    for i in range(300):
        (tmp_path / f"f{i}").touch()
    assert measure(tmp_path).bytes == 300 * MIN_ENTRY_BYTES
    assert sb.workspace_breach(tmp_path, 1) is not None  # 300 inodes > 1 MB of 4 KiB entries
    assert sb.workspace_breach(tmp_path, 2) is None


async def test_a_run_over_its_workspace_limit_fails_scores_zero_and_frees_the_disk(
    tmp_path: Path, client, store
) -> None:
    settings = settings_with(
        execute={"executor": "command", "command": TEN_FILES}, sandbox={"max_workspace_mb": 30}
    )
    run_dir, scored = await run_once(
        settings, client, store, skill_dir=EXAMPLE, eval_id=1, without_skill=True, out_dir=tmp_path
    )
    # The skill's failure, not ours: it is graded (exec_error, score 0), not left unscored.
    assert (scored.status, scored.score) == ("exec_error", 0.0)
    row = store.query("select status, error from trials")[0]
    assert row["status"] == "resource_limit" and "sandbox.max_workspace_mb" in row["error"]
    metrics = json.loads((run_dir / "outputs/metrics.json").read_text())
    assert metrics["status"] == "resource_limit" and metrics["files_created"] == []
    assert measure(run_dir).bytes < 10 * 2**20  # the ten files are gone
    assert "Workspace over its size limit" in (run_dir / "transcript.md").read_text()


async def test_the_agent_stops_at_the_workspace_limit(tmp_path: Path) -> None:
    policy = SandboxPolicy(mode="bwrap" if sb.bwrap_available() else "none", max_workspace_mb=30)
    (tmp_path / "outputs").mkdir()
    with pytest.raises(ResourceLimit, match="max_workspace_mb"):
        await run_bash({"command": TEN_FILES}, work_dir=tmp_path, skill_dir=None, policy=policy)


async def test_fifos_sockets_and_device_nodes_leave_outputs(tmp_path: Path) -> None:
    make = (
        "mkfifo /workspace/outputs/pipe && "
        "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('/workspace/outputs/sock')\" && "
        + ("mknod /workspace/outputs/null c 1 3 && " if os.geteuid() == 0 else "")
        + "echo kept > /workspace/outputs/real.txt"
    )
    # Unconfined on purpose: only there can root make a device node.
    settings = settings_with(
        execute={"executor": "command", "command": make}, sandbox={"mode": "none"}
    )
    ev = load_evals(EXAMPLE).by_id(1)
    record = await get_executor(None, settings).execute(
        skill_dir=None,
        skill_name=None,
        eval=ev,
        inputs_root=EXAMPLE,
        trial_dir=tmp_path / "run-1",
        run_number=1,
        sample=0,
    )
    assert record.status == "ok", record.error
    outputs = tmp_path / "run-1" / "outputs"
    assert sorted(p.name for p in outputs.iterdir()) == ["metrics.json", "real.txt"]
    assert record.files_created == ["real.txt"]
    note = (tmp_path / "run-1" / "transcript.md").read_text()
    assert "- pipe" in note and "- sock" in note


# ---------------------------------------------------------------- D: optimizer doctor


@needs_bwrap
def test_doctor_passes_where_confinement_works(cli) -> None:
    result = cli("doctor")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "bubblewrap",
        "processes",
        "memory",
        "limits",
        "probe",
        "claude code",
        "confinement",
    ]
    assert "works" in lines[0] and "bubblewrap 0." in lines[0]
    assert "network unreachable" in lines[4] and "not visible" in lines[4]
    assert "in bubblewrap" in lines[5] and "relay" in lines[5]
    assert "512 MB" in lines[3] and lines[6].startswith("confinement: works")


def test_doctor_fails_without_bubblewrap_and_says_what_to_do(cli, no_bwrap) -> None:
    result = cli("doctor")
    assert result.exit_code == 1
    assert "bubblewrap:  not found on PATH" in result.output
    assert "probe:       not run" in result.output
    assert "apt-get install bubblewrap" in result.output.splitlines()[-1]


@needs_bwrap
def test_doctor_fails_when_the_probe_sees_a_leak(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    leaky = SandboxResult(
        exit_code=0,
        stdout="network=reachable\nseen=/root\nworkspace=writable\n",
        stderr="",
        confined=True,
    )
    monkeypatch.setattr(doctor, "run", lambda *a, **k: leaky)
    result = cli("doctor")
    assert result.exit_code == 1
    assert "the network is REACHABLE" in result.output and "/root is VISIBLE" in result.output


def test_doctor_fails_when_the_settings_turn_confinement_off(cli) -> None:
    result = cli("doctor", "--set", "sandbox.mode=none")
    assert result.exit_code == 1
    assert "OFF by your settings" in result.output.splitlines()[-1]
