"""The Claude Code CLI's stream-json transcript: each line it prints read into the run's
transcript and tally (steps, tool calls, whether our skill was invoked, usage and cost), and its
result line read into how the run ended: finished, failed as the agent's, or failed by the model
endpoint (ours, never the skill's 0)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from optimizer.errors import InfraFailure
from optimizer.execute import TrialContext
from optimizer.execute.transcript import Tally, Transcript

if TYPE_CHECKING:
    from optimizer.schemas import Json, JsonObject

VOLATILE_KEYS = ("uuid", "session_id", "timestamp")
NO_RESULT = "the Claude Code CLI exited with code"


class StreamState:
    """Reads the CLI's stream-json lines into the transcript and the tally."""

    def __init__(self, skill_name: str | None, home: str | None) -> None:
        self.skill_name = skill_name
        self.home = home
        self.result: JsonObject | None = None
        self.names: dict[str, str] = {}
        self.messages: set[str] = set()

    def feed(self, line: str, transcript: Transcript, tally: Tally, ctx: TrialContext) -> None:
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
                texts = [
                    str(b.get("text", ""))
                    for b in content
                    if isinstance(b, dict) and b.get("type") == "text"
                ]
                transcript.context("\n".join(texts), raw=event)
        elif kind == "result":
            self.result = event
            transcript.log(event)
            tally.add_usage(event.get("usage") or {})
            tally.cost_usd += float(event.get("total_cost_usd") or 0.0)
        else:
            transcript.log(event)

    def _is_ours(self, tool_input: Json) -> bool:
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
            return (
                f"the Claude Code CLI ended with {result.get('subtype')!r} after "
                f"{result.get('num_turns')} turns{': ' + str(detail) if detail else ''}"
            )
        return None


def api_failure(result: JsonObject) -> str | None:
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
    return f"HTTP {status if isinstance(status, int) else '-'} {kind}" + (
        f": {said}" if said else ""
    )
