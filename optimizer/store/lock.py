"""The run folder's lock: an flock on its pidfile, held by the one daemon that works on it, and
the pid of that daemon for anyone who asks (status, stop). Never takes the lock to look."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from optimizer.errors import BadInput
from optimizer.store.files import Workspace


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
