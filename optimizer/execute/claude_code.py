"""The claude-code executor: the real Claude Code CLI (`claude -p`, stream-json) in a fresh project
folder per run, in bubblewrap with its Bash tool, reaching the model only through the sandbox's
relay. Never let it see the user's own skills, settings or keys, nor run unconfined unasked."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from optimizer import sandbox
from optimizer.config import Settings
from optimizer.errors import BadInput, InfraFailure, ResourceLimit
from optimizer.execute import Executor, RunContext
from optimizer.execute.record import Tally, Transcript
from optimizer.sandbox.relay import PLACEHOLDER_KEY, Relay

REPO = Path(__file__).resolve().parents[2]
LOCAL_BINARY = REPO / ".tools" / "node_modules" / ".bin" / "claude"
NPM_PACKAGE = "@anthropic-ai/claude-code"
INSTALL_SCRIPT = "scripts/install-claude-code.sh"
ANTHROPIC_URL = "https://api.anthropic.com"
# The file tools always; Bash only inside bubblewrap (SANDBOX_TOOLS): unconfined (the user's
# opt-in, sandbox.mode = "none") the CLI runs on the host, where Bash would run model-written
# commands as the user. There the file tools are held to the project folder by the permission
# mode only (see cli_args), checked in tests/test_claude_code.py.
FILE_TOOLS = ("Read", "Write", "Edit", "Glob", "Grep")
SANDBOX_TOOLS = ("Bash",)
# Where the confined CLI sees its own binary (a read-only bind of the install).
BINARY_MOUNT = "/opt/claude-code/claude"
MAX_STDERR = 64_000
VOLATILE_KEYS = ("uuid", "session_id", "timestamp")
STREAM_LIMIT = 64 * 1024 * 1024  # one stream-json line carries a whole file the agent wrote
NO_RESULT = "the Claude Code CLI exited with code"
WATCH_S = 0.1  # how often the workspace is measured while the CLI runs, at the least


def find_claude(settings: Settings) -> Path:
    """execute.claude_binary when it is a path; else the project-local install; else PATH."""
    configured = settings.execute.claude_binary
    if os.sep in configured or configured.startswith("."):
        path = Path(configured).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return path.resolve()
        raise BadInput(f"execute.claude_binary '{configured}' is not an executable file; install "
                       f"the npm package {NPM_PACKAGE} with {INSTALL_SCRIPT}, or fix the path.")
    if LOCAL_BINARY.exists() and os.access(LOCAL_BINARY, os.X_OK):
        return LOCAL_BINARY
    found = shutil.which(configured)
    if found:
        return Path(found)
    raise BadInput(f"The Claude Code CLI ('{configured}') was not found: run {INSTALL_SCRIPT} to "
                   f"install the npm package {NPM_PACKAGE} into .tools/, or set "
                   "execute.claude_binary to its path.")


def cli_env(*, home: Path, base_url: str | None, api_key: str, sample: int) -> dict[str, str]:
    """The unconfined CLI's whole environment: nothing of ours leaks in but PATH."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(home / "tmp"),
        "ANTHROPIC_API_KEY": api_key,
        **COMMON_ENV,
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
    return {**COMMON_ENV, "BASH_DEFAULT_TIMEOUT_MS": per_command,
            "BASH_MAX_TIMEOUT_MS": per_command}


