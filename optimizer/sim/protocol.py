"""The wire protocol of the Messages API as the simulator speaks it: error bodies, validation,
SSE events, max_tokens cuts and malformed tool input. Never decides what a reply says."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from optimizer.sim.text import canonical, tool_schema

ERRORS = {
    "429": (
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit (simulated).",
    ),
    "429-spend": (
        429,
        "rate_limit_error",
        "You have reached your specified API usage limits. You will regain access when "
        "your spend limit is raised or resets.",
    ),
    "529": (529, "overloaded_error", "Overloaded"),
    "500": (500, "api_error", "Internal server error"),
}
FAULT_KINDS = ("429", "529", "500", "timeout", "truncate", "malformed")


@dataclass(frozen=True)
class Reply:
    """What the service does with one HTTP request: a body, SSE chunks, or a dropped connection
    (`drop` is "timeout" or "disconnect")."""

    status: int
    headers: dict[str, str]
    body: bytes = b""
    events: list[bytes] | None = None
    drop: str | None = None


def json_reply(status: int, payload: Any, **headers: str) -> Reply:
    return Reply(
        status, {"content-type": "application/json", **headers}, json.dumps(payload).encode()
    )


def error_reply(status: int, kind: str, message: str, **headers: str) -> Reply:
    return json_reply(
        status, {"type": "error", "error": {"type": kind, "message": message}}, **headers
    )


def tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def invalid(body: Any, required: tuple[str, ...] | None = None) -> str | None:
    required = required or ("model", "messages", "max_tokens")
    if not isinstance(body, dict):
        return "The request body must be a JSON object."
    for name in required:
        if name not in body:
            return f"{name}: Field required"
    if not isinstance(body["messages"], list) or not body["messages"]:
        return "messages: at least one message is required"
    if any(
        not isinstance(m, dict) or "role" not in m or "content" not in m for m in body["messages"]
    ):
        return "messages: each message needs a role and a content"
    if any(not isinstance(m["content"], str | list) for m in body["messages"]):
        return "messages: content must be a string or a list of blocks"
    if "max_tokens" in required and (
        not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1
    ):
        return "max_tokens: must be a positive integer"
    return None


def _chunks(text: str, parts: int = 3) -> list[str]:
    size = max(1, math.ceil(len(text) / parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def sse_events(message: dict) -> list[bytes]:
    """The message as the service streams it: start, blocks in a few deltas each, delta, stop."""
    start = dict(
        message,
        content=[],
        stop_reason=None,
        stop_sequence=None,
        usage=dict(message["usage"], output_tokens=1),
    )
    events: list[tuple[str, dict]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for i, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            skeleton = dict(block, input={})
            deltas = [
                {"type": "input_json_delta", "partial_json": c}
                for c in _chunks(json.dumps(block["input"]))
            ]
        else:
            skeleton = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"])]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": skeleton},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]


def cap(content: list[dict], stop: str, max_tokens: int) -> tuple[list[dict], str]:
    # A reply longer than max_tokens is cut like the service cuts it: text shortened, stop
    # reason max_tokens, and a tool call that no longer fits is not made.
    budget = max_tokens * 4
    if len(canonical(content)) <= budget:
        return content, stop
    kept: list[dict] = []
    for block in content:
        size = len(canonical(block))
        if block["type"] == "text" and budget > 0:
            kept.append({"type": "text", "text": block["text"][:budget]})
        elif size <= budget:
            kept.append(block)
        budget -= size
    return kept or [{"type": "text", "text": ""}], "max_tokens"


def malform(message: dict, body: dict) -> dict:
    """Drop a required field from the first tool call: a 200 the client's validation must catch."""
    content: list[dict] = []
    for block in message["content"]:
        if block["type"] == "tool_use" and not any(b["type"] == "tool_use" for b in content):
            required = (tool_schema(body, block["name"]) or {}).get("required") or list(
                block["input"]
            )
            doomed = next((k for k in required if k in block["input"]), None)
            block = dict(block, input={k: v for k, v in block["input"].items() if k != doomed})
        content.append(block)
    return dict(message, content=content)
