"""The kill path of a run: the sandbox's pid 1 first, then its process group and its cgroups.
It must never signal a process outside the run, nor wait unbounded for one to die."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from optimizer.sandbox.cgroups import CLEANUP_S, TrialCgroup

GRACE_S = 1.0  # after the command ends or is killed, how long pipes may take to reach EOF


def _parent_pid_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])


class Kill:
    """How far the kill of one run went: level 0 not started, 1 the sandbox's pid 1 killed,
    2 the whole process group and cgroups killed."""

    def __init__(self, proc: subprocess.Popen[bytes], cgroup: TrialCgroup | None) -> None:
        self.proc = proc
        self.cgroup = cgroup
        self.level = 0
        self.escalate_at = self.give_up_at = float("inf")

    def group(self) -> None:
        """Kill every process of the run; from the first call on, the clock to give up runs."""
        self.give_up_at = min(self.give_up_at, time.monotonic() + CLEANUP_S)
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()

    def start(self, sandbox_init: int | None) -> None:
        # Killing bwrap's pid 1 first tears the whole pid namespace down and lets bwrap reap it
        # and exit by itself, so when bwrap is gone every process of the sandbox is gone too.
        # The parent check makes sure the pid is still that process, not a reused number.
        if sandbox_init is not None and _parent_pid_of(sandbox_init) == self.proc.pid:
            with contextlib.suppress(OSError):
                os.kill(sandbox_init, signal.SIGKILL)
            self.level, self.escalate_at = 1, time.monotonic() + GRACE_S
        else:
            self.group()
            self.level = 2

    def escalate_if_due(self, now: float) -> None:
        """When bwrap did not exit within the grace after its pid 1 died, kill everything."""
        if self.level == 1 and now >= self.escalate_at:
            self.group()
            self.level = 2

    def next_deadline(self) -> float:
        return self.escalate_at if self.level == 1 else self.give_up_at
