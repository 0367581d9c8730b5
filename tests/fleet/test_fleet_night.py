"""A fleet night end to end, through the command line: three foreign skills and a broken one under
one budget. The broken one is named and skipped, the others run; each member is an ordinary run
folder every member command reads; a kill in the middle and `resume` end where the uninterrupted
fleet ends and pay for nothing twice."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from test_daemon import ROOT, completed_hashes, finished, start, wait_for
from test_faults import full_lineage

pytestmark = pytest.mark.slow  # fleet nights in subprocesses

FOREIGN = ROOT / "tests" / "fixtures" / "foreign"
MEMBERS = ("sql-helper", "team-updates", "webapp-checks")


@pytest.fixture(scope="module")
def skills(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("skills")
    for name in MEMBERS:
        shutil.copytree(FOREIGN / name, root / name)
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text("Instructions without front matter.\n")
    return root


def night(skills: Path, out: Path, *extra: str) -> tuple[str, ...]:
    return (
        "run", str(skills), "--provider", "sim", "--budget-usd", "8", "--max-iterations", "2",
        "--out", str(out), "--unconfined", "--set", "sim.seed=3", *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def reference(skills, tmp_path_factory, cli_module) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("fleet") / "night"
    done = cli_module(*night(skills, out))
    return out, done


@pytest.fixture(scope="module")
def cli_module():
    from test_daemon import cli

    return cli


def test_a_broken_skill_is_named_and_skipped_and_the_others_run(reference, cli_module):
    out, done = reference
    assert done.returncode == 0, done.stderr
    assert "skipped" in done.stdout and "no YAML front matter" in done.stdout
    fleet = json.loads((out / "fleet.json").read_text())
    assert [m["folder"] for m in fleet["members"]] == list(MEMBERS)
    assert len(fleet["skipped"]) == 1 and "broken" in fleet["skipped"][0]["skill_dir"]
    for name in MEMBERS:
        with sqlite3.connect(out / name / "state.db") as db:
            status, reason = db.execute("select status, stop_reason from runs").fetchone()
        assert status == "stopped" and reason == "reached 2 iterations", (name, reason)
    shown = cli_module("status", str(out)).stdout
    assert all(f"{name}: best" in shown for name in MEMBERS)
    assert "skipped" in shown and "one budget" not in shown
    morning = (out / "summary.md").read_text()
    assert "## Where the money went" in morning and "## Skipped" in morning
    assert all(f"**{name}**" in morning for name in MEMBERS)


def test_the_fleets_spend_is_its_members_spend_within_one_budget(reference, cli_module):
    out, _ = reference
    info = json.loads(cli_module("status", str(out), "--json").stdout)
    members = [
        json.loads(cli_module("status", m["run_dir"], "--json").stdout) for m in info["members"]
    ]
    assert info["budgeted_usd"] == pytest.approx(sum(m["budgeted_usd"] for m in members), abs=1e-5)
    assert 0 < info["budgeted_usd"] <= 8.0
    assert all(m["budget_usd"] == 8.0 for m in members)  # each member stops at the fleet's


def test_every_member_command_works_on_a_members_run_folder(reference, cli_module, tmp_path):
    out, _ = reference
    member = out / "sql-helper"
    for args in (
        ("status", str(member)),
        ("lineage", str(member)),
        ("show", str(member), "v0"),
        ("diff", str(member), "v0", "v0"),
        ("summary", str(member)),
        ("export", str(member), "v0", "--out", str(tmp_path / "exported")),
    ):
        done = cli_module(*args, check=False)
        assert done.returncode == 0, (args, done.stderr)


def test_a_kill_in_the_middle_then_resume_ends_as_the_uninterrupted_fleet(
    skills, reference, tmp_path
):
    ref, _ = reference
    out = tmp_path / "night"
    proc = start(*night(skills, out, "--set", "sim.latency_ms=60"))

    def stepped() -> bool:
        try:
            with sqlite3.connect(f"file:{out / 'fleet.db'}?mode=ro", uri=True) as db:
                return db.execute("select count(*) from steps").fetchone()[0] >= 4
        except sqlite3.Error:
            return proc.poll() is not None

    wait_for(stepped, timeout=120)
    assert proc.poll() is None, "the fleet ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = finished(start("resume", str(out)), timeout=240)
    assert done.returncode == 0, done.stderr
    for name in MEMBERS:
        assert full_lineage(out / name) == full_lineage(ref / name), name
    repeated = {h: n for h, n in completed_hashes(out).items() if n > 1}
    assert repeated == {}, f"{len(repeated)} completed model calls were paid twice"


def test_stop_asks_the_fleet_and_resume_clears_it(reference, cli_module, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(reference[0], out)
    said = cli_module("stop", str(out)).stdout
    assert "no daemon is running on the fleet" in said
    assert (out / "STOP").is_file()


def test_a_scheduled_folder_of_skills_starts_a_fleet_then_resumes_it_with_tonights_budget(
    skills, tmp_path, cli
):
    """`optimizer nightly SKILLS_DIR` (what a schedule runs): the first night starts a fleet, the
    next resumes it with tonight's budget on top of what it spent; `schedule` checks each
    member's evals and names the broken one."""
    runs = tmp_path / "runs"
    small = ("--provider", "sim", "--set", "loop.max_iterations=1")
    nightly = ("nightly", str(skills), "--until", "07:00", "--runs-root", str(runs), *small)
    first = cli(*nightly, "--budget-usd", "6")
    assert first.exit_code == 0, first.output
    (fleet,) = sorted(runs.glob("*-fleet-night-*"))
    spent = json.loads(cli("status", str(fleet), "--json").output)["budgeted_usd"]
    second = cli(*nightly, "--budget-usd", "2")
    assert second.exit_code == 0, second.output
    assert sorted(runs.glob("*-fleet-night-*")) == [fleet]  # resumed, not a new fleet
    assert json.loads((fleet / "fleet.json").read_text())["budget_usd"] == pytest.approx(spent + 2)
    log = next(runs.glob("*.log")).read_text()
    assert "starting" in log and "resuming" in log
    planned = cli("schedule", str(skills), "--budget-usd", "5", "--dry-run", "--provider", "sim")
    assert planned.exit_code == 0, planned.output
    assert "each night skips" in planned.output and "broken" in planned.output


