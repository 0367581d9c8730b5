"""The shell prologue that puts a command under its limits (rlimits, run cgroups), then execs it.
It must never let the command start when a limit could not be set: that is a setup failure."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil

from optimizer.sandbox.cgroups import TrialCgroup
from optimizer.sandbox.policy import SandboxPolicy

# The prologue's marker for "the limits could not be set": exit 125 with it on stderr is the
# sandbox's failure, not the command's.
SETUP_FAILED = "sandbox-setup-failed:"


def limits_script(policy: SandboxPolicy, nproc: int, address_space: bool) -> str:
    """A bash prologue setting the rlimits (soft and hard, so the command cannot raise them)
    before exec-ing the command; bash instead of preexec_fn, which is unsafe with threads."""
    fsize_kb = max(1, policy.max_file_bytes // 1024)
    # RLIMIT_AS counts reserved address space, not memory: it stops the JVM (and, when small,
    # V8) from starting at all. It is the fallback for where no memory cgroup measures the
    # run's real use.
    as_limit = f"ulimit -v {policy.memory_mb * 1024} && " if address_space else ""
    return (
        f"ulimit -c 0 && {as_limit}ulimit -f {fsize_kb} && ulimit -u {nproc} || "
        f"{{ echo '{SETUP_FAILED} cannot set resource limits' >&2; exit 125; }}; "
        'exec "$@"'
    )


def cgroup_join_prefix(cgroup: TrialCgroup | None) -> str:
    """Shell that moves itself into the run's cgroups, so everything it execs is counted there."""
    if cgroup is None:
        return ""
    joins = " && ".join(f"echo $$ > {shlex.quote(str(p))}" for p in cgroup.procs_files)
    return (
        f"{{ {joins}; }} || {{ echo '{SETUP_FAILED} cannot join the run cgroup' >&2; exit 125; }}; "
    )


def system_bash() -> str:
    # The system's bash, not one a venv or the project may put first on PATH.
    for candidate in ("/usr/bin/bash", "/bin/bash"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("bash") or "bash"


def _own_process_count() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    count += 1
    return count


def unconfined_nproc(policy: SandboxPolicy) -> int:
    # Outside a user namespace RLIMIT_NPROC counts every process of the uid, so the budget is
    # added to what already runs; for root the limit is not enforced anyway.
    if os.geteuid() == 0:
        return policy.max_processes
    return _own_process_count() + policy.max_processes
