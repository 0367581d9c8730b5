"""The claude-code executor: the real Claude Code CLI (`claude -p`, stream-json) in a fresh project
folder per run, in bubblewrap with its Bash tool, reaching the model only through the sandbox's
relay. Never let it see the user's own skills, settings or keys, nor run unconfined unasked."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from optimizer import sandbox
from optimizer.config import Settings
from optimizer.errors import BadInput, InfraFailure, ResourceLimit
from optimizer.execute import Executor, TrialContext
from optimizer.execute.claude_env import (
    BINARY_MOUNT,
    boxed_env,
    check_version,
    cli_args,
    cli_env,
    find_claude,
)
from optimizer.execute.claude_stream import NO_RESULT, StreamState
from optimizer.execute.transcript import Tally, Transcript
from optimizer.model.port import Client
from optimizer.model.relayed import RelayMeter
from optimizer.sandbox.relay import PLACEHOLDER_KEY, Relay

ANTHROPIC_URL = "https://api.anthropic.com"
MAX_STDERR = 64_000
STREAM_LIMIT = 64 * 1024 * 1024  # one stream-json line carries a whole file the agent wrote
# The CLI's calls are the executor's: the ledger, its views and the estimate read them by role.
METER_ROLE = "executor"
WATCH_S = 0.1  # how often the workspace is measured while the CLI runs, at the least


class ClaudeCodeExecutor(Executor):
    """Runs the CLI. Its model calls pass our relay, which admits each against the run's budget
    and charges it to the ledger (model/relayed.py) when the executor has the run's `client`;
    the CLI's own reported cost is kept in the run's metrics beside it."""

    name = "claude-code"

    def __init__(
        self,
        settings: Settings,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> None:
        super().__init__(settings)
        self.base_url = base_url or settings.llm.base_url or None
        self.api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or ""
        self.binary: Path | None = None
        self.policy = sandbox.SandboxPolicy.from_settings(settings.sandbox)
        self.client = client
        self.run_costs = RunCosts()

    def check(self) -> None:
        self.binary = find_claude(self.settings)
        check_version(self.binary)
        if self.settings.llm.provider == "sim" and not self.base_url:
            raise BadInput(
                "The claude-code executor with the simulator needs a simulator on "
                "loopback: start `optimizer sim-server` and set llm.base_url to it."
            )
        if not self.api_key:
            if self.settings.llm.provider == "anthropic":
                raise BadInput(
                    "The claude-code executor needs ANTHROPIC_API_KEY in the environment."
                )
            self.api_key = "sim-key"
        if sandbox.confinement_for(self.policy):
            sandbox.find_node()

    def confinement(self) -> tuple[bool, str]:
        # In bubblewrap unless the user opted out; then on the host as before ("host"), without
        # Bash, its file tools held to the run's folder by the CLI's permission mode only.
        confined = sandbox.confinement_for(self.policy)
        return confined, sandbox.mechanism(confined) if confined else "host"

    def _upstream(self, ctx: TrialContext) -> sandbox.Upstream:
        """Where the relay forwards this trial's calls: the provider (or the simulator), with the
        real key and the trial's sample, boxed or on the host alike."""
        headers = {"x-optimizer-sample": str(ctx.sample)}
        return sandbox.Upstream(self.base_url or ANTHROPIC_URL, self.api_key, headers)

    async def _run(self, ctx: TrialContext, transcript: Transcript, tally: Tally) -> str | None:
        meter = self._meter(ctx)
        try:
            if sandbox.confinement_for(self.policy):
                return await self._run_boxed(ctx, transcript, tally, meter)
            return await self._run_host(ctx, transcript, tally, meter)
        except InfraFailure:
            if meter is not None:
                meter.check()  # the budget refused a request: that ended the run, not the endpoint
            raise
        finally:
            if meter is not None:
                self.run_costs.add(meter.spent_usd)

    def _meter(self, ctx: TrialContext) -> RelayMeter | None:
        """The run's meter, after checking that the budget left covers one run at the largest
        cost measured so far (BudgetExhausted, before the CLI starts, when it does not)."""
        if self.client is None:
            return None
        estimate = self.run_costs.estimate()
        self.client.hold(METER_ROLE, self.settings.models.executor, estimate)
        self.client.release(estimate)
        return RelayMeter(self.client, role=METER_ROLE, sample=ctx.sample)

    async def _run_host(
        self, ctx: TrialContext, transcript: Transcript, tally: Tally, meter: RelayMeter | None
    ) -> str | None:
        assert self.binary is not None
        if ctx.skill is not None:
            shutil.copytree(ctx.skill.dir, ctx.work / ".claude" / "skills" / ctx.skill.name)
        args = cli_args(
            self.binary,
            ctx,
            model=self.settings.models.executor,
            max_turns=self.settings.execute.max_turns,
        )
        # Its calls go through a relay on loopback, as in the sandbox: the run clock stops while
        # they wait on the provider, and the relay counts the endpoint's failures.
        relay = Relay(None, self._upstream(ctx), meter)
        with tempfile.TemporaryDirectory(prefix="claude-home-") as home_dir:
            home = Path(home_dir)
            (home / "tmp").mkdir()
            async with relay:
                env = cli_env(
                    home=home,
                    base_url=relay.url,
                    api_key=PLACEHOLDER_KEY,
                    sample=ctx.sample,
                    max_tokens=self.settings.execute.max_tokens,
                )
                failed = await _stream(
                    args,
                    str(ctx.work),
                    env,
                    ctx,
                    transcript,
                    tally,
                    str(home),
                    self.settings.sandbox.max_workspace_mb,
                )
        if meter is not None:
            meter.check()
        return _skills_failure(failed, relay)

    async def _run_boxed(
        self, ctx: TrialContext, transcript: Transcript, tally: Tally, meter: RelayMeter | None
    ) -> str | None:
        assert self.binary is not None
        binds = [("--ro-bind", str(self.binary.resolve()), BINARY_MOUNT)]
        if ctx.skill is not None:
            # Read-only where the CLI looks for project skills; the mount point is made here,
            # not by bwrap, so that it belongs to the run like every other file.
            mount = ctx.work / ".claude" / "skills" / ctx.skill.name
            mount.mkdir(parents=True)
            binds.append(
                (
                    "--ro-bind",
                    str(ctx.skill.dir),
                    f"{sandbox.WORK_MOUNT}/.claude/skills/{ctx.skill.name}",
                )
            )
        args = cli_args(
            BINARY_MOUNT,
            ctx,
            model=self.settings.models.executor,
            max_turns=self.settings.execute.max_turns,
            shell=True,
        )
        async with sandbox.confined_program(
            args,
            work_dir=ctx.work,
            policy=self.policy,
            upstream=self._upstream(ctx),
            env=boxed_env(self.settings),
            binds=binds,
            meter=meter,
        ) as box:
            failed = await _stream(
                box.argv,
                "/",
                box.env,
                ctx,
                transcript,
                tally,
                None,
                self.settings.sandbox.max_workspace_mb,
            )
        if (
            failed
            and failed.startswith(NO_RESULT)
            and (_box_failed(failed) or box.relay.requests == 0)
        ):
            # The sandbox or its relay never started the CLI: ours to retry, not the skill's 0.
            raise InfraFailure(f"the sandbox could not start the Claude Code CLI: {failed}")
        if meter is not None:
            meter.check()
        return _skills_failure(failed, box.relay)


