"""Twenty SIGKILLs at seeded random moments of one simulated run, each followed by the command a
user would type next: the run ends with the uninterrupted run's lineage and pays for nothing twice."""

from __future__ import annotations

import json
import random
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from launcher import Forked
from test_daemon import EXAMPLE, RUN, completed_hashes, finished, start, wait_for
from test_faults import full_lineage, json_files, reference_run

from optimizer.inputs.artifacts import check_artifact

pytestmark = pytest.mark.slow  # runs killed and resumed in subprocesses

KILLS = 20
FULL_SPEED = ("--set", "sim.latency_ms=0")  # the last --set of a key wins


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    return reference_run(tmp_path_factory)


def created(run_dir: Path) -> bool:
    """The run's row is committed: from then on `resume` continues it; before, `run` starts over."""
    try:
        conn = sqlite3.connect(f"file:{run_dir / 'state.db'}?mode=ro", uri=True)
        try:
            return conn.execute("select count(*) from runs").fetchone()[0] > 0
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def log_lines(run_dir: Path) -> int:
    path = run_dir / "optimizer.log"
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def holds_the_lock(run_dir: Path, proc: Forked) -> bool:
    try:
        return proc.poll() is not None or (run_dir / "optimizer.pid").read_text() == str(proc.pid)
    except OSError:
        return False


