"""`optimizer schedule` and the night it installs: a valid systemd timer or crontab line (printed by
--dry-run, installed into injected locations, listed and removed), and the installed command run
once by hand on the simulator: a new run, then a resume, then --fresh chained to the last best. A
night that finds the last run alive starts nothing; a night without an API key says so once."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from optimizer.nightly import schedule
from optimizer.store.files import Workspace
from optimizer.store.lock import lock

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "fixtures" / "csv-report"
SMALL = [
    "--provider",
    "sim",
    "--set",
    "evals.runs_per_eval=1",
    "--set",
    "loop.max_iterations=1",
    "--set",
    "selection.max_runs_per_eval=2",
]


@pytest.fixture
def places(tmp_path, monkeypatch):
    """Fake systemctl and crontab that record what they are asked, and a unit folder in tmp."""
    calls = tmp_path / "calls.txt"
    table = tmp_path / "crontab.txt"
    systemctl = tmp_path / "systemctl"
    systemctl.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    crontab = tmp_path / "crontab"
    crontab.write_text(
        f"#!/bin/sh\nif [ \"$1\" = -l ]; then [ -f {table} ] || {{ echo 'no crontab' >&2; exit 1; }}; "
        f"cat {table}; else cat > {table}; fi\n"
    )
    for tool in (systemctl, crontab):
        tool.chmod(0o755)
    monkeypatch.setenv("OPTIMIZER_SYSTEMCTL", str(systemctl))
    monkeypatch.setenv("OPTIMIZER_CRONTAB", str(crontab))
    monkeypatch.setenv("OPTIMIZER_SYSTEMD_USER_DIR", str(tmp_path / "units"))
    skill = Path(shutil.copytree(EXAMPLE, tmp_path / "csv-report"))
    monkeypatch.chdir(tmp_path)
    return {
        "calls": calls,
        "table": table,
        "units": tmp_path / "units",
        "skill": skill,
        "runs": tmp_path / "runs",
        "systemctl": systemctl,
    }


def _schedule(cli, places, *extra):
    return cli(
        "schedule",
        places["skill"],
        "--at",
        "22:30",
        "--until",
        "07:00",
        "--budget-usd",
        "10",
        "--runs-root",
        places["runs"],
        *SMALL,
        *extra,
    )


def test_dry_run_prints_a_valid_timer_and_installs_nothing(cli, places, monkeypatch):
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "systemd")
    result = _schedule(cli, places, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "OnCalendar=*-*-* 22:30:00" in result.output and "Type=oneshot" in result.output
    assert " nightly " in result.output and "--until 07:00" in result.output
    assert not places["units"].exists() and not places["calls"].exists()
    analyze = shutil.which("systemd-analyze")
    if analyze:  # the same text, written out, is what systemd itself accepts
        folder = places["units"].parent / "check"
        folder.mkdir()
        for block in result.output.split("# ")[1:-1]:
            path, text = block.split("\n", 1)
            (folder / Path(path).name).write_text(text)
        done = subprocess.run(
            [analyze, "verify", *sorted(map(str, folder.iterdir()))], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr


def test_dry_run_prints_a_valid_crontab_line(cli, places, monkeypatch):
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "cron")
    result = _schedule(cli, places, "--dry-run", "--notify", "mail -s night me@example.org")
    assert result.exit_code == 0, result.output
    line = result.output.strip().splitlines()[-1]
    fields = line.split(None, 5)
    assert fields[:5] == ["30", "22", "*", "*", "*"]
    assert line.endswith(f"{schedule.MARK}{schedule.name_for(places['skill'])}")
    body = fields[5].rsplit(" #", 1)[0]
    assert subprocess.run(["sh", "-n", "-c", body]).returncode == 0  # sh parses it
    assert not places["table"].exists()


def test_install_list_and_remove_with_systemd(cli, places, monkeypatch):
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "systemd")
    assert _schedule(cli, places).exit_code == 0
    name = schedule.name_for(places["skill"])
    assert (places["units"] / f"{name}.timer").is_file() and (
        places["units"] / f"{name}.service"
    ).is_file()
    calls = places["calls"].read_text().splitlines()
    assert calls == ["--user daemon-reload", f"--user enable --now {name}.timer"]
    listed = cli("schedule", "--list")
    assert (
        name in listed.output
        and "at 22:30" in listed.output
        and str(places["skill"]) in listed.output
    )
    assert cli("schedule", "--remove", places["skill"]).exit_code == 0
    assert not any(places["units"].iterdir())
    assert f"--user disable --now {name}.timer" in places["calls"].read_text()
    again = cli("schedule", "--remove", places["skill"])
    assert again.exit_code == 2 and "has no nightly schedule" in again.output


def test_install_list_and_remove_with_cron_keeps_the_users_lines(cli, places, monkeypatch):
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "cron")
    places["table"].write_text("0 5 * * * backup.sh\n")
    assert _schedule(cli, places).exit_code == 0
    assert _schedule(cli, places, "--fresh").exit_code == 0  # the same skill: replaced, not doubled
    lines = places["table"].read_text().splitlines()
    assert lines[0] == "0 5 * * * backup.sh" and len(lines) == 2 and "--fresh" in lines[1]
    assert "at 22:30" in cli("schedule", "--list").output
    assert cli("schedule", "--remove", places["skill"]).exit_code == 0
    assert places["table"].read_text().splitlines() == ["0 5 * * * backup.sh"]


def test_systemd_is_used_only_where_its_user_manager_answers(places, monkeypatch):
    monkeypatch.delenv("OPTIMIZER_SCHEDULER", raising=False)
    assert schedule.backend() == "systemd"  # the fake answers 0
    places["systemctl"].write_text("#!/bin/sh\nexit 1\n")
    assert schedule.backend() == "cron"
    monkeypatch.setenv("OPTIMIZER_SYSTEMCTL", "/no/such/systemctl")
    assert schedule.backend() == "cron"


@pytest.mark.parametrize(
    "args, words",
    [
        (["--at", "25:00"], "--at '25:00'"),
        (["--until", "7"], "--until '7'"),
        (["--budget-usd", "0"], "--budget-usd is required"),
        (["--at", "07:00"], "a night needs time"),
    ],
)
def test_bad_schedules_exit_2_and_install_nothing(cli, places, monkeypatch, args, words):
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "systemd")
    base = {"--at": "22:30", "--until": "07:00", "--budget-usd": "10"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    result = cli("schedule", places["skill"], *[x for kv in base.items() for x in kv])
    assert result.exit_code == 2 and words in result.output, result.output
    assert not places["units"].exists()


def _installed_command(places) -> list[str]:
    service = next(places["units"].glob("*.service")).read_text()
    return shlex.split(
        next(line for line in service.splitlines() if line.startswith("ExecStart=")).removeprefix(
            "ExecStart="
        )
    )


def _night_runs(places) -> list[Path]:
    return sorted(p for p in places["runs"].glob("csv-report-night-*") if p.is_dir())


@pytest.mark.slow
def test_the_installed_command_runs_a_night_then_resumes_then_chains(cli, places, monkeypatch):
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "systemd")
    assert _schedule(cli, places).exit_code == 0
    argv = _installed_command(places)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.run(
        argv, cwd=places["runs"].parent, env=env, capture_output=True, text=True, timeout=300
    )
    assert first.returncode == 0, first.stderr + first.stdout
    [run] = _night_runs(places)
    assert (run / "summary.md").is_file()
    second = subprocess.run(
        argv, cwd=places["runs"].parent, env=env, capture_output=True, text=True, timeout=300
    )
    assert second.returncode == 0, second.stderr + second.stdout
    assert _night_runs(places) == [run]  # resumed, not a second run
    status = json.loads(cli("status", run, "--json").output)
    assert status["resumes"] == 1 and status["iterations_done"] == 2  # tonight's iteration on top
    assert status["budget_usd"] > 10  # what it had spent plus tonight's 10
    third = subprocess.run(
        [*argv, "--fresh"],
        cwd=places["runs"].parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert third.returncode == 0, third.stderr + third.stdout
    old, new = _night_runs(places)
    assert old == run
    lineage = json.loads(cli("lineage", new, "--json").output)
    assert lineage["run"]["from_run"] == str(run)
    assert lineage["tree"][0]["summary"] == f"best version of {run}"
    log = (places["runs"] / f"{schedule.name_for(places['skill'])}.log").read_text()
    assert "starting" in log and "resuming" in log and "from the best of" in log


def test_a_night_that_finds_the_last_run_alive_starts_nothing(cli, places):
    run = places["runs"] / "csv-report-night-20261124-223000"
    run.mkdir(parents=True)
    (run / "state.db").write_bytes(b"")
    with lock(Workspace(run)):
        result = cli(
            "nightly",
            places["skill"],
            "--until",
            "07:00",
            "--budget-usd",
            "5",
            "--runs-root",
            places["runs"],
            *SMALL,
        )
    assert result.exit_code == 0, result.output
    assert "still running" in result.output
    assert _night_runs(places) == [run]
    log = (places["runs"] / f"{schedule.name_for(places['skill'])}.log").read_text()
    assert log.count("\n") == 1 and "starts nothing" in log


def test_a_night_without_an_api_key_says_so_once(cli, places, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = cli(
        "nightly",
        places["skill"],
        "--until",
        "07:00",
        "--budget-usd",
        "5",
        "--runs-root",
        places["runs"],
        "--provider",
        "anthropic",
    )
    assert result.exit_code == 2
    assert result.output.count("No API key") == 1
    name = schedule.name_for(places["skill"])
    assert "this night did not run: No API key" in (places["runs"] / f"{name}.log").read_text()
    assert "No API key" in (places["runs"] / f"{name}-summary.md").read_text()
    assert _night_runs(places) == []


def test_python_of_the_installed_command_is_this_one(places):
    entry = schedule.Entry(
        places["skill"], "22:30", "07:00", 10.0, places["runs"], places["runs"].parent
    )
    assert entry.argv()[:4] == [sys.executable, "-m", "optimizer", "nightly"]


def test_list_works_without_a_crontab_command(cli, places, monkeypatch):
    monkeypatch.setenv("OPTIMIZER_CRONTAB", "/no/such/crontab")
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "systemd")
    assert _schedule(cli, places).exit_code == 0
    listed = cli("schedule", "--list")
    assert listed.exit_code == 0 and schedule.name_for(places["skill"]) in listed.output
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "cron")
    failed = _schedule(cli, places)
    assert (
        failed.exit_code == 2 and "/no/such/crontab" in failed.output
    )  # one sentence, no traceback
    assert "Traceback" not in failed.output and "Errno" not in failed.output


def test_without_systemd_or_crontab_schedule_gives_the_command_for_the_users_own_scheduler(
    cli, places, monkeypatch
):
    monkeypatch.delenv("OPTIMIZER_SCHEDULER", raising=False)
    places["systemctl"].write_text("#!/bin/sh\nexit 1\n")  # no user manager answers
    monkeypatch.setenv("OPTIMIZER_CRONTAB", "/no/such/crontab")
    assert schedule.backend() == "none"
    planned = _schedule(cli, places, "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert planned.stderr.startswith("warning: no scheduler to install into here")
    assert len(planned.stderr.strip().splitlines()) == 1
    command = planned.stdout.strip().splitlines()[-1]
    assert " nightly " in command and "--until 07:00" in command
    assert subprocess.run(["sh", "-n", "-c", command]).returncode == 0  # sh parses it
    failed = _schedule(cli, places)
    assert failed.exit_code == 2 and failed.stdout == "", failed.output
    said = failed.stderr.strip()
    assert len(said.splitlines()) == 1 and "Errno" not in said and "Traceback" not in said
    assert "nothing was installed" in said and "every night at 22:30" in said
    assert said.endswith(command)
    assert not places["units"].exists() and not places["table"].exists()


def test_a_first_night_its_budget_cannot_pay_a_proposal_for_is_refused_and_logged(cli, places):
    result = cli(
        "nightly",
        places["skill"],
        "--until",
        "07:00",
        "--budget-usd",
        "0.01",
        "--runs-root",
        places["runs"],
        *SMALL,
    )
    # A first night its budget cannot pay one proposal for is refused before anything is
    # written (exit 2), its one sentence in the night's log, rather than spent at once.
    assert result.exit_code == 2, result.output
    assert "cannot pay for one proposal" in result.output
    assert _night_runs(places) == []
    log = (places["runs"] / f"{schedule.name_for(places['skill'])}.log").read_text().splitlines()
    assert "cannot pay for one proposal" in log[-1], log


def test_a_nights_last_log_line_says_how_it_stopped_once():
    from optimizer.nightly import night
    from optimizer.store.runs import Run

    row = Run(status="stopped", stop_reason="stopped by SIGTERM")  # systemd stopping the unit
    line = night.how_it_ended(Path("runs/x"), row, Path("runs/x/summary.md"))
    assert line == "runs/x: stopped by SIGTERM (summary: runs/x/summary.md)"  # "stopped: stopped"
    row = Run(status="failed", last_error="the evals file is gone.")
    line = night.how_it_ended(Path("runs/x"), row, Path("s.md"))
    assert line == "runs/x: failed: the evals file is gone (summary: s.md)"


@pytest.mark.slow
def test_the_installed_crontab_line_runs_a_night_in_sh_with_the_env_file(
    cli, places, monkeypatch, tmp_path
):
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "cron")
    assert _schedule(cli, places).exit_code == 0
    line = places["table"].read_text().splitlines()[-1]
    body = line.split(None, 5)[5].rsplit(" " + schedule.MARK, 1)[0]
    home = tmp_path / "home"
    (home / ".config" / "skill-optimizer").mkdir(parents=True)
    # the night reads the user's env file: here it sets a setting the run then records
    (home / ".config" / "skill-optimizer" / "env").write_text("OPTIMIZER_LOOP_PATIENCE=7\n")
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)}
    done = subprocess.run(["sh", "-c", body], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    [run] = _night_runs(places)
    assert (run / "summary.md").is_file()
    assert "patience = 7" in (run / "run.toml").read_text()
    log = (places["runs"] / f"{schedule.name_for(places['skill'])}.log").read_text()
    assert "starting" in log and "stopped" in log  # the night's lines and its output, appended


@pytest.mark.parametrize(
    "when, setting", [("weekly", "adopt.at_end=weekly"), ("nightly", "adopt.at_end=always")]
)
def test_a_schedule_adopts_only_when_the_user_said(cli, places, monkeypatch, when, setting):
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "cron")
    never = _schedule(cli, places, "--dry-run")
    assert "adopt.at_end" not in never.output
    said = _schedule(cli, places, "--dry-run", "--adopt", when)
    assert said.exit_code == 0, said.output
    assert setting in said.output.strip().splitlines()[-1]
    wrong = _schedule(cli, places, "--dry-run", "--adopt", "daily")
    assert wrong.exit_code == 2 and "--adopt 'daily': use nightly, weekly or never" in wrong.output


def test_a_night_without_a_limit_lifts_the_one_an_older_run_holds():
    from optimizer import config
    from optimizer.nightly import night

    def load(sets: list[str]):
        return lambda _eval_config: config.load(None, env={}, overrides=sets)

    lifted = night.resume_overrides(["sim.seed=3"], load(["sim.seed=3"]))
    assert lifted == ["sim.seed=3", "loop.max_iterations=none"]
    base = {"loop": {"max_iterations": 2}}  # an older run's run.toml
    assert (
        config.load(None, env={}, base=base, overrides=lifted).settings.loop.max_iterations is None
    )
    kept = night.resume_overrides(["loop.max_iterations=1"], load(["loop.max_iterations=1"]))
    assert kept == ["loop.max_iterations=1"]  # a limit the user set stays a limit a night
