"""The disk and the database failing under a run: a read-only run folder, a full disk, a database
locked by another process. Each stops the run with one sentence and exit 1, leaves a consistent
state, and once the fault is gone `optimizer resume` ends with the uninterrupted run's lineage.
The faults strike real processes; the resumes after them run in this process."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import tiers
from test_daemon import ROOT, RUN, finished, stage, start, wait_for
from test_daemon import cli as run_in_a_process
from test_faults import full_lineage, reference_run
from typer.testing import CliRunner

from optimizer import logs
from optimizer.cli import app
from optimizer.inputs.artifacts import check_artifact

pytestmark = pytest.mark.slow  # runs against a full, read-only or locked disk


def _can_mount() -> str | None:
    """Why mounts cannot be made here, or None. Root ignores permission bits, so a read-only
    folder and a full disk need real mounts (a bind mount remounted ro, a small tmpfs)."""
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1M tmpfs /mnt"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"cannot mount here (unshare -m + mount: {probe.stderr.strip() or probe.returncode})"
    return None


needs_mount = tiers.needs("mounts", _can_mount())


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    return reference_run(tmp_path_factory)


@pytest.fixture(scope="module")
def partial(tmp_path_factory) -> Path:
    """The same run stopped after its first iteration; `resume --max-iterations RUN[-1]` completes it."""
    run_dir = tmp_path_factory.mktemp("partial") / "run"
    done = CliRunner().invoke(
        app, [*RUN, "--run-dir", str(run_dir), "--max-iterations", "1"], catch_exceptions=False
    )
    logs.reset()
    assert done.exit_code == 0, done.output
    return run_dir


def resume(cli, run_dir: Path, *args: str) -> None:
    done = cli("resume", run_dir, *args)
    assert done.exit_code == 0, done.output


def one_sentence_failure(proc: subprocess.CompletedProcess, *words: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 1, (proc.returncode, proc.stdout, err)
    assert "Traceback" not in err and "Logging error" not in err, err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert ".tmp" not in err, err  # the file being written, not its hidden temp file
    assert any(w in err for w in words), err
    return err


def consistent(run_dir: Path) -> None:
    conn = sqlite3.connect(run_dir / "state.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    for path in run_dir.rglob("*.json"):
        if {"outputs", "inputs"} & set(path.relative_to(run_dir).parts):
            continue
        if path.name not in ("assignment.json", "selection.json"):
            report = check_artifact(path, None, True)
            assert report.ok, (path, report.problems)


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


@needs_mount
def test_a_read_only_run_folder(reference, partial, tmp_path, cli):
    run_dir = tmp_path / "run"
    shutil.copytree(partial, run_dir)
    before = tree(run_dir)
    # A private mount namespace: the read-only bind mount disappears with the command.
    script = (
        'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && '
        '"$2" -m optimizer status "$1" >/dev/null && "$2" -m optimizer lineage "$1" >/dev/null && '
        f'exec "$2" -m optimizer resume "$1" --max-iterations {RUN[-1]}'
    )
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", str(run_dir), sys.executable],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    err = one_sentence_failure(proc, "Read-only file system", "read-only")
    print(f"\nread-only run folder: {err}")
    assert tree(run_dir) == before  # status and lineage read it without writing a byte
    resume(cli, run_dir, "--max-iterations", RUN[-1])
    assert full_lineage(run_dir) == full_lineage(reference)
    consistent(run_dir)


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MB tmpfs, grown to 64 MB by the test once the fault has been seen."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3M", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@needs_mount
def test_a_full_disk(reference, small_disk, cli):
    run_dir = small_disk / "run"
    proc = run_in_a_process(*RUN, "--run-dir", str(run_dir), check=False)
    err = one_sentence_failure(proc, "No space left on device", "disk is full")
    print(f"\nfull disk: {err}")
    consistent(run_dir)
    subprocess.run(["mount", "-o", "remount,size=64M", str(small_disk)], check=True)
    resume(cli, run_dir)
    assert full_lineage(run_dir) == full_lineage(reference)
    consistent(run_dir)


def test_a_database_locked_by_another_process(reference, tmp_path, cli):
    run_dir = tmp_path / "run"
    # A short busy timeout (store.busy_timeout_s, 30 s by default) keeps the test quick.
    proc = start(
        *RUN,
        "--run-dir",
        str(run_dir),
        "--set",
        "sim.latency_ms=10",
        "--set",
        "store.busy_timeout_s=0.5",
    )
    wait_for(lambda: stage(run_dir).startswith(("iteration", "v1")))
    holder = sqlite3.connect(run_dir / "state.db", timeout=30, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # e.g. a database browser left in a write transaction
    try:
        failed = finished(proc, timeout=60)
        message = one_sentence_failure(failed, "locked")
        print(f"\nlocked database: {message}")
        again = run_in_a_process(
            "resume", str(run_dir), check=False
        )  # still locked: the same refusal
        one_sentence_failure(again, "locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    consistent(run_dir)
    resume(cli, run_dir)
    assert full_lineage(run_dir) == full_lineage(reference)
    consistent(run_dir)
