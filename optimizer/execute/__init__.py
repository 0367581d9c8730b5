"""Executors: run one eval once, with or without the skill, into a complete run folder (the built-in
agent, Claude Code, a command), and never let a per-run failure stop the work (it is data), nor
swallow a systemic one. The stages it may import are MAY_IMPORT's (pyproject.toml's contracts
hold it to them); the shared modules are open to every stage."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import structlog

from optimizer import sandbox
from optimizer.config import Settings
from optimizer.errors import BadInput, InfraFailure, ResourceLimit, is_systemic
from optimizer.execute.limit import ProviderTooSlow, SkillTimeout, within_limits
from optimizer.execute.record import (
    TrialIdentity,
    TrialOutcome,
    TrialRecord,
    finish_run,
    is_complete,
)
from optimizer.execute.staging import OUTPUTS, prepare_work, resolve_inputs, stage_skill
from optimizer.execute.transcript import Tally, Transcript
from optimizer.inputs.evals import Eval
from optimizer.inputs.skillmd import SKILL_FILE, parse_skill_md
from optimizer.model.clock import RunClock, run_clock
from optimizer.model.port import Client
from optimizer.model.simulated import registered

__all__ = [
    "EXECUTORS",
    "Executor",
    "TrialContext",
    "TrialRecord",
    "SkillInfo",
    "executor_for",
    "get_executor",
    "next_run_number",
]

EXECUTORS = ("anthropic", "claude-code", "command")
# The start of the error of a run that an unexpected exception of ours ended (status counts them).
INTERNAL_ERROR = "internal error: "
# Waiting on the provider below this is noise of the clock, not a slow provider.
SLOW_S = 0.1
log = structlog.get_logger()


@dataclass(frozen=True)
class SkillInfo:
    dir: Path
    name: str
    description: str
    body: str


@dataclass
class TrialContext:
    """What an executor's `_run` needs; `work` is the fresh folder the agent sees as /workspace."""

    eval: Eval
    work: Path
    trial_dir: Path
    skill: SkillInfo | None
    inputs: list[str]  # names of the input files inside the work folder
    run_number: int
    sample: int

    def scrub(self, text: str) -> str:
        """Host paths out of text that may reach a model (a transcript is read by the grader)."""
        pairs = [(self.work, "/workspace"), (self.trial_dir, "<run>")]
        if self.skill is not None:
            pairs.append((self.skill.dir, "/skill"))
        variants = {(str(v), fixed) for host, fixed in pairs for v in (host, Path(host).resolve())}
        # The longest first: the skill copy and the work folder both lie inside trial_dir.
        for host, fixed in sorted(variants, key=lambda pair: len(pair[0]), reverse=True):
            text = text.replace(host, fixed)
        return text


def _model_failed(exc: BaseException) -> bool:
    from optimizer.model import ModelCallFailed

    return isinstance(exc, ModelCallFailed)


def _systemic(exc: BaseException) -> bool:
    # A model call that failed for good leaves this run unscored; credentials refused, a spend
    # limit, an outage, a budget, bad input or a full disk stop the whole run (docs/design.md §3).
    return is_systemic(exc) and not _model_failed(exc)


def _ours(exc: Exception, ctx: TrialContext) -> tuple[str, str]:
    """A failure of ours is not a score (docs/design.md §7): the run is left unscored. An exception we
    did not expect is a defect of ours: its type names it, its traceback goes to the log."""
    if isinstance(exc, InfraFailure) or _model_failed(exc):
        return "unscored", ctx.scrub(str(exc))
    log.error(
        "run.internal_error",
        eval_id=getattr(ctx.eval, "id", None),
        run=ctx.run_number,
        error_type=type(exc).__name__,
        exc_info=exc,
    )
    return "unscored", f"{INTERNAL_ERROR}{type(exc).__name__}: {ctx.scrub(str(exc))}"


def timed_out(
    exc: Exception, clock: RunClock, limit_s: float, max_wait_s: float
) -> tuple[str, str]:
    """The status and error of a run stopped by a limit. The skill's own time past its limit is
    the skill's timeout (scored 0), unless it passed only by the model's estimated generation time
    while the provider was slow: that estimate is unsure then, so the run is ours, unscored."""
    waited = clock.waiting_s()
    if isinstance(exc, ProviderTooSlow):
        return "unscored", (
            f"the run waited {waited:.1f} s on the model provider, past "
            f"execute.model_wait_max_s = {max_wait_s:g} s"
        )
    said = f"the run passed its time limit (execute.timeout_s = {limit_s:g} s)"
    if waited > SLOW_S and clock.skill_s() - clock.model_charged_s() < limit_s:
        return "unscored", (
            f"{said} only by the model's generation time while the provider was "
            f"slow ({waited:.1f} s of waiting left out)"
        )
    return "timeout", f"{said}: {clock.skill_s():.1f} s of the skill's time"


