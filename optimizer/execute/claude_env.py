"""The Claude Code CLI's environment: where its binary is (the project-local install, PATH or
execute.claude_binary), the environment it runs with on the host or in bubblewrap, and its
command line (the tools it may use, its permission mode, the note on where files go). Nothing of
the user's own (skills, settings, keys) reaches it."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from optimizer.config import Settings
from optimizer.errors import BadInput
from optimizer.execute import TrialContext

REPO = Path(__file__).resolve().parents[2]
LOCAL_BINARY = REPO / ".tools" / "node_modules" / ".bin" / "claude"
NPM_PACKAGE = "@anthropic-ai/claude-code"
INSTALL_SCRIPT = "scripts/install-claude-code.sh"
# The file tools always; Bash only inside bubblewrap (SANDBOX_TOOLS): unconfined (the user's
# opt-in, sandbox.mode = "none") the CLI runs on the host, where Bash would run model-written
# commands as the user. There the file tools are held to the project folder by the permission
# mode only (see cli_args), checked in tests/execute/test_claude_code.py.
FILE_TOOLS = ("Read", "Write", "Edit", "Glob", "Grep")
SANDBOX_TOOLS = ("Bash",)
# The versions whose flags and stream-json the executor is built on (scripts/install-claude-code.sh
# pins one of them): --tools, --permission-prompts and the result line's api_error_status are not
# in older ones, and a new major version may change any of them.
SUPPORTED_FROM = (2, 1, 300)
SUPPORTED_BELOW = (3, 0, 0)
# Where the confined CLI sees its own binary (a read-only bind of the install).
BINARY_MOUNT = "/opt/claude-code/claude"


def find_claude(settings: Settings) -> Path:
    """execute.claude_binary when it is a path; else the project-local install; else PATH."""
    configured = settings.execute.claude_binary
    if os.sep in configured or configured.startswith("."):
        path = Path(configured).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return path.resolve()
        raise BadInput(
            f"execute.claude_binary '{configured}' is not an executable file; install "
            f"the npm package {NPM_PACKAGE} with {INSTALL_SCRIPT}, or fix the path."
        )
    if LOCAL_BINARY.exists() and os.access(LOCAL_BINARY, os.X_OK):
        return LOCAL_BINARY
    found = shutil.which(configured)
    if found:
        return Path(found)
    raise BadInput(
        f"The Claude Code CLI ('{configured}') was not found: run {INSTALL_SCRIPT} to "
        f"install the npm package {NPM_PACKAGE} into .tools/, or set "
        "execute.claude_binary to its path."
    )


def cli_env(
    *, home: Path, base_url: str | None, api_key: str, sample: int, max_tokens: int
) -> dict[str, str]:
    """The unconfined CLI's whole environment: nothing of ours leaks in but PATH."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(home / "tmp"),
        "ANTHROPIC_API_KEY": api_key,
        **COMMON_ENV,
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(max_tokens),
        "ANTHROPIC_CUSTOM_HEADERS": f"x-optimizer-sample: {sample}",
    }
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
    return env


COMMON_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    # Bundled skills would sit in the listing next to the one under test.
    "CLAUDE_CODE_DISABLE_BUNDLED_SKILLS": "1",
    "DISABLE_AUTOUPDATER": "1",
}


def boxed_env(settings: Settings) -> dict[str, str]:
    """What the confined CLI gets on top of the sandbox's own (HOME=/tmp, PATH, LANG); the
    relay's forwarder adds the ANTHROPIC_* variables, the key being only a placeholder."""
    per_command = str(int(settings.sandbox.timeout_s * 1000))
    # The Bash tool's commands get the sandbox's per-command limit, as the built-in agent's do.
    return {
        **COMMON_ENV,
        # The answer limit of the built-in agent's (execute.max_tokens), not the CLI's 32,000: the
        # relay admits each call at its worst case, which max_tokens bounds.
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(settings.execute.max_tokens),
        "BASH_DEFAULT_TIMEOUT_MS": per_command,
        "BASH_MAX_TIMEOUT_MS": per_command,
    }


@functools.lru_cache(maxsize=8)
def check_version(binary: Path) -> str:
    """The CLI's version; BadInput naming the found and the wanted versions when it is outside
    the supported range (asked once per binary and process)."""
    try:
        said = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BadInput(f"{binary} --version did not answer ({exc}); {_wanted()}") from None
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", said)
    version = tuple(int(part) for part in found.groups()) if found else None
    if version is None or not SUPPORTED_FROM <= version < SUPPORTED_BELOW:
        first_line = said.splitlines()[0] if said else "nothing"
        raise BadInput(f"{binary} is Claude Code {first_line!r}; {_wanted()}")
    return ".".join(str(part) for part in version)


def _wanted() -> str:
    low, high = (".".join(map(str, v)) for v in (SUPPORTED_FROM, SUPPORTED_BELOW))
    return (
        f"the executor needs a version from {low} and below {high}: run {INSTALL_SCRIPT} "
        "(it installs the pinned one into .tools/), or set execute.claude_binary to one."
    )


def cli_args(
    binary: Path | str, ctx: TrialContext, *, model: str, max_turns: int, shell: bool = False
) -> list[str]:
    tools = ",".join(
        (
            *FILE_TOOLS,
            *(SANDBOX_TOOLS if shell else ()),
            *(("Skill",) if ctx.skill is not None else ()),
        )
    )
    listed = ", ".join(ctx.inputs) or "none"
    # No host path here (docs/design.md §12): the CLI already tells the model its working directory,
    # and a path of ours would be one more that differs with where the run folder is.
    note = (
        "The task's input files are in your working directory, at these relative paths: "
        f"{listed}. Save every file you produce in the outputs/ folder of your working "
        "directory; only files there are kept and reviewed."
    )
    args = [
        # The prompt goes in on stdin, so a prompt that starts with "-" is never read as a flag.
        str(binary),
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        model,
        "--max-turns",
        str(max_turns),
        "--tools",
        tools,
        # acceptEdits lets the file tools work inside the project folder only; anything that
        # would ask (a read or write outside it) is denied, since nobody answers. A bare
        # `--allowedTools Read` would allow reads anywhere, and bypassPermissions is refused
        # under root anyway.
        "--permission-mode",
        "acceptEdits",
        "--permission-prompts",
        "none",
        "--no-session-persistence",
        "--append-system-prompt",
        note,
    ]
    allowed = ["Skill"] if ctx.skill is not None else []
    # Bash would ask for each command, and nobody answers: bubblewrap is what confines it.
    allowed += list(SANDBOX_TOOLS) if shell else []
    if ctx.skill is None:
        args.append("--disable-slash-commands")  # no skill at all in the baseline
    if allowed:
        args += ["--allowedTools", ",".join(allowed)]
    return args
