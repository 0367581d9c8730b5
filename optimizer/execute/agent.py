"""The anthropic executor: an agent loop over the model client with bash, a text editor and Skill,
every command confined by the sandbox. Never put a host path, a time or a random name in a request."""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

from optimizer import sandbox
from optimizer.config import Settings
from optimizer.errors import InfraFailure, ResourceLimit
from optimizer.execute import Executor, SkillInfo, TrialContext
from optimizer.execute.tools import EDITOR_TOOL, agent_tools
from optimizer.execute.transcript import Tally, Transcript
from optimizer.model.port import Client
from optimizer.model.prompts import load_prompt
from optimizer.tags import tag

if TYPE_CHECKING:  # the SDK's types only: importing it costs 2 s (model/port.py)
    from anthropic.types import MessageParam, ToolResultBlockParam, ToolUseBlockParam

    from optimizer.schemas import Json, JsonObject

SKILLS_INTRO = (
    "- `Skill` loads a skill's instructions by name.\n\n"
    "Skills are packaged instructions (with scripts and reference files) for particular kinds "
    "of tasks. When the task is one that a listed skill covers, call `Skill` with its name "
    "before you start, then follow the instructions it returns. A skill's files are at /skill "
    "(read-only); run its scripts from there.\n\n"
)
# What the model sees of one tool result; Claude Code cuts bash output at about this size too.
MAX_RESULT_CHARS = 30_000
# Metrics use Claude Code's tool names, so runs of every executor count alike (seed 002).
EDITOR_NAMES = {"view": "Read", "create": "Write", "str_replace": "Edit", "insert": "Edit"}


def cc_tool_name(name: str, tool_input: JsonObject) -> str:
    if name == "bash":
        return "Bash"
    if name == EDITOR_TOOL["name"]:
        return EDITOR_NAMES.get(str(tool_input.get("command")), "Edit")
    return name


def system_prompt(skill: SkillInfo | None, inputs: list[str]) -> str:
    if inputs:
        listed = ", ".join(f"/workspace/{name}" for name in inputs)
        input_files = f"The task's input files are there: {listed}."
    else:
        input_files = "The task has no input files."
    skills = ""
    if skill is not None:
        # Claude Code's own listing form, `<skill name="NAME">DESCRIPTION</skill>`.
        entry = f'<skill name="{html.escape(skill.name, quote=True)}">{skill.description}</skill>'
        listing = tag("available_skills", entry)
        skills = SKILLS_INTRO + listing + "\n"
    return load_prompt("executor").render(input_files=input_files, skills=skills)


