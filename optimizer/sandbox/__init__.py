"""Run one command confined (bubblewrap) with wall-clock, memory, process and output limits.
It must never let a model-written command see API keys, the network, the home or the project."""

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
from pathlib import Path

from optimizer.sandbox.argv import bwrap_argv, bwrap_options
from optimizer.sandbox.cgroups import (
    RunCgroup,
    memory_limit_mechanism,
    process_limit_mechanism,
)
from optimizer.sandbox.confinement import bwrap_available, confinement_for, report, warn_once
from optimizer.sandbox.limits import (
    SETUP_FAILED,
    cgroup_join_prefix,
    limits_script,
    system_bash,
    unconfined_nproc,
)
from optimizer.sandbox.paths import (
    rewrite_fixed_paths,
    to_host_path,
    to_sandbox_path,
    unrewrite_host_paths,
)
from optimizer.sandbox.policy import (
    SANDBOX_PATH,
    SKILL_MOUNT,
    WORK_MOUNT,
    Mode,
    SandboxPolicy,
    SandboxResult,
    is_secret_name,
    scrub_env,
)
from optimizer.sandbox.supervise import SpawnFailed, supervise

__all__ = [
    "SKILL_MOUNT",
    "WORK_MOUNT",
    "Mode",
    "SandboxPolicy",
    "SandboxResult",
    "bwrap_available",
    "confinement_for",
    "is_secret_name",
    "memory_limit_mechanism",
    "process_limit_mechanism",
    "report",
    "run",
    "run_async",
    "scrub_env",
    "to_host_path",
    "to_sandbox_path",
]


_executor_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


# ---------------------------------------------------------------- running


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


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _as_argv(command: str | Sequence[str]) -> list[str]:
    return ["bash", "-c", command] if isinstance(command, str) else [str(c) for c in command]


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
    started = time.monotonic()
    confined = confinement_for(policy)

    def failed(error: str, infra: bool = True) -> SandboxResult:
        return SandboxResult(exit_code=None, stdout="", stderr="", confined=confined,
                             duration_s=time.monotonic() - started, error=error, infra=infra)

    work_dir = Path(work_dir)
    if not work_dir.is_dir():
        return failed(f"the work folder {work_dir} does not exist")
    if skill_dir is not None and not Path(skill_dir).is_dir():
        return failed(f"the skill folder {skill_dir} does not exist")
    cmd = _as_argv(command)
    if not cmd or (isinstance(command, str) and not command.strip()):
        return failed("the command is empty", infra=False)

    if policy.mode != "none" and process_limit_mechanism() == "none":
        warn_once("sandbox.no_process_limit",
                   reason="running as root without a usable pids cgroup: max_processes is not "
                   "enforced, only the wall clock and the pid namespace bound a fork bomb")

    host_to_fixed: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        cgroup = RunCgroup.create(policy)
        if cgroup is not None:
            stack.callback(cgroup.close)
        address_space = cgroup is None or "memory" not in cgroup.controllers
        status_pipe: tuple[int, int] | None = None
        if confined:
            if "--json-status-fd" in bwrap_options():
                status_pipe = os.pipe()
            argv = bwrap_argv(cmd, work_dir.resolve(),
                               Path(skill_dir).resolve() if skill_dir is not None else None,
                               policy, env, status_pipe[1] if status_pipe else None,
                               address_space)
            if cgroup is not None:
                argv = ["/bin/sh", "-c", cgroup_join_prefix(cgroup) + 'exec "$@"',
                        "sandbox-cgroup", *argv]
            proc_env = {"PATH": SANDBOX_PATH, "LANG": "C.UTF-8"}
            cwd = "/"
        else:
            # Unconfined ("none", or "auto" without bwrap): the whole host is visible and
            # /workspace, /skill exist only as rewritten text pointing at per-run symlinks. Best
            # effort: a path the command assembles at run time ("/work""space") is not found.
            scratch = Path(tempfile.mkdtemp(prefix="sandbox-"))
            stack.callback(shutil.rmtree, scratch, True)
            links = {WORK_MOUNT: scratch / "workspace"}
            (scratch / "workspace").symlink_to(work_dir.resolve(), target_is_directory=True)
            if skill_dir is not None:
                links[SKILL_MOUNT] = scratch / "skill"
                (scratch / "skill").symlink_to(Path(skill_dir).resolve(),
                                               target_is_directory=True)
            (scratch / "tmp").mkdir()
            to_links = {mount: str(link) for mount, link in links.items()}
            cmd = [rewrite_fixed_paths(arg, to_links) for arg in cmd]
            host_to_fixed = {str(scratch / "tmp"): "/tmp", str(work_dir.absolute()): WORK_MOUNT,
                             str(work_dir.resolve()): WORK_MOUNT, to_links[WORK_MOUNT]: WORK_MOUNT}
            if skill_dir is not None:
                host_to_fixed.update({str(Path(skill_dir).absolute()): SKILL_MOUNT,
                                      str(Path(skill_dir).resolve()): SKILL_MOUNT,
                                      to_links[SKILL_MOUNT]: SKILL_MOUNT})
            if policy.mode == "none":
                proc_env = scrub_env(os.environ)
            else:
                proc_env = {"PATH": os.environ.get("PATH", SANDBOX_PATH),
                            "HOME": str(scratch / "tmp"), "TMPDIR": str(scratch / "tmp"),
                            "LANG": "C.UTF-8"}
            proc_env.update({"WORKSPACE": to_links[WORK_MOUNT], "PWD": to_links[WORK_MOUNT]})
            if skill_dir is not None:
                proc_env["SKILL_DIR"] = to_links[SKILL_MOUNT]
            proc_env.update(scrub_env(env))
            script = cgroup_join_prefix(cgroup) + limits_script(
                policy, unconfined_nproc(policy), address_space)
            argv = [system_bash(), "-c", script, "sandbox-limits", *cmd]
            cwd = to_links[WORK_MOUNT]
        try:
            outcome = supervise(argv, cwd=cwd, env=proc_env, stdin=stdin, policy=policy,
                                status_pipe=status_pipe, cgroup=cgroup,
                                cancel_fd=canceller.read_fd if canceller else None)
        except SpawnFailed as exc:
            return failed(f"could not start the command: {exc}")

    stdout, stderr = _decode(outcome.stdout), _decode(outcome.stderr)
    if host_to_fixed:
        stdout = unrewrite_host_paths(stdout, host_to_fixed)
        stderr = unrewrite_host_paths(stderr, host_to_fixed)
    error: str | None = None
    infra = False
    exit_code = outcome.returncode
    if exit_code is not None and exit_code < 0:
        exit_code = 128 - exit_code  # the shell's convention for "killed by signal N"
    if outcome.cancelled:
        error, exit_code = "cancelled", None
    elif outcome.timed_out:
        exit_code = None
    elif confined and (not outcome.started_child
                       or (exit_code == 1 and stderr.startswith("bwrap: "))):
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
        duration_s=time.monotonic() - started,
        confined=confined,
        error=error,
        infra=infra,
    )


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
    return _run(command, work_dir=work_dir, skill_dir=skill_dir, policy=policy, env=env,
                stdin=stdin)


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
    job = functools.partial(_run, command, work_dir=work_dir, skill_dir=skill_dir,
                            policy=policy, env=env, stdin=stdin, canceller=canceller)
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
