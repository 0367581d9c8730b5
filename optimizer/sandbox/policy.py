"""What one sandboxed command may do (the policy), what it did (the result), and its environment.
It must never start a process, read the machine or let a credential-looking variable through."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

# The fixed paths a command sees whatever the host folders behind them.
WORK_MOUNT = "/workspace"
SKILL_MOUNT = "/skill"
# The PATH of a confined command, and of the bubblewrap probe: system folders only.
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

Mode = Literal["auto", "bwrap", "none", "strict"]
MODES = ("auto", "bwrap", "none", "strict")


class SandboxSettings(Protocol):
    """What a policy is made of: the `[sandbox]` section of optimizer.config's Settings, read
    through this shape so that the sandbox needs nothing else of the config."""

    @property
    def mode(self) -> Mode: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def memory_mb(self) -> int: ...
    @property
    def max_output_bytes(self) -> int: ...
    @property
    def max_processes(self) -> int: ...
    @property
    def max_file_bytes(self) -> int: ...
    @property
    def max_workspace_mb(self) -> int: ...


@dataclass(frozen=True)
class SandboxPolicy:
    """How one command may run; built from the `[sandbox]` settings with from_settings."""

    mode: Mode = "auto"
    timeout_s: float = 60.0
    memory_mb: int = 1024
    max_output_bytes: int = 1_000_000
    max_processes: int = 256
    max_file_bytes: int = 50_000_000
    max_workspace_mb: int = 512

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        for name in (
            "timeout_s",
            "memory_mb",
            "max_output_bytes",
            "max_processes",
            "max_file_bytes",
            "max_workspace_mb",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"sandbox {name} must be positive")

    @classmethod
    def from_settings(cls, box: SandboxSettings) -> SandboxPolicy:
        """The policy of the `[sandbox]` settings; every stage builds it here, so they agree."""
        return cls(
            mode=box.mode,
            timeout_s=box.timeout_s,
            memory_mb=box.memory_mb,
            max_output_bytes=box.max_output_bytes,
            max_processes=box.max_processes,
            max_file_bytes=box.max_file_bytes,
            max_workspace_mb=box.max_workspace_mb,
        )


@dataclass
class SandboxResult:
    """What one command did; every per-run failure is described here, never raised."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    output_truncated: bool = False
    duration_s: float = 0.0
    confined: bool = False
    error: str | None = None
    infra: bool = False  # the sandbox itself failed (could not start): not the command's doing
    # A limit of the whole run the command passed ("workspace"): the run fails, and it scores.
    resource_limit: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None


_SECRET_PREFIXES = ("ANTHROPIC_", "OPENAI_", "AWS_")
_SECRET_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
# Names that match a part above but hold a count, set by us: the Claude Code CLI's answer limit.
_COUNTS = frozenset({"CLAUDE_CODE_MAX_OUTPUT_TOKENS"})


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    if upper in _COUNTS:
        return False
    return upper.startswith(_SECRET_PREFIXES) or any(part in upper for part in _SECRET_PARTS)


def scrub_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """A copy without anything that looks like a credential; names are matched, never values."""
    return {k: v for k, v in (env or {}).items() if not is_secret_name(k)}
