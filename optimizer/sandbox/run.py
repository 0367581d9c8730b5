"""Run one command in the sandbox, blocking or from asyncio: launch, supervise, report.
It must never raise for what one command did or failed to do; only an unmet policy raises."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from optimizer.sandbox.cgroups import TrialCgroup, process_limit_mechanism
from optimizer.sandbox.confinement import confinement_for, warn_once
from optimizer.sandbox.disk import MB, measure, over_limit_message
from optimizer.sandbox.launch import Launch, confined_launch, unconfined_launch
from optimizer.sandbox.limits import SETUP_FAILED
from optimizer.sandbox.paths import unrewrite_host_paths
from optimizer.sandbox.policy import SandboxPolicy, SandboxResult
from optimizer.sandbox.supervise import Outcome, SpawnFailed, supervise

_executor_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


class _Canceller:
    """Wakes a supervising thread so that a cancelled run_async kills its command at once."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()

    def cancel(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self.write_fd, b"x")

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _as_argv(command: str | Sequence[str]) -> list[str]:
    return ["bash", "-c", command] if isinstance(command, str) else [str(c) for c in command]


def _refusal(
    command: str | Sequence[str], work_dir: Path, skill_dir: Path | None
) -> tuple[str, bool] | None:
    """(error, infra) when the run cannot start for its inputs, else None."""
    if not work_dir.is_dir():
        return f"the work folder {work_dir} does not exist", True
    if skill_dir is not None and not Path(skill_dir).is_dir():
        return f"the skill folder {skill_dir} does not exist", True
    if not _as_argv(command) or (isinstance(command, str) and not command.strip()):
        return "the command is empty", False
    return None


@dataclass(frozen=True)
class _Job:
    """One command and everything it runs with, as _run received them (work_dir made a Path)."""

    command: str | Sequence[str]
    work_dir: Path
    skill_dir: Path | None
    policy: SandboxPolicy
    env: Mapping[str, str] | None
    stdin: str | None
    canceller: _Canceller | None


@dataclass(frozen=True)
class _Start:
    """When the command's handling began and whether it is confined: what a failed result
    reports besides its error."""

    started: float
    confined: bool

    def failed(self, error: str, infra: bool = True) -> SandboxResult:
        """A result for a command that did not run, or did not finish running."""
        return SandboxResult(
            exit_code=None,
            stdout="",
            stderr="",
            confined=self.confined,
            duration_s=time.monotonic() - self.started,
            error=error,
            infra=infra,
        )


def _run(
    command: str | Sequence[str],
    *,
    work_dir: Path,
    skill_dir: Path | None,
    policy: SandboxPolicy,
    env: Mapping[str, str] | None,
    stdin: str | None,
    canceller: _Canceller | None = None,
) -> SandboxResult:
    """run() and run_async(): refuse, launch and supervise, then report the command."""
    start = _Start(started=time.monotonic(), confined=confinement_for(policy))
    job = _Job(command, Path(work_dir), skill_dir, policy, env, stdin, canceller)
    refused = _refused(job, start)
    if refused is not None:
        return refused
    supervised = _supervised(job, start)
    if isinstance(supervised, SandboxResult):
        return supervised
    outcome, launch = supervised
    if outcome.workspace is None and not outcome.cancelled:
        # The polls may all have come before the last write: one measure after the end decides.
        after = measure(job.work_dir, policy.max_workspace_mb * MB)
        outcome.workspace = after if after.over else None
    result = _result(outcome, launch, start.confined, policy)
    result.duration_s = time.monotonic() - start.started
    return result


def _refused(job: _Job, start: _Start) -> SandboxResult | None:
    """The failed result when the command must not start (bad inputs, a workspace already over
    its limit), else None; warns once when nothing here bounds the number of processes."""
    refusal = _refusal(job.command, job.work_dir, job.skill_dir)
    if refusal is not None:
        return start.failed(*refusal)
    policy = job.policy
    before = measure(job.work_dir, policy.max_workspace_mb * MB)
    if before.over:  # filled by an earlier command or a host-side write: nothing more runs
        result = start.failed(over_limit_message(before, policy.max_workspace_mb), infra=False)
        result.resource_limit = "workspace"
        return result
    if policy.mode != "none" and process_limit_mechanism() == "none":
        warn_once(
            "sandbox.no_process_limit",
            reason="running as root without a usable pids cgroup: max_processes is not "
            "enforced, only the wall clock and the pid namespace bound a fork bomb",
        )
    return None


