"""The command executor: the user's own command template (execute.command) run in the sandbox,
its stdout and stderr as the transcript. Never run it outside the sandbox policy of the config."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from typing import Any

from optimizer import sandbox
from optimizer.config import Settings
from optimizer.errors import BadInput, ResourceLimit
from optimizer.execute import Executor, TrialContext
from optimizer.execute.limit import SkillTimeout
from optimizer.execute.transcript import Tally, Transcript

PLACEHOLDER = re.compile(r"\{(prompt_file|work_dir|skill_dir)\}")
PROMPT_FILE = ".optimizer/prompt.md"  # inside the work folder, so the command can read it


class CommandExecutor(Executor):
    """`{prompt_file}`, `{work_dir}` and `{skill_dir}` become sandbox paths (/workspace/…, /skill);
    other braces are left alone, so `awk '{print $1}'` survives. The sandbox's network and
    environment rules apply as configured (sandbox.mode)."""

    name = "command"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        # The command is the whole agent, so its limit is the run's, not one tool call's.
        self.policy = replace(
            sandbox.SandboxPolicy.from_settings(settings.sandbox),
            timeout_s=settings.execute.timeout_s,
        )

    def check(self) -> None:
        if not self.settings.execute.command.strip():
            raise BadInput(
                "execute.command is empty; set it to a command template such as "
                "'my-agent --prompt {prompt_file} --cwd {work_dir} --skill {skill_dir}'."
            )

    def command_for(self, ctx: TrialContext) -> str:
        values = {
            "prompt_file": f"{sandbox.WORK_MOUNT}/{PROMPT_FILE}",
            "work_dir": sandbox.WORK_MOUNT,
            "skill_dir": sandbox.SKILL_MOUNT if ctx.skill is not None else "",
        }
        return PLACEHOLDER.sub(
            lambda m: shlex.quote(values[m.group(1)]), self.settings.execute.command
        )

    async def _run(self, ctx: TrialContext, transcript: Transcript, tally: Tally) -> str | None:
        prompt = ctx.work / PROMPT_FILE
        prompt.parent.mkdir(parents=True, exist_ok=True)
        prompt.write_text(ctx.eval.prompt, encoding="utf-8")
        command = self.command_for(ctx)
        use = {
            "type": "tool_use",
            "id": "command-1",
            "name": "command",
            "input": {"command": command},
        }
        transcript.assistant([use])
        tally.steps += 1
        env = {"PROMPT_FILE": f"{sandbox.WORK_MOUNT}/{PROMPT_FILE}", "WORK_DIR": sandbox.WORK_MOUNT}
        if ctx.skill is not None:
            env["SKILL_DIR"] = sandbox.SKILL_MOUNT
        result = await sandbox.run_async(
            command,
            work_dir=ctx.work,
            skill_dir=ctx.skill.dir if ctx.skill is not None else None,
            policy=self.policy,
            env=env,
        )
        output = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        if result.output_truncated:
            output += f"\n[output cut at {self.policy.max_output_bytes} bytes]"
        entry: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": "command-1",
            "content": ctx.scrub(output),
        }
        if not result.ok:
            entry["is_error"] = True
            tally.tool_errors += 1
        transcript.tool_results([entry], names={"command-1": "command"})
        if result.resource_limit:
            raise ResourceLimit(result.error or "a resource limit of the run was passed")
        if result.timed_out:
            raise SkillTimeout  # the command is the skill's work: its limit is the run's
        if result.error:
            return ctx.scrub(f"the command could not run: {result.error}")
        if result.exit_code:
            tail = ctx.scrub(result.stderr.strip()[-500:])
            return f"the command exited with code {result.exit_code}" + (
                f": {tail}" if tail else ""
            )
        return None
