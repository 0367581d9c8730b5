"""What an executor keeps while the agent works: the transcript (transcript.jsonl in Messages-API
content blocks, and a readable transcript.md built alongside) and the tally of its steps, tool
calls, tokens and cost, so a run cut short still reports what was done."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK's types only: importing it costs 2 s (model/port.py)
    from anthropic.types import Usage

    from optimizer.schemas import Json, JsonObject


@dataclass
class Tally:
    """Counts kept while the agent works, so a timeout still reports what was done."""

    tool_calls: Counter[str] = field(default_factory=Counter)
    steps: int = 0
    tool_errors: int = 0
    truncated: int = 0  # answers cut at max_tokens
    tokens: int = 0
    cost_usd: float = 0.0
    skill_invoked: bool | None = None
    # The run clock's split (skill_seconds, model_wait_seconds, ...), set when the run ends.
    clock: dict[str, float | int] = field(default_factory=dict)

    def add_usage(self, usage: Usage | JsonObject) -> None:
        get = usage.get if isinstance(usage, dict) else (lambda k, d=0: getattr(usage, k, d))
        self.tokens += sum(
            int(get(k, 0) or 0)
            for k in (
                "input_tokens",
                "output_tokens",
                "cache_creation_input_tokens",
                "cache_read_input_tokens",
            )
        )


def _fence(text: str, lang: str = "") -> str:
    # A fence longer than any backtick run inside, so tool output can never close it early.
    ticks = "`" * max(3, _max_backticks(text) + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _max_backticks(text: str) -> int:
    best = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        best = max(best, run)
    return best


class Transcript:
    """transcript.jsonl (one JSON object per line, Messages-API content blocks, so the structural
    checks find tool_use/tool_result anywhere) and a readable transcript.md built alongside."""

    def __init__(self, prompt: str, inputs: list[str]) -> None:
        self.lines: list[object] = [{"type": "eval_prompt", "text": prompt, "files": inputs}]
        self.md: list[str] = ["# Transcript", "## Eval Prompt", prompt]
        if inputs:
            self.md += ["## Input Files", "\n".join(f"- {name}" for name in inputs)]
        self.step = 0

    def log(self, obj: object) -> None:
        self.lines.append(obj)

    def system(self, text: str) -> None:
        self.log({"type": "system", "text": text})

    def assistant(
        self,
        blocks: list[dict[str, Any]],
        *,
        raw: JsonObject | None = None,
        usage: JsonObject | None = None,
        new_step: bool = True,
    ) -> None:
        self.log(
            raw
            if raw is not None
            else {"type": "message", "role": "assistant", "content": blocks, "usage": usage or {}}
        )
        if new_step or not self.step:
            self.step += 1
            self.md.append(f"## Step {self.step}")
        for block in blocks:
            if block.get("type") == "text" and block.get("text", "").strip():
                self.md.append(block["text"].strip())
            elif block.get("type") == "tool_use":
                self.md += [
                    f"### Tool call: {block.get('name')}",
                    _fence(json.dumps(block.get("input"), indent=2, ensure_ascii=False), "json"),
                ]

    def tool_results(
        self,
        results: Sequence[Mapping[str, Any]],
        *,
        raw: JsonObject | None = None,
        names: dict[str, str] | None = None,
    ) -> None:
        self.log(
            raw if raw is not None else {"type": "message", "role": "user", "content": results}
        )
        for result in results:
            name = (names or {}).get(result.get("tool_use_id", ""), "tool")
            flag = " (error)" if result.get("is_error") else ""
            self.md += [f"### Tool result: {name}{flag}", _fence(_text_of(result.get("content")))]

    def context(self, text: str, *, raw: JsonObject) -> None:
        """Text the harness put into the conversation (a skill's body, for one)."""
        self.log(raw)
        if text.strip():
            self.md += ["### Added to the conversation", _fence(text.strip())]

    def note(self, heading: str, text: str) -> None:
        self.log({"type": "note", "heading": heading, "text": text})
        self.md += [f"## {heading}", text]

    def error(self, status: str, text: str) -> None:
        self.log({"type": "error", "status": status, "text": text})
        self.md += ["## Error", f"Status: {status}", text]

    def markdown(self) -> str:
        return "\n\n".join(self.md) + "\n"

    def jsonl(self) -> str:
        return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in self.lines)


def _text_of(content: Json) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(c) for c in content)
    if isinstance(content, dict):
        return (
            str(content.get("text", ""))
            if content.get("type", "text") == "text"
            else json.dumps(content)
        )
    return "" if content is None else str(content)