def _supervised(job: _Job, start: _Start) -> tuple[Outcome, Launch] | SandboxResult:
    """Launch the command in its cgroup and wait for it: what the supervisor saw and how it was
    launched, or the failed result when it could not start. The cgroup and the unconfined
    scratch folder are gone when this returns."""
    with contextlib.ExitStack() as stack:
        cgroup = TrialCgroup.create(job.policy)
        if cgroup is not None:
            stack.callback(cgroup.close)
        launch = _launch(job, start.confined, cgroup, stack)
        try:
            outcome = supervise(
                launch,
                stdin=job.stdin,
                policy=job.policy,
                cgroup=cgroup,
                cancel_fd=job.canceller.read_fd if job.canceller else None,
                workspace=job.work_dir,
            )
        except SpawnFailed as exc:
            return start.failed(f"could not start the command: {exc}")
    return outcome, launch


def _launch(
    job: _Job, confined: bool, cgroup: TrialCgroup | None, stack: contextlib.ExitStack
) -> Launch:
    """How to start the command: under bubblewrap, or directly with a scratch folder of its own
    that `stack` removes."""
    # Without a memory cgroup measuring the run's total, RLIMIT_AS is the memory limit.
    address_space = cgroup is None or "memory" not in cgroup.controllers
    cmd = _as_argv(job.command)
    work_dir, skill_dir, policy, env = job.work_dir, job.skill_dir, job.policy, job.env
    if confined:
        return confined_launch(cmd, work_dir, skill_dir, policy, env, cgroup, address_space)
    scratch = Path(tempfile.mkdtemp(prefix="sandbox-"))
    stack.callback(shutil.rmtree, scratch, True)
    return unconfined_launch(cmd, work_dir, skill_dir, policy, env, cgroup, address_space, scratch)


def _result(
    outcome: Outcome, launch: Launch, confined: bool, policy: SandboxPolicy
) -> SandboxResult:
    """The caller's view of what the supervisor saw: fixed paths, exit codes, whose failure."""
    stdout = unrewrite_host_paths(_decode(outcome.stdout), launch.host_to_fixed)
    stderr = unrewrite_host_paths(_decode(outcome.stderr), launch.host_to_fixed)
    error: str | None = None
    infra = False
    exit_code = outcome.returncode
    if exit_code is not None and exit_code < 0:
        exit_code = 128 - exit_code  # the shell's convention for "killed by signal N"
    if outcome.workspace is not None:
        error = over_limit_message(outcome.workspace, policy.max_workspace_mb)
        return SandboxResult(
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            output_truncated=outcome.truncated,
            confined=confined,
            error=error,
            resource_limit="workspace",
        )
    if outcome.cancelled:
        error, exit_code = "cancelled", None
    elif outcome.timed_out:
        exit_code = None
    elif confined and (
        not outcome.started_child or (exit_code == 1 and stderr.startswith("bwrap: "))
    ):
        # bwrap reports a failed setup (a missing bind source, a refused namespace) as exit 1
        # with its own prefix; the command never ran, which is not the command's failure.
        error = "bubblewrap could not set up the sandbox: " + (stderr.strip() or "no message")
        infra = True
    elif exit_code == 125 and SETUP_FAILED in stderr:
        error = next(line for line in stderr.splitlines() if SETUP_FAILED in line)
        infra = True
    return SandboxResult(
        exit_code=exit_code,
        stdout=stdout,
        stderr=stderr,
        timed_out=outcome.timed_out,
        output_truncated=outcome.truncated,
        confined=confined,
        error=error,
        infra=infra,
    )


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def run(
    command: str | Sequence[str],
    *,
    work_dir: Path,
    skill_dir: Path | None,
    policy: SandboxPolicy,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
) -> SandboxResult:
    """Run a command (a str runs as `bash -c`) with /workspace as cwd. Per-run failures are in
    the result; only a policy that cannot be honoured here raises (WorkFailed)."""
    return _run(
        command, work_dir=work_dir, skill_dir=skill_dir, policy=policy, env=env, stdin=stdin
    )


def _thread_pool() -> ThreadPoolExecutor:
    # A pool of its own: asyncio's default executor has a handful of threads, which would cap
    # how many agents run commands at once.
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=64, thread_name_prefix="sandbox")
        return _executor


async def run_async(
    command: str | Sequence[str],
    *,
    work_dir: Path,
    skill_dir: Path | None,
    policy: SandboxPolicy,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
) -> SandboxResult:
    """run() for asyncio; cancelling the awaiting task kills the command before re-raising."""
    canceller = _Canceller()
    loop = asyncio.get_running_loop()
    job = functools.partial(
        _run,
        command,
        work_dir=work_dir,
        skill_dir=skill_dir,
        policy=policy,
        env=env,
        stdin=stdin,
        canceller=canceller,
    )
    future = loop.run_in_executor(_thread_pool(), job)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        canceller.cancel()
        with contextlib.suppress(Exception):
            await future
        raise
    finally:
        if future.done():
            canceller.close()
        else:
            future.add_done_callback(lambda _: canceller.close())