def _clip(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


async def run_bash(
    tool_input: JsonObject, *, work_dir: Path, skill_dir: Path | None, policy: sandbox.SandboxPolicy
) -> tuple[str, bool]:
    """Run the model's bash tool input in the sandbox; (result text, is_error). This is the only
    way a model-written command reaches a shell."""
    if tool_input.get("restart"):
        return "The shell was restarted (each command runs in a fresh shell anyway).", False
    command = tool_input.get("command")
    if not isinstance(command, str) or not command.strip():
        return "Error: the bash tool needs a non-empty 'command'.", True
    result = await sandbox.run_async(command, work_dir=work_dir, skill_dir=skill_dir, policy=policy)
    if result.infra:  # the command never ran: the run is unscored, not the agent's failure
        raise InfraFailure(f"the sandbox could not run a command: {result.error}")
    if result.resource_limit:  # a limit of the whole run: it ends here, as at its time limit
        raise ResourceLimit(result.error or "a resource limit of the run was passed")
    parts = [p for p in (result.stdout, result.stderr) if p]
    if result.error:
        parts.append(f"Error: the command could not run: {result.error}")
    elif result.timed_out:
        parts.append(f"Error: the command was stopped after {policy.timeout_s:g} s.")
    elif result.exit_code:
        parts.append(f"(exit code {result.exit_code})")
    if result.output_truncated:
        parts.append(f"[output cut at {policy.max_output_bytes} bytes]")
    return _clip("\n".join(parts) or "(no output)"), not result.ok


def _host(path: Json, work_dir: Path, skill_dir: Path | None, *, write: bool) -> Path | str:
    """The host path, or the error text to send back (in sandbox terms only)."""
    if not isinstance(path, str) or not path:
        return "Error: 'path' is required."
    host = sandbox.to_host_path(path, work_dir, skill_dir, for_write=write)
    if host is not None:
        return host
    if write and sandbox.to_host_path(path, work_dir, skill_dir) is not None:
        return f"Error: {path} is read-only; write under /workspace instead."
    return f"Error: {path} is outside the folders you can use (/workspace, and /skill to read)."


def _view_dir(host: Path, shown: str) -> str:
    lines = [f"Files and folders in {shown}, up to 2 levels deep (hidden ones left out):"]
    for path in sorted(host.rglob("*")):
        rel = path.relative_to(host)
        if len(rel.parts) > 2 or any(part.startswith(".") for part in rel.parts):
            continue
        lines.append(f"{shown.rstrip('/')}/{rel.as_posix()}{'/' if path.is_dir() else ''}")
    return "\n".join(lines)


def run_editor(
    tool_input: JsonObject, *, work_dir: Path, skill_dir: Path | None, max_file_bytes: int
) -> tuple[str, bool]:
    """The text editor tool (view, create, str_replace, insert) confined to /workspace (read and
    write) and /skill (read only). A refused request is an error result, never an exception."""
    command, path = tool_input.get("command"), tool_input.get("path")
    if command not in EDITOR_NAMES:
        return f"Error: unknown command {command!r}; use view, create, str_replace or insert.", True
    host = _host(path, work_dir, skill_dir, write=command != "view")
    if isinstance(host, str):
        return host, True
    try:
        if command == "view":
            return _view(host, path, tool_input.get("view_range"))
        if command == "create":
            return _create(host, path, tool_input.get("file_text"), max_file_bytes)
        text = _read(host, path)
        if command == "str_replace":
            old, new = tool_input.get("old_str"), tool_input.get("new_str") or ""
            return _str_replace(host, path, text, old, new)
        new_text = tool_input.get("insert_text", tool_input.get("new_str"))
        return _insert(host, path, text, tool_input.get("insert_line"), new_text)
    except _ToolError as exc:
        return str(exc), True
    except (OSError, ValueError, TypeError) as exc:
        # The OS message can name the host path; only the sandbox path goes back.
        return f"Error: {command} failed on {path} ({type(exc).__name__}).", True


def _view(host: Path, path: object, view_range: object) -> tuple[str, bool]:
    """view: a folder's listing, or the file's lines numbered from 1 ([first, last] of them when
    view_range says so, last -1 for the end)."""
    if host.is_dir():
        return _clip(_view_dir(host, str(path))), False
    lines = _read(host, path).split("\n")
    start, end = 1, len(lines)
    if isinstance(view_range, list) and len(view_range) == 2:
        start = max(1, int(view_range[0]))
        end = len(lines) if int(view_range[1]) == -1 else min(len(lines), int(view_range[1]))
    numbered = [f"{n:6}\t{lines[n - 1]}" for n in range(start, end + 1)]
    return _clip("\n".join(numbered)), False


def _create(host: Path, path: object, text: object, max_file_bytes: int) -> tuple[str, bool]:
    """create: write the whole file (its folders too), within the sandbox's limit of file size."""
    if not isinstance(text, str):
        return "Error: create needs 'file_text'.", True
    if len(text.encode("utf-8")) > max_file_bytes:
        return f"Error: the file would pass the limit of {max_file_bytes} bytes.", True
    if host.is_dir():
        return f"Error: {path} is a folder.", True
    host.parent.mkdir(parents=True, exist_ok=True)
    host.write_text(text, encoding="utf-8")
    return f"File created successfully at: {path}", False


def _str_replace(host: Path, path: object, text: str, old: object, new: object) -> tuple[str, bool]:
    """str_replace on the file's `text`: old must occur exactly once, so the edit is unambiguous."""
    if not isinstance(old, str) or not old:
        return "Error: str_replace needs a non-empty 'old_str'.", True
    count = text.count(old)
    if count != 1:
        where = "does not occur" if count == 0 else f"occurs {count} times"
        return f"Error: old_str {where} in {path}; it must occur exactly once.", True
    host.write_text(text.replace(old, str(new), 1), encoding="utf-8")
    return f"The file {path} has been edited.", False


def _insert(
    host: Path, path: object, text: str, line: object, new_text: object
) -> tuple[str, bool]:
    """insert: new_text's lines after line `line` of the file's `text` (0 = at the top)."""
    lines = text.split("\n")
    if not isinstance(line, int) or not 0 <= line <= len(lines) or not isinstance(new_text, str):
        return f"Error: insert needs 'insert_line' (0 to {len(lines)}) and 'insert_text'.", True
    lines[line:line] = new_text.split("\n")
    host.write_text("\n".join(lines), encoding="utf-8")
    return f"The file {path} has been edited.", False


class _ToolError(Exception):
    pass


def _read(host: Path, shown: object) -> str:
    if not host.is_file():
        raise _ToolError(f"Error: {shown} does not exist or is not a file.")
    try:
        return host.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise _ToolError(f"Error: {shown} is not a text file; inspect it with bash.") from None


def run_skill(tool_input: JsonObject, skill: SkillInfo | None) -> tuple[str, bool]:
    wanted = str(tool_input.get("skill", "")).strip().lstrip("/")
    if skill is None or wanted != skill.name:
        known = f"'{skill.name}'" if skill is not None else "none"
        return f"Error: unknown skill {wanted!r}; the available skills are: {known}.", True
    header = (
        "Base directory for this skill: /skill (read-only). Paths in these instructions "
        "are relative to /skill.\n\n"
    )
    return header + skill.body, False


# The stop reasons that end a run without the agent finishing it, and what the run's error says.
ENDED_BY_THE_MODEL = {
    "refusal": "the model declined to go on with the task (stop_reason refusal)",
    "model_context_window_exceeded": (
        "the conversation outgrew the model's context window (stop_reason "
        "model_context_window_exceeded)"
    ),
}


def _cut_off(
    uses: list[ToolUseBlockParam], max_tokens: int, transcript: Transcript, tally: Tally
) -> str | list[ToolResultBlockParam]:
    """What the agent is told of an answer cut at max_tokens: an error result for each of its tool
    calls, none of which ran, or else to continue; the cut is noted and counted."""
    cut = f"Your answer was cut off at the output limit (execute.max_tokens = {max_tokens} tokens)"
    transcript.note("Answer cut at max_tokens", f"{cut}; its tool calls were not run.")
    tally.truncated += 1
    if not uses:
        return f"{cut}. Continue where you stopped."
    results: list[ToolResultBlockParam] = [
        {
            "type": "tool_result",
            "tool_use_id": u["id"],
            "is_error": True,
            "content": f"{cut} before this tool call was complete; nothing was "
            "run. Send it again, in smaller parts.",
        }
        for u in uses
    ]
    transcript.tool_results(results, names={u["id"]: u["name"] for u in uses})
    return results


class AnthropicExecutor(Executor):
    """The default executor: our own agent loop through the ledger-cached model client."""

    name = "anthropic"

    def __init__(self, settings: Settings, client: Client) -> None:
        super().__init__(settings)
        self.client = client
        self.policy = sandbox.SandboxPolicy.from_settings(settings.sandbox)

    async def _run(self, ctx: TrialContext, transcript: Transcript, tally: Tally) -> str | None:
        from optimizer.model import call_cost, plain, price_for

        system = system_prompt(ctx.skill, ctx.inputs)
        tools = agent_tools(self.settings, with_skill=ctx.skill is not None)
        transcript.system(system)
        messages: list[MessageParam] = [{"role": "user", "content": ctx.eval.prompt}]
        limits = self.settings.execute
        price = price_for(self.settings, self.settings.models.executor)
        for _turn in range(limits.max_turns):
            reply = await self.client.message(
                "executor",
                system=system,
                messages=messages,
                tools=tools,
                max_tokens=limits.max_tokens,
                sample=ctx.sample,
            )
            tally.steps += 1
            tally.add_usage(reply.usage)
            tally.cost_usd += call_cost(price, reply.usage)
            blocks = plain(reply.content)
            transcript.assistant(blocks, usage=plain(reply.usage))
            messages.append({"role": "assistant", "content": blocks})
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            if reply.stop_reason == "max_tokens":
                # Cut off mid-answer: not the agent finishing, and a cut tool call's input is
                # incomplete, so nothing in this answer is run. The agent is told and goes on.
                told = _cut_off(uses, limits.max_tokens, transcript, tally)
                messages.append({"role": "user", "content": told})
                continue
            if reply.stop_reason in ENDED_BY_THE_MODEL:  # not a finish: the skill's and task's
                return ENDED_BY_THE_MODEL[str(reply.stop_reason)]
            if not uses:
                return None
            results: list[ToolResultBlockParam]
            results, names = [], {}
            for use in uses:
                text, is_error = await self._tool(use, ctx, tally)
                names[use["id"]] = use["name"]
                tally.tool_errors += int(is_error)
                result: ToolResultBlockParam = {
                    "type": "tool_result",
                    "tool_use_id": use["id"],
                    "content": ctx.scrub(text),
                }
                if is_error:
                    result["is_error"] = True
                results.append(result)
            transcript.tool_results(results, names=names)
            messages.append({"role": "user", "content": results})
        return f"the agent did not finish within execute.max_turns = {limits.max_turns} turns"

    async def _tool(self, use: JsonObject, ctx: TrialContext, tally: Tally) -> tuple[str, bool]:
        name = str(use.get("name"))
        tool_input = use.get("input")
        if not isinstance(tool_input, dict):
            tool_input = {}
        tally.tool_calls[cc_tool_name(name, tool_input)] += 1
        skill_dir = ctx.skill.dir if ctx.skill is not None else None
        if name == "bash":
            return await run_bash(
                tool_input, work_dir=ctx.work, skill_dir=skill_dir, policy=self.policy
            )
        if name == EDITOR_TOOL["name"]:
            return run_editor(
                tool_input,
                work_dir=ctx.work,
                skill_dir=skill_dir,
                max_file_bytes=self.policy.max_file_bytes,
            )
        if name == "Skill" and ctx.skill is not None:
            text, is_error = run_skill(tool_input, ctx.skill)
            tally.skill_invoked = tally.skill_invoked or not is_error
            return text, is_error
        return f"Error: there is no tool called {name!r}.", True
