"""The sandbox owns the confinement of model-written commands (the executor's bash tool, the
custom_script checks, the Claude Code CLI and its relay to the model): the bubblewrap argv, the
limits (rlimits, per-run cgroups), the supervisor that feeds, watches, times out and kills a
command, and the report of what confinement is in force on this machine. The stages it may import
are MAY_IMPORT's (pyproject.toml's contracts hold it to them); the shared modules are
open to every stage."""

from optimizer.sandbox.box import Box, confined_program, find_node
from optimizer.sandbox.cgroups import memory_limit_mechanism, process_limit_mechanism
from optimizer.sandbox.confinement import (
    UNCONFINED_LINE,
    bwrap_available,
    confinement_for,
    mechanism,
    report,
    startup_line,
)
from optimizer.sandbox.disk import breach as workspace_breach
from optimizer.sandbox.limits import SETUP_FAILED
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
from optimizer.sandbox.relay import Upstream
from optimizer.sandbox.run import run, run_async

__all__ = [
    "SETUP_FAILED",
    "Box",
    "SKILL_MOUNT",
    "UNCONFINED_LINE",
    "WORK_MOUNT",
    "Mode",
    "SandboxPolicy",
    "SandboxResult",
    "Upstream",
    "bwrap_available",
    "confined_program",
    "confinement_for",
    "find_node",
    "is_secret_name",
    "mechanism",
    "memory_limit_mechanism",
    "process_limit_mechanism",
    "report",
    "run",
    "run_async",
    "scrub_env",
    "startup_line",
    "to_host_path",
    "to_sandbox_path",
    "workspace_breach",
]

# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ("model",)