def cli_args(binary: Path | str, ctx: RunContext, *, model: str, max_turns: int,
             shell: bool = False) -> list[str]:
    tools = ",".join((*FILE_TOOLS, *(SANDBOX_TOOLS if shell else ()),
                      *(("Skill",) if ctx.skill is not None else ())))
    listed = ", ".join(ctx.inputs) or "none"
    # No host path here (docs/design.md §12): the CLI already tells the model its working directory,
    # and a path of ours would be one more that differs with where the run folder is.
    note = ("The task's input files are in your working directory, at these relative paths: "
            f"{listed}. Save every file you produce in the outputs/ folder of your working "
            "directory; only files there are kept and reviewed.")
    args = [
        # The prompt goes in on stdin, so a prompt that starts with "-" is never read as a flag.
        str(binary), "-p", "--output-format", "stream-json", "--verbose",
        "--model", model, "--max-turns", str(max_turns), "--tools", tools,
        # acceptEdits lets the file tools work inside the project folder only; anything that
        # would ask (a read or write outside it) is denied, since nobody answers. A bare
        # `--allowedTools Read` would allow reads anywhere, and bypassPermissions is refused
        # under root anyway.
        "--permission-mode", "acceptEdits", "--permission-prompts", "none",
        "--no-session-persistence", "--append-system-prompt", note,
    ]
    allowed = ["Skill"] if ctx.skill is not None else []
    # Bash would ask for each command, and nobody answers: bubblewrap is what confines it.
    allowed += list(SANDBOX_TOOLS) if shell else []
    if ctx.skill is None:
        args.append("--disable-slash-commands")  # no skill at all in the baseline
    if allowed:
        args += ["--allowedTools", ",".join(allowed)]
    return args


class ClaudeCodeExecutor(Executor):
    """Runs the CLI; its model calls bypass our ledger, so its own reported cost is recorded."""

    name = "claude-code"

    def __init__(self, settings: Settings, *, base_url: str | None = None,
                 api_key: str | None = None) -> None:
        super().__init__(settings)
        self.base_url = base_url or settings.llm.base_url or None
        self.api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or ""
        self.binary: Path | None = None
        self.policy = sandbox.SandboxPolicy.from_settings(settings.sandbox)

    def check(self) -> None:
        self.binary = find_claude(self.settings)
        if self.settings.llm.provider == "sim" and not self.base_url:
            raise BadInput("The claude-code executor with the simulator needs a simulator on "
                           "loopback: start `optimizer sim-server` and set llm.base_url to it.")
        if not self.api_key:
            if self.settings.llm.provider == "anthropic":
                raise BadInput("The claude-code executor needs ANTHROPIC_API_KEY in the environment.")
            self.api_key = "sim-key"
        if sandbox.confinement_for(self.policy):
            sandbox.find_node()

    def confinement(self) -> tuple[bool, str]:
        # In bubblewrap unless the user opted out; then on the host as before ("host"), without
        # Bash, its file tools held to the run's folder by the CLI's permission mode only.
        confined = sandbox.confinement_for(self.policy)
        return confined, sandbox.mechanism(confined) if confined else "host"

    async def _run(self, ctx: RunContext, transcript: Transcript, tally: Tally) -> str | None:
        assert self.binary is not None
        if sandbox.confinement_for(self.policy):
            return await self._run_boxed(ctx, transcript, tally)
        if ctx.skill is not None:
            shutil.copytree(ctx.skill.dir, ctx.work / ".claude" / "skills" / ctx.skill.name)
        args = cli_args(self.binary, ctx, model=self.settings.models.executor,
                        max_turns=self.settings.execute.max_turns)
        # Its calls go through a relay on loopback, as in the sandbox: the run clock stops while
        # they wait on the provider, and the relay counts the endpoint's failures.
        relay = Relay(None, self.base_url or ANTHROPIC_URL, self.api_key,
                      {"x-optimizer-sample": str(ctx.sample)})
        with tempfile.TemporaryDirectory(prefix="claude-home-") as home_dir:
            home = Path(home_dir)
            (home / "tmp").mkdir()
            async with relay:
                env = cli_env(home=home, base_url=relay.url, api_key=PLACEHOLDER_KEY,
                              sample=ctx.sample)
                failed = await _stream(args, str(ctx.work), env, ctx, transcript, tally, str(home),
                                       self.settings.sandbox.max_workspace_mb)
        return _endpoint_failed(failed, relay)

    async def _run_boxed(self, ctx: RunContext, transcript: Transcript, tally: Tally) -> str | None:
        assert self.binary is not None
        binds = [("--ro-bind", str(self.binary.resolve()), BINARY_MOUNT)]
        if ctx.skill is not None:
            # Read-only where the CLI looks for project skills; the mount point is made here,
            # not by bwrap, so that it belongs to the run like every other file.
            mount = ctx.work / ".claude" / "skills" / ctx.skill.name
            mount.mkdir(parents=True)
            binds.append(("--ro-bind", str(ctx.skill.dir), f"{sandbox.WORK_MOUNT}/.claude/skills/"
                          f"{ctx.skill.name}"))
        args = cli_args(BINARY_MOUNT, ctx, model=self.settings.models.executor,
                        max_turns=self.settings.execute.max_turns, shell=True)
        async with sandbox.confined_program(
            args, work_dir=ctx.work, policy=self.policy,
            target=self.base_url or ANTHROPIC_URL, api_key=self.api_key,
            headers={"x-optimizer-sample": str(ctx.sample)}, env=boxed_env(self.settings),
            binds=binds,
        ) as box:
            failed = await _stream(box.argv, "/", box.env, ctx, transcript, tally, None,
                                   self.settings.sandbox.max_workspace_mb)
        if failed and failed.startswith(NO_RESULT) and (_box_failed(failed) or box.relay.requests == 0):
            # The sandbox or its relay never started the CLI: ours to retry, not the skill's 0.
            raise InfraFailure(f"the sandbox could not start the Claude Code CLI: {failed}")
        return _endpoint_failed(failed, box.relay)


