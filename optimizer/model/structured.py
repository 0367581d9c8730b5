"""Answers given as the input of one tool: the tool built from a pydantic model, how each model is
asked to call it, the check of a reply, and the one repair. Never sends a request itself; it is
handed a way to ask."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import structlog
from anthropic.types import (
    Message,
    MessageParam,
    TextBlockParam,
    ToolChoiceParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlock,
)
from pydantic import BaseModel, ValidationError

from optimizer import catalog
from optimizer.model.errors import StructuredAnswerError
from optimizer.model.request import plain

log = structlog.get_logger()

Answer = TypeVar("Answer", bound=BaseModel)
# Sends the conversation; `first` is True for the first attempt, which may join a Message Batch.
Ask = Callable[[Sequence[MessageParam], bool], Awaitable[Message]]


@dataclass(frozen=True)
class Asking:
    """How a model is asked for the call of one tool. The API refuses a forced tool to the models
    that always think (a 400), and to the others that think by default unless thinking is off:
    the first are offered the tool alone with tool_choice auto and told to call it (a reply
    without the call goes back once, as any bad reply does); the second get thinking off."""

    tool_choice: ToolChoiceParam
    thinking: dict[str, str] | None
    told: str | None  # the sentence added to the system prompt when the tool is not forced

    def system(
        self, system: str | list[TextBlockParam] | None
    ) -> str | list[TextBlockParam] | None:
        if self.told is None:
            return system
        told: TextBlockParam = {"type": "text", "text": self.told}
        if isinstance(system, str):
            return [{"type": "text", "text": system}, told]
        return [*(system or []), told]


def asking(model: str, tool_name: str) -> Asking:
    facts = catalog.facts(model)
    if facts.refuses_forced_tool:
        told = f"Give your answer only by calling the tool {tool_name}, once."
        return Asking({"type": "auto"}, None, told)
    forced: ToolChoiceParam = {"type": "tool", "name": tool_name}
    # Only for the models the catalog knows to think by default: a server of the user's own
    # may refuse a field it does not know, and the request (and its ledger key) stays as it was.
    off = facts.thinks_by_default and catalog.listed(model) is not None
    return Asking(forced, {"type": "disabled"} if off else None, None)


class BadAnswer(Exception):
    """A reply that is not a valid call of the tool, with the user turn that says what was wrong."""

    def __init__(self, error: str, reply: MessageParam) -> None:
        super().__init__(error)
        self.reply = reply


@functools.lru_cache(maxsize=512)
def forced_tool(schema: type[BaseModel], tool_name: str) -> ToolParam:
    """The tool whose input_schema is the schema; its description is the model's docstring.
    Made once per schema and shared (read it, never change it): pydantic builds a JSON schema in
    about 9 ms, which was 15% of a simulated run's CPU when it was built for every call."""
    description = (schema.__doc__ or "").strip() or f"Give the answer as a {schema.__name__}."
    return {
        "name": tool_name,
        "description": description,
        "input_schema": schema.model_json_schema(),
    }


def tool_answer(message: Message, schema: type[Answer], tool_name: str) -> Answer:
    """The validated input of the tool call in `message`, or BadAnswer."""
    uses = [b for b in message.content if b.type == "tool_use"]
    mine = [b for b in uses if b.name == tool_name]
    if message.stop_reason == "max_tokens":
        # Named as what it is: a cut answer's tool input is incomplete, whatever it fails on.
        raise _cut_off(uses, tool_name)
    if message.stop_reason == "refusal" and not mine:
        # Named as what it is; asked once more like any bad reply, then a judge error (data).
        raise BadAnswer(
            "the model declined to answer (stop_reason refusal)",
            {"role": "user", "content": f"Answer by calling the tool {tool_name} now."},
        )
    if not mine:
        raise _no_call(uses, message.stop_reason, tool_name)
    try:
        return schema.model_validate(mine[0].input)
    except ValidationError as exc:
        raise _invalid_input(exc, uses, tool_name) from None


def _error_results(uses: list[ToolUseBlock], text: str) -> list[ToolResultBlockParam]:
    """One error result with `text` for each tool call of the reply: the API wants every
    tool_use answered by a tool_result in the next user turn."""
    return [
        {"type": "tool_result", "tool_use_id": b.id, "is_error": True, "content": text}
        for b in uses
    ]


def _cut_off(uses: list[ToolUseBlock], tool_name: str) -> BadAnswer:
    """A reply cut at max_tokens: its tool calls are answered, or the cut said in a text block."""
    text = (
        f"Your answer was cut off at the output token limit before the input of "
        f"{tool_name} was complete. Call {tool_name} again, more briefly."
    )
    return BadAnswer(
        "the answer was cut at max_tokens before its tool input was complete",
        {"role": "user", "content": _error_results(uses, text) or [{"type": "text", "text": text}]},
    )


def _no_call(uses: list[ToolUseBlock], stop_reason: str | None, tool_name: str) -> BadAnswer:
    """A reply without a call of the tool: the calls of other tools are refused, and the model is
    asked for the one it was given."""
    return BadAnswer(
        f"no call of the tool (stop_reason {stop_reason})",
        {
            "role": "user",
            "content": (
                _error_results(uses, f"Unknown tool; call {tool_name} instead.")
                + [{"type": "text", "text": f"Answer by calling the tool {tool_name} now."}]
            ),
        },
    )


def _invalid_input(exc: ValidationError, uses: list[ToolUseBlock], tool_name: str) -> BadAnswer:
    """A call whose input does not validate: each problem named by its place in the input."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
        for err in exc.errors(include_url=False)
    )
    text = (
        f"The input does not match the tool's input_schema: {problems}. "
        f"Call {tool_name} again with input that matches it."
    )
    return BadAnswer(
        f"invalid input ({problems})", {"role": "user", "content": _error_results(uses, text)}
    )


async def answer_with_repair(
    ask: Ask, messages: Sequence[MessageParam], schema: type[Answer], *, role: str, tool_name: str
) -> Answer:
    """The answer to `messages`; a reply that does not validate is sent back once with the
    error, then StructuredAnswerError."""
    first = await ask(messages, True)
    try:
        return tool_answer(first, schema, tool_name)
    except BadAnswer as exc:
        first_error = exc
    repair = plain(messages)
    if first.content:  # the API refuses an empty assistant turn
        repair.append({"role": "assistant", "content": plain(first.content)})
    repair.append(first_error.reply)
    log.info("llm.structured_repair", role=role, tool=tool_name, error=str(first_error))
    second = await ask(repair, False)
    try:
        return tool_answer(second, schema, tool_name)
    except BadAnswer as exc:
        raise StructuredAnswerError(
            role=role, tool_name=tool_name, first_error=str(first_error), second_error=str(exc)
        ) from None
