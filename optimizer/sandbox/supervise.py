"""The supervisor of one command: start it, watch its pipes and its clock, stop it, report.
It must never return while a process of the run may still be alive and killable."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from optimizer.sandbox.cgroups import CLEANUP_S, TrialCgroup
from optimizer.sandbox.disk import MB, Usage, measure
from optimizer.sandbox.kill import GRACE_S, Kill
from optimizer.sandbox.launch import Launch
from optimizer.sandbox.pipes import Pipes
from optimizer.sandbox.policy import SandboxPolicy

# How often the workspace is measured while a command runs, at the least; a walk that takes
# long (a folder of many entries) spaces the polls out to WATCH_COST_SHARE of one core.
WATCH_S = 0.05
WATCH_COST_SHARE = 0.1


@dataclass
class Outcome:
    """What the supervisor saw; run() turns it into a SandboxResult."""

    returncode: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    truncated: bool = False
    timed_out: bool = False
    cancelled: bool = False
    started_child: bool = False
    workspace: Usage | None = None  # set when the workspace passed its limit: killed for it


class SpawnFailed(Exception):
    """The command could not be started at all (a missing program, a bad folder)."""


class _Supervisor:
    """One started command to its end: the loop, its clocks, and what "exit" and "cancel" do."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        pipes: Pipes,
        kill: Kill,
        deadline: float,
        watch: tuple[Path, int] | None = None,
    ) -> None:
        self.proc, self.pipes, self.kill = proc, pipes, kill
        self.deadline = deadline
        self.exited = False
        self.grace_end = float("inf")
        self.timed_out = self.cancelled = False
        self.watch = watch  # (workspace folder, limit in bytes)
        self.next_watch = time.monotonic() + WATCH_S if watch else float("inf")
        self.workspace: Usage | None = None

    def loop(self) -> None:
        while True:
            now = time.monotonic()
            self._enforce_clock(now)
            if self._finished(now):
                return
            for event in self.pipes.ready(self._wait(now)):
                if event == "exit":
                    self._on_exit()
                elif event == "cancel":
                    self._on_cancel()
            if self.pipes.pidfd is None and not self.exited and self.proc.poll() is not None:
                self._on_exit()

    def _enforce_clock(self, now: float) -> None:
        if self.exited:
            return
        if self.kill.level == 0 and now >= self.deadline:
            self.timed_out = True
            self.kill.start(self.pipes.sandbox_init)
        if self.kill.level == 0 and now >= self.next_watch:
            self._measure(now)
        self.kill.escalate_if_due(now)

    def _measure(self, now: float) -> None:
        assert self.watch is not None
        folder, limit = self.watch
        usage = measure(folder, limit)
        spent = time.monotonic() - now
        self.next_watch = time.monotonic() + max(WATCH_S, spent / WATCH_COST_SHARE)
        if usage.over:
            self.workspace = usage
            self.kill.start(self.pipes.sandbox_init)

    def _finished(self, now: float) -> bool:
        if self.exited:
            return not self.pipes.open_streams or now >= self.grace_end
        # Past give_up_at the command is unkillable (stuck in the kernel); close() tries again.
        return now >= self.kill.give_up_at

    def _wait(self, now: float) -> float:
        if self.exited:
            wait = self.grace_end - now
        elif self.kill.level == 0:
            wait = min(self.deadline, self.next_watch) - now
        else:
            wait = self.kill.next_deadline() - now
        if self.pipes.pidfd is None:
            wait = min(wait, 0.05)
        return max(0.0, wait)

    def _on_exit(self) -> None:
        # The leader is still a zombie here, so its pgid cannot have been reused: killing the
        # group now takes out background leftovers (`sleep 1000 &`) of unconfined runs.
        self.kill.group()
        self.proc.wait()
        self.exited = True
        self.grace_end = time.monotonic() + GRACE_S

    def _on_cancel(self) -> None:
        self.cancelled = True
        if not self.exited and self.kill.level == 0:
            self.kill.start(self.pipes.sandbox_init)

    def close(self) -> None:
        if not self.exited:
            self.kill.group()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=CLEANUP_S)
        self.pipes.close()

    def outcome(self) -> Outcome:
        return Outcome(
            returncode=self.proc.returncode,
            stdout=bytes(self.pipes.buffers["out"]),
            stderr=bytes(self.pipes.buffers["err"]),
            truncated=self.pipes.truncated,
            timed_out=self.timed_out,
            cancelled=self.cancelled,
            started_child=self.pipes.started_child,
            workspace=self.workspace,
        )


def _spawn(launch: Launch, stdin: str | None) -> subprocess.Popen[bytes]:
    status_pipe = launch.status_pipe
    pass_fds = (status_pipe[1],) if status_pipe else ()
    try:
        proc = subprocess.Popen(
            launch.argv,
            cwd=launch.cwd,
            env=launch.env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: one killpg reaches grandchildren
            pass_fds=pass_fds,
        )
    except OSError as exc:
        if status_pipe:
            for fd in status_pipe:
                os.close(fd)
        raise SpawnFailed(str(exc)) from exc
    if status_pipe:
        # Only bwrap keeps the write end, so the read end ends when bwrap is done with it.
        os.close(status_pipe[1])
    return proc


def supervise(
    launch: Launch,
    *,
    stdin: str | None,
    policy: SandboxPolicy,
    cgroup: TrialCgroup | None,
    cancel_fd: int | None,
    workspace: Path | None = None,
) -> Outcome:
    """Start what `launch` says and watch it to its end: stdin fed, output kept up to the cap,
    killed at the deadline, on cancel, or when `workspace` passes policy.max_workspace_mb.
    Raises SpawnFailed when it cannot start; closes both fds of launch.status_pipe."""
    proc = _spawn(launch, stdin)
    deadline = time.monotonic() + policy.timeout_s
    pipes = Pipes(
        proc,
        stdin=stdin,
        cap=policy.max_output_bytes,
        status_fd=launch.status_pipe[0] if launch.status_pipe else None,
        cancel_fd=cancel_fd,
    )
    watch = (workspace, policy.max_workspace_mb * MB) if workspace is not None else None
    supervisor = _Supervisor(proc, pipes, Kill(proc, cgroup), deadline, watch)
    try:
        supervisor.loop()
    finally:
        supervisor.close()
    return supervisor.outcome()