def test_a_resume_the_fleets_budget_cannot_cover_is_refused_before_anything_is_written(
    reference, cli_module, tmp_path
):
    out = tmp_path / "copy"
    shutil.copytree(reference[0], out)
    before = (out / "fleet.json").read_text()
    done = cli_module("resume", str(out), "--budget-usd", "0.5", check=False)
    assert done.returncode == 2 and "give --budget-usd more than" in done.stderr, done.stderr
    assert (out / "fleet.json").read_text() == before


def test_report_writes_each_members_report_and_the_fleets_page_linking_them(
    reference, cli_module, tmp_path
):
    out = tmp_path / "copy"
    shutil.copytree(reference[0], out)
    done = cli_module("report", str(out))
    assert done.returncode == 0, done.stderr
    page = (out / "report.html").read_text()
    for name in MEMBERS:
        assert f'href="{name}/report.html"' in page
        assert (out / name / "report.html").is_file()
    assert "<h2>Where the money went</h2>" in page


def test_a_member_resumes_only_with_its_fleet_and_bad_settings_write_nothing(
    reference, cli_module, tmp_path
):
    out = tmp_path / "copy"
    shutil.copytree(reference[0], out)
    alone = cli_module("resume", str(out / "sql-helper"), check=False)
    assert alone.returncode == 2 and "a member of the fleet" in alone.stderr, alone.stderr
    before = {p: p.read_bytes() for p in out.rglob("*.toml")} | {
        out / "fleet.json": (out / "fleet.json").read_bytes()
    }
    bad = cli_module("resume", str(out), "--budget-usd", "50", "--set", "loop.nope=1", check=False)
    assert bad.returncode == 2, bad.stderr
    assert {p: p.read_bytes() for p in before} == before
    morning = cli_module("summary", str(out))
    assert morning.returncode == 0 and "## Per skill" in morning.stdout


def test_a_detached_fleet_runs_in_the_background_and_leaves_its_morning(
    skills, tmp_path, cli_module
):
    out = tmp_path / "night"
    started = cli_module(*night(skills, out, "--detach"))
    assert started.returncode == 0 and "running in the background" in started.stdout

    def ended() -> bool:
        info = json.loads(cli_module("status", str(out), "--json").stdout or "{}")
        return not info.get("running", True) and (out / "summary.md").is_file()

    try:
        wait_for(ended, timeout=300)
    except AssertionError:  # what the background daemon printed says why
        log = out / "daemon.out"
        raise AssertionError(log.read_text() if log.is_file() else "no daemon.out") from None
    shown = cli_module("status", str(out)).stdout
    assert "not running" in shown and all(f"{name}: best" in shown for name in MEMBERS)