def _endpoint_failed(failed: str | None, relay: Relay) -> str | None:
    """`failed`, unless the endpoint failed the CLI (unreachable, 429, 5xx past the CLI's own
    retries): a failure of ours, raised as such, left unscored and retried, never the skill's 0."""
    if failed and relay.failures:
        raise InfraFailure(f"the model endpoint failed {relay.failures} request(s) of "
                           f"this run: {failed}")
    return failed


async def _stream(argv: list[str], cwd: str, env: dict[str, str], ctx: RunContext,
                  transcript: Transcript, tally: Tally, home: str | None,
                  max_workspace_mb: int) -> str | None:
    """Start the CLI, feed it the prompt, read its stream-json to the end; why it failed, or
    None. Cancelled (the run's timeout), it kills the whole process group first; a workspace
    over its limit kills it too, and raises ResourceLimit."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True, limit=STREAM_LIMIT,
    )
    stream = StreamState(ctx.skill.name if ctx.skill is not None else None, home)
    watch = asyncio.create_task(_watch(ctx.work, max_workspace_mb, proc.pid))
    try:
        stderr = asyncio.create_task(_drain(proc.stderr))
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(ctx.eval.prompt.encode("utf-8"))
        with contextlib.suppress(ConnectionError):
            await proc.stdin.drain()
        proc.stdin.close()
        async for raw in proc.stdout:
            stream.feed(raw.decode("utf-8", errors="replace"), transcript, tally, ctx)
        code = await proc.wait()
        err_text = await stderr
    finally:
        watch.cancel()
        # A timeout cancels us here: the whole process group goes, children included.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.returncode is None:
            with contextlib.suppress(Exception):
                await asyncio.shield(proc.wait())
    if watch.done() and not watch.cancelled() and (over := watch.result()):
        raise ResourceLimit(over)
    return stream.outcome(code, ctx.scrub(err_text))


def _box_failed(failed: str) -> bool:
    # bwrap's own setup errors start with "bwrap:"; the forwarder's and the limits' exit 125-127.
    return any(mark in failed for mark in ("bwrap: ", "sandbox relay: ", sandbox.SETUP_FAILED)) or \
        any(f"exited with code {code} " in failed for code in (125, 126, 127))


async def _watch(work: Path, max_mb: int, pid: int) -> str | None:
    """Measure the workspace while the CLI runs, as the sandbox's supervisor does for a command
    (its Bash commands are the CLI's children, not ours); past the limit, kill the CLI."""
    while True:
        started = time.monotonic()
        over = await asyncio.to_thread(sandbox.workspace_breach, work, max_mb)
        if over is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            return over
        # A folder of many entries is slow to walk: then the polls space out (a tenth of a core).
        await asyncio.sleep(max(WATCH_S, 10 * (time.monotonic() - started)))


async def _drain(reader: asyncio.StreamReader | None) -> str:
    if reader is None:
        return ""
    kept = bytearray()
    while chunk := await reader.read(65536):
        kept += chunk[: max(0, MAX_STDERR - len(kept))]
    return kept.decode("utf-8", errors="replace")


class StreamState:
    """Reads the CLI's stream-json lines into the transcript and the tally."""

    def __init__(self, skill_name: str | None, home: str | None) -> None:
        self.skill_name = skill_name
        self.home = home
        self.result: dict[str, Any] | None = None
        self.names: dict[str, str] = {}
        self.messages: set[str] = set()

    def feed(self, line: str, transcript: Transcript, tally: Tally, ctx: RunContext) -> None:
        # The CLI works in the real folder; the transcript shows it as /workspace, as elsewhere.
        line = ctx.scrub(line.strip())
        if self.home:
            line = line.replace(self.home, "~")
        if not line:
            return
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            transcript.log({"type": "unparsed", "text": line})
            return
        if not isinstance(event, dict):
            return
        for key in VOLATILE_KEYS:  # random per run: they would make two equal runs differ
            event.pop(key, None)
        kind = event.get("type")
        message = event.get("message")
        if not isinstance(message, dict):
            message = {}
        content = message.get("content")
        if not isinstance(content, list):
            content = []
        if kind == "assistant":
            # One API answer can arrive as several lines (one per block) with the same id.
            msg_id = str(message.get("id") or len(self.messages))
            new_step = msg_id not in self.messages
            if new_step:
                self.messages.add(msg_id)
                tally.steps += 1
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    name = str(block.get("name"))
                    self.names[str(block.get("id"))] = name
                    tally.tool_calls[name] += 1
                    if name == "Skill" and self._is_ours(block.get("input")):
                        tally.skill_invoked = True
            transcript.assistant(content, raw=event, new_step=new_step)
        elif kind == "user":
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            tally.tool_errors += sum(1 for b in results if b.get("is_error"))
            if results:
                transcript.tool_results(results, raw=event, names=self.names)
            else:  # e.g. the skill's body, which the CLI adds as a text block after Skill
                texts = [str(b.get("text", "")) for b in content
                         if isinstance(b, dict) and b.get("type") == "text"]
                transcript.context("\n".join(texts), raw=event)
        elif kind == "result":
            self.result = event
            transcript.log(event)
            tally.add_usage(event.get("usage") or {})
            tally.cost_usd += float(event.get("total_cost_usd") or 0.0)
        else:
            transcript.log(event)

    def _is_ours(self, tool_input: Any) -> bool:
        wanted = tool_input.get("skill") if isinstance(tool_input, dict) else None
        return isinstance(wanted, str) and wanted.strip().lstrip("/") == self.skill_name

    def outcome(self, exit_code: int, stderr: str) -> str | None:
        """None for a finished run, else why it failed (the result line says, else stderr)."""
        result = self.result
        if result is None:
            tail = stderr.strip()[-1500:] or "no output"
            return f"{NO_RESULT} {exit_code} without a result: {tail}"
        if result.get("is_error") and (api := api_failure(result)):
            # The CLI gave up on the model endpoint after its own retries: ours, never a 0.
            raise InfraFailure(f"the model endpoint failed the Claude Code CLI: {api}")
        if result.get("is_error") or result.get("subtype") != "success":
            detail = result.get("result") or result.get("errors") or ""
            return (f"the Claude Code CLI ended with {result.get('subtype')!r} after "
                    f"{result.get('num_turns')} turns{': ' + str(detail) if detail else ''}")
        return None


def api_failure(result: dict[str, Any]) -> str | None:
    """What the CLI's result line says of a failed API call (its api_error_status, or the
    terminal_reason "api_error" of a connection that failed), or None when the run ended
    otherwise. An answer cut at the output limit is the agent's, not the endpoint's failure."""
    status = result.get("api_error_status")
    if result.get("api_error") == "max_output_tokens":
        return None
    if not isinstance(status, int) and result.get("terminal_reason") != "api_error":
        return None
    kind = result.get("api_error_type") or "no answer"
    said = str(result.get("result") or "").strip()[:300]
    return f"HTTP {status if isinstance(status, int) else '-'} {kind}" + (f": {said}" if said else "")