def test_twenty_kills_then_resume_end_with_the_uninterrupted_lineage(reference, tmp_path):
    run_dir = tmp_path / "run"
    first = (*RUN, "--run-dir", str(run_dir), "--set", "sim.latency_ms=200")
    # 200 ms a call makes the run about 30 s of work, twice what the seeded kills let it do (the
    # twenty waits add up to 17 s), so all twenty land before it ends on any machine; at 100 ms
    # one run in a few ended before its twentieth kill.
    # After the last kill the run goes on at full speed: the slow calls were there to be killed in.
    rng = random.Random(1)
    proc, kills, mid_work = start(*first), 0, 0
    while kills < KILLS:
        # Every other kill is timed from the moment the daemon holds the run's lock, so half of
        # them land in the work itself; the others also hit start-up and the folder's creation.
        if kills % 2:
            wait_for(lambda p=proc: holds_the_lock(run_dir, p), timeout=60)
        before = log_lines(run_dir)
        try:
            proc.wait(timeout=rng.uniform(0.2, 1.5))
            break  # the run ended before the next kill
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
        mid_work += log_lines(run_dir) > before  # this process was working when it died
        pace = FULL_SPEED if kills == KILLS else ()
        proc = start("resume", str(run_dir), *pace) if created(run_dir) else start(*first, *pace)
    done = finished(proc, timeout=180)
    print(
        f"\n{kills} kills, {mid_work} of them in the middle of work; final exit {done.returncode}"
    )
    assert done.returncode == 0, done.stderr
    assert kills == KILLS and mid_work >= KILLS // 4

    assert full_lineage(run_dir) == full_lineage(reference)
    repeated = {h: n for h, n in completed_hashes(run_dir).items() if n > 1}
    assert repeated == {}, f"{len(repeated)} completed model calls were paid twice"
    conn = sqlite3.connect(run_dir / "state.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    ledger = {h for (h,) in conn.execute("select hash from calls where outcome = 'ok'")}
    # A kill between the ledger's commit and the log line loses only the line, never the answer.
    assert set(completed_hashes(run_dir)) <= ledger
    conn.close()
    assert json_files(run_dir) == json_files(reference)  # nothing lost, nothing half-written
    leftovers = [p for p in run_dir.rglob("*") if ".tmp" in p.name or p.name == ".work"]
    assert leftovers == []
    for path in run_dir.rglob("*.json"):
        if {"outputs", "inputs"} & set(path.relative_to(run_dir).parts):
            continue
        if path.name in ("assignment.json", "selection.json"):
            json.loads(path.read_text())
            continue
        report = check_artifact(path, None, True)
        assert report.ok, (path, report.problems)


@pytest.mark.parametrize("left", ["before state.db", "state.db without its row"])
def test_a_run_killed_while_creating_its_folder_starts_again_with_the_same_command(
    tmp_path, left, cli
):
    from optimizer.store.db import Store

    run_dir = tmp_path / "run"
    command = (*RUN[:-1], "0", "--run-dir", run_dir, "--set", "evals.runs_per_eval=1")
    # What `optimizer run` leaves when killed at that point: run.toml first, then the snapshots.
    run_dir.mkdir()
    (run_dir / "run.toml").write_text("# The settings this run was started with\n")
    shutil.copytree(EXAMPLE / "evals", run_dir / "inputs" / "evals")
    (run_dir / "v0" / ".skill.tmp-12345").mkdir(parents=True)
    if left == "state.db without its row":
        shutil.copytree(EXAMPLE, run_dir / "v0" / "skill", ignore=shutil.ignore_patterns("evals"))
        Store(run_dir / "state.db").close()
    resumed = cli("resume", run_dir)
    assert resumed.exit_code == 2 and "Traceback" not in resumed.output
    assert ("`optimizer run`" in resumed.stderr) or ("not a run folder" in resumed.stderr)
    again = cli(*command)  # the same command, no --fresh needed
    assert again.exit_code == 0, again.output
    assert "stopped" in again.stdout
    history = json.loads((run_dir / "history.json").read_text())
    assert [i["grading_result"] for i in history["iterations"]] == ["baseline"]
    assert not (run_dir / "v0" / ".skill.tmp-12345").exists()
    assert check_artifact(run_dir / "history.json", None, True).ok


def test_a_version_registered_just_before_a_kill_is_the_same_version_after_resume(tmp_path):
    """The kill lands between the commit of a proposal's version and the commit of the proposal's
    outcome in its iteration: the resumed proposal is that version, not a duplicate of it."""
    from types import SimpleNamespace

    from optimizer.search.proposal import Candidate
    from optimizer.search.state import register
    from optimizer.store.db import Store
    from optimizer.store.files import Workspace

    ws = Workspace(tmp_path / "run")
    shutil.copytree(EXAMPLE, ws.skill("v0"), ignore=shutil.ignore_patterns("evals"))
    store = Store(ws.state_db)
    with store.atomic():
        store.db["versions"].insert({"label": "v0", "hash": "h0", "iteration": 0})
        store.db["iterations"].insert({"number": 1, "parent": "v0", "candidates_json": "{}"})
    proposal = tmp_path / "proposal"
    shutil.copytree(ws.skill("v0"), proposal)
    (proposal / "SKILL.md").write_text((proposal / "SKILL.md").read_text() + "\nOne more rule.\n")
    run = SimpleNamespace(ws=ws, store=store)
    cand = Candidate(proposal, "one more rule", "why")
    assert register(run, 1, "v0", cand) == {"label": "v1"}
    # killed here: the iteration's row never recorded {"0": {"label": "v1"}}; the resumed
    # process proposes the same thing again
    assert register(run, 1, "v0", cand) == {"label": "v1"}
    with store.atomic():
        store.db["iterations"].update(1, {"candidates_json": json.dumps({"0": {"label": "v1"}})})
    assert register(run, 1, "v0", cand) == {"duplicate": "v1"}  # a second proposal, the same
    store.close()


def test_a_moved_run_folder_resumes_and_loses_the_temp_files_a_kill_left(reference, tmp_path, cli):
    run_dir = tmp_path / "run"  # copied under another name: the run's row still has the old one
    shutil.copytree(reference, run_dir)
    run = next(run_dir.glob("v0/eval-*/with_skill/run-1"))
    stale = [run / ".grading.json.k1ll3d00.tmp", run_dir / ".history.json.k1ll3d01.tmp"]
    for path in stale:
        path.write_text('{"half": ')
    kept = run_dir / "inputs" / ".notes.txt.user0001.tmp"  # the user's own file is left alone
    kept.write_text("mine")
    resumed = cli("resume", run_dir)
    assert resumed.exit_code == 0, resumed.output
    assert not any(p.exists() for p in stale) and kept.exists()
    assert full_lineage(run_dir) == full_lineage(reference)
