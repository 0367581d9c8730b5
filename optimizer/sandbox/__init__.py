"""The sandbox owns the confinement of model-written commands (the executor's bash tool, the
custom_script checks): the bubblewrap argv, the limits (rlimits, per-run cgroups), the supervisor
that feeds, watches, times out and kills a command, and the report of what confinement is in force
on this machine. It may import optimizer.errors and optimizer.config only, never another stage."""

from optimizer.sandbox.cgroups import memory_limit_mechanism, process_limit_mechanism
from optimizer.sandbox.confinement import bwrap_available, confinement_for, report
from optimizer.sandbox.paths import to_host_path, to_sandbox_path
from optimizer.sandbox.policy import (
    SKILL_MOUNT,
    WORK_MOUNT,
    Mode,
    SandboxPolicy,
    SandboxResult,
    is_secret_name,
    scrub_env,
)
from optimizer.sandbox.run import run, run_async

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