def _skills_failure(failed: str | None, relay: Relay) -> str | None:
    """`failed` when it is the skill's (the CLI's result line says the agent failed), else
    raised as a failure of ours, left unscored and retried, never the skill's 0: the endpoint
    failed the CLI (unreachable, 429, 5xx past the CLI's own retries; one it retried past and
    then got its answer was not), or the CLI ended without a result line at all (a flag it does
    not know, a crash)."""
    if failed and relay.unrecovered:
        raise InfraFailure(
            f"the model endpoint failed {relay.unrecovered} request(s) of this run in a row, "
            f"the CLI's last: {failed}"
        )
    if failed and failed.startswith(NO_RESULT):
        raise InfraFailure(f"the Claude Code CLI failed, not the skill: {failed}")
    return failed


class RunCosts:
    """What the CLI's runs cost, as the ledger charged them: one run's estimate before it starts
    is the largest measured (runs differ by eval), 0 until MEASURED runs have ended (each call
    is still admitted against the budget by the relay's meter)."""

    MEASURED = 3

    def __init__(self) -> None:
        self.costs: list[float] = []

    def add(self, cost: float) -> None:
        if cost > 0:
            self.costs.append(cost)

    def estimate(self) -> float:
        return max(self.costs) if len(self.costs) >= self.MEASURED else 0.0


async def _stream(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    ctx: TrialContext,
    transcript: Transcript,
    tally: Tally,
    home: str | None,
    max_workspace_mb: int,
) -> str | None:
    """Start the CLI, feed it the prompt, read its stream-json to the end; why it failed, or
    None. Cancelled (the run's timeout), it kills the whole process group first; a workspace
    over its limit kills it too, and raises ResourceLimit."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        limit=STREAM_LIMIT,
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
    return any(
        mark in failed for mark in ("bwrap: ", "sandbox relay: ", sandbox.SETUP_FAILED)
    ) or any(f"exited with code {code} " in failed for code in (125, 126, 127))


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