def clock_figures(clock: RunClock) -> dict[str, float | int]:
    """The split recorded in metrics.json: the skill's time and the time spent waiting."""
    return {
        "skill_seconds": round(clock.skill_s(), 3),
        "model_wait_seconds": round(clock.waiting_s(), 3),
        "model_generation_seconds": round(clock.model_charged_s(), 3),
        "model_calls": clock.calls,
    }


class Executor(ABC):
    """Runs one eval once into trial_dir; subclasses implement `_run` and fill the tally."""

    name = "executor"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def execute(
        self,
        *,
        skill_dir: Path | None,
        skill_name: str | None,
        eval: Eval,
        inputs_root: Path,
        trial_dir: Path,
        run_number: int,
        sample: int,
    ) -> TrialRecord:
        """One run; skill_dir=None is the without_skill baseline. A run folder that is already
        complete is read back, never rewritten."""
        trial_dir = Path(trial_dir)
        if is_complete(trial_dir):
            return TrialRecord.load(trial_dir)
        inputs = resolve_inputs(list(eval.files), inputs_root, eval_id=eval.id)
        skill = load_skill_info(skill_dir, skill_name) if skill_dir is not None else None
        self.check()
        confined, how = self.confinement()
        configuration = "with_skill" if skill is not None else "without_skill"
        ctx = _trial_context(trial_dir, inputs, skill, eval, run_number, sample)
        transcript = Transcript(eval.prompt, ctx.inputs)
        tally = Tally(skill_invoked=False if skill is not None else None)
        started = time.time()
        status, error, clock = await self._run_within_limits(ctx, transcript, tally)
        status, error = await asyncio.to_thread(
            self._workspace_limit, ctx, transcript, status, error
        )
        if skill is not None and not tally.skill_invoked:
            transcript.note(
                "Skill not invoked", f"The agent never called Skill for '{skill.name}'."
            )
        record = finish_run(
            TrialIdentity(trial_dir, eval, configuration, run_number, self.name),
            TrialOutcome(status, error, started, started + clock.wall_s(), confined, how),
            transcript,
            tally,
        )
        log.info(
            "run.executed",
            executor=self.name,
            eval_id=eval.id,
            configuration=configuration,
            run=run_number,
            status=status,
            tokens=record.tokens,
            skill_invoked=record.skill_invoked,
            seconds=round(record.duration_s, 2),
            error=error,
        )
        return record

    async def _run_within_limits(
        self, ctx: TrialContext, transcript: Transcript, tally: Tally
    ) -> tuple[str, str | None, RunClock]:
        """(status, error, the run's clock) of `_run` under the time limits: a failure of the run
        becomes its status and error, a systemic one is raised. The clock is returned running,
        since the run's wall time is read when the run folder is finished."""
        limits = self.settings.execute
        status: str = "ok"
        error: str | None = None
        with run_clock(limits.model_tokens_per_s) as clock:
            try:
                error = await within_limits(
                    self._run(ctx, transcript, tally),
                    clock,
                    limit_s=limits.timeout_s,
                    max_wait_s=limits.model_wait_max_s,
                )
                status = "error" if error else "ok"
            except ResourceLimit as exc:
                status, error = "resource_limit", ctx.scrub(str(exc))
            except (SkillTimeout, ProviderTooSlow) as exc:
                status, error = timed_out(exc, clock, limits.timeout_s, limits.model_wait_max_s)
            except Exception as exc:
                if _systemic(exc):
                    raise
                status, error = _ours(exc, ctx)
        tally.clock = clock_figures(clock)
        return status, error, clock

    def check(self) -> None:
        """Refuse early (BadInput) what cannot work at all, before a run folder is made."""
        return None

    def confinement(self) -> tuple[bool, str]:
        """(confined, mechanism) of this executor's model-written commands, recorded per run;
        raises BadInput when they would run unconfined without the user's consent."""
        confined = sandbox.confinement_for(
            sandbox.SandboxPolicy.from_settings(self.settings.sandbox)
        )
        return confined, sandbox.mechanism(confined)

    def _workspace_limit(
        self, ctx: TrialContext, transcript: Transcript, status: str, error: str | None
    ) -> tuple[str, str | None]:
        """The run's status after the last measure of its workspace: one over its limit, by a
        command or by a write on the host (an editor tool, the Claude Code CLI), fails with
        resource_limit, and its files go at once, so that the disk gets the space back."""
        if status != "unscored" and status != "resource_limit":
            found = sandbox.workspace_breach(ctx.work, self.settings.sandbox.max_workspace_mb)
            if found is not None:
                status, error = "resource_limit", found
        if status == "resource_limit":
            transcript.note("Workspace over its size limit", _empty_workspace(ctx.work))
            error = f"{error}; its files were removed"
        return status, error

    @abstractmethod
    async def _run(self, ctx: TrialContext, transcript: Transcript, tally: Tally) -> str | None:
        """Do the run; return None when it finished, or one sentence on why it failed."""


