"""The run folder's lock: an flock on its pidfile, held by the one daemon that works on it, and
the pid of that daemon for anyone who asks (status, stop). Never takes the lock to look. `stop`
lives here, not beside the daemon: it answers at once, without importing the model stack."""

from __future__ import annotations

import fcntl
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from optimizer import words
from optimizer.errors import BadInput
from optimizer.store.files import Workspace, write_text


@contextmanager
def lock(ws: Workspace) -> Iterator[None]:
    """An flock on the pidfile for the daemon's whole life; the kernel drops it on any death."""
    ws.root.mkdir(parents=True, exist_ok=True)
    handle = open(ws.pidfile, "a+")  # noqa: SIM115 - held for the whole run
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        pid = running_pid(ws)
        raise BadInput(
            f"{ws.root}: a daemon is already running on this run folder (pid {pid}); "
            f"watch it with `optimizer status {ws.root}` or stop it with "
            f"`optimizer stop {ws.root}`."
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    ws.starting.unlink(missing_ok=True)  # started: the pidfile answers from now on
    try:
        yield
    finally:
        handle.seek(0)
        handle.truncate()
        handle.close()


def running_pid(ws: Workspace) -> int | None:
    """The pid of the live daemon of this folder, or None (a stale pidfile counts as none)."""
    try:
        text = ws.pidfile.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    with open(ws.pidfile) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return int(text)
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def mark_starting(ws: Workspace, pid: int) -> None:
    """A detached daemon takes its lock seconds after `run --detach` returns (its imports): the
    marker lets a `stop` in between know it is coming, and the STOP file it leaves is read at the
    daemon's first check (the child keeps it, daemon.resume)."""
    write_text(ws.starting, f"{pid}\n")


def starting_pid(ws: Workspace) -> int | None:
    """The pid of a detached daemon that has not taken its lock yet, or None (none was spawned,
    it holds its lock now, or it died before taking it)."""
    try:
        text = ws.starting.read_text().strip()
    except OSError:
        return None
    if not text.isdigit() or not _alive(int(text)):
        return None
    return int(text)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    try:  # a zombie has ended; only its parent has not collected it yet
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def request_stop(run_dir: Path) -> str:
    """Ask the daemon to stop after its unit of work in flight, and return at once: the stop file
    for a daemon between units (or one not started yet), SIGTERM for a live one."""
    ws = Workspace(run_dir)
    if not ws.state_db.exists():
        raise BadInput(words.not_a_run(run_dir))
    at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    write_text(ws.stop_file, f"stop requested at {at}\n")
    pid = running_pid(ws)
    if pid is None and (coming := starting_pid(ws)) is not None:
        return (
            f"pid {coming} is still starting on {run_dir}; it will stop before its first unit of "
            f"work. `optimizer status {run_dir}` shows when it has."
        )
    if pid is None:
        return f"no daemon is running on {run_dir}; it will not start the next unit of work."
    os.kill(pid, signal.SIGTERM)
    return (
        f"asked pid {pid} to stop after the unit of work in flight; `optimizer status {run_dir}` "
        "shows when it has."
    )