def _trial_context(
    trial_dir: Path,
    inputs: list[tuple[Path, str]],
    skill: SkillInfo | None,
    eval: Eval,
    run_number: int,
    sample: int,
) -> TrialContext:
    """A fresh run folder with the inputs (and the skill's copy) staged, and its TrialContext."""
    # Absolute once, here, for every executor: a relative path means something else to a
    # process started in the work folder (the Claude Code CLI) and to the sandbox's binds.
    where = trial_dir.absolute()
    work = prepare_work(where, inputs)
    if skill is not None:
        skill = replace(skill, dir=stage_skill(skill.dir, where))
    names = [name for _, name in inputs]
    return TrialContext(eval, work, where, skill, names, run_number, sample)


def _empty_workspace(work: Path, shown: int = 5) -> str:
    """Remove everything in a run's work folder but an empty outputs/; what was largest, said."""
    sizes: list[tuple[int, str]] = []
    for folder, _dirs, names in os.walk(work):
        for name in names:
            path = Path(folder) / name
            try:
                sizes.append((path.lstat().st_size, path.relative_to(work).as_posix()))
            except OSError:
                continue
    shutil.rmtree(work, ignore_errors=True)
    (work / OUTPUTS).mkdir(parents=True, exist_ok=True)
    largest = "".join(
        f"\n- {rel} ({size / 2**20:.1f} MB)" for size, rel in sorted(sizes, reverse=True)[:shown]
    )
    return (
        f"Everything in the workspace was removed ({len(sizes)} files), so that the disk gets "
        f"the space back. The largest:{largest or ' none'}"
    )


def load_skill_info(skill_dir: Path, skill_name: str | None) -> SkillInfo:
    path = Path(skill_dir) / SKILL_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(
            f"{path}: cannot be read ({exc}); give a skill folder with a SKILL.md."
        ) from None
    doc = parse_skill_md(text, path)
    # SKILL.md's own name is the one an agent lists and calls (Claude Code reads it too).
    name = doc.name or skill_name or Path(skill_dir).name
    return SkillInfo(Path(skill_dir).resolve(), name, doc.description.strip(), doc.body.strip())


def get_executor(
    name: str | None,
    settings: Settings,
    *,
    client: Client | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
) -> Executor:
    """The executor called `name` (default execute.executor). `client` is the ModelClient the
    anthropic executor calls through; base_url/api_key are where the Claude Code CLI is sent."""
    name = name or settings.execute.executor
    if settings.execute.backend == "ray":  # each run a Ray task; the worker builds the executor
        from optimizer.execute.ray_backend import RayExecutor

        return RayExecutor(settings, name, client=client, base_url=base_url)
    if name == "anthropic":
        from optimizer.execute.agent import AnthropicExecutor

        if client is None:
            raise ValueError("the anthropic executor needs the model client")
        return AnthropicExecutor(settings, client)
    if name == "claude-code":
        from optimizer.execute.claude_code import ClaudeCodeExecutor

        return ClaudeCodeExecutor(settings, base_url=base_url, api_key=api_key, client=client)
    if name == "command":
        from optimizer.execute.command import CommandExecutor

        return CommandExecutor(settings)
    raise BadInput(
        f"execute.executor '{name}' is not an executor; use one of {', '.join(EXECUTORS)}."
    )


def next_run_number(folder: Path) -> int:
    """The next free run-<n> of a folder: 1 + the highest complete run's n."""
    numbers = [
        int(m.group(1))
        for p in Path(folder).glob("run-*")
        if (m := re.fullmatch(r"run-(\d+)", p.name)) and (p / "timing.json").is_file()
    ]
    return max(numbers, default=0) + 1


@contextmanager
def executor_for(name: str | None, settings: Settings, client: Client | None) -> Iterator[Executor]:
    """The executor for `name`, with the loopback simulator the Claude Code CLI needs when the
    provider is the simulator (the CLI makes its own model calls), stopped afterwards."""
    name = name or settings.execute.executor
    if name == "claude-code" and settings.llm.provider == "sim" and not settings.llm.base_url:
        with registered().server(settings) as base_url:  # the composition root's simulator
            yield get_executor(name, settings, client=client, base_url=base_url)
        return
    yield get_executor(name, settings, client=client, base_url=None)


# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ("inputs", "store", "model", "sandbox")
