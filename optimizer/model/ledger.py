"""The rows a model call leaves in the `calls` ledger, and an answer read back from one. Builds
rows only: the client and the batch route write them, before any caller sees the answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from anthropic.types import Message, Usage

from optimizer.store.db import Completed
from optimizer.store.rows import CallRow

if TYPE_CHECKING:
    from optimizer.schemas.common import Json, JsonObject


def answer_data(message: Message) -> dict[str, Json]:
    """The answer as stored: the JSON the caller's Message is rebuilt from, ledger hit or not."""
    return message.model_dump(mode="json", exclude_none=True, warnings=False)


@dataclass(frozen=True)
class CallIdentity:
    """Which call a row records: its request's hash (the ledger's key), the role that asked, the
    model, the sample index, the scope its cost is reported under and the Message Batch that
    answered it (None: answered directly)."""

    key: str
    role: str
    model: str
    sample: int
    scope: str | None
    batch_id: str | None = None


@dataclass(frozen=True)
class CallSpend:
    """What answering a call took: its tokens, its price in USD, its time and its attempts."""

    usage: Usage
    cost: float
    latency_ms: float
    attempts: int


def answer_row(call: CallIdentity, *, data: JsonObject, spend: CallSpend) -> CallRow:
    """The row of a completed call; its cost is final, so the ledger doubles as the cache."""
    usage = spend.usage
    row: CallRow = {
        "hash": call.key,
        "role": call.role,
        "model": call.model,
        "sample": call.sample,
        "outcome": "ok",
        "response_json": json.dumps(data, ensure_ascii=False),
        "input_tokens": usage.input_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
        "cache_write_tokens": usage.cache_creation_input_tokens or 0,
        "cache_read_tokens": usage.cache_read_input_tokens or 0,
        "cost_usd": spend.cost,
        "latency_ms": spend.latency_ms,
        "attempts": spend.attempts,
        "error": None,
        "scope": call.scope,
    }
    if call.batch_id is not None:
        row["batch_id"] = call.batch_id
    return row


def failure_row(
    *, key: str, role: str, model: str, sample: int, latency_ms: float, attempts: int, error: str
) -> CallRow:
    """The row of a call that failed for good: nothing paid, the redacted error kept."""
    return {
        "hash": key,
        "role": role,
        "model": model,
        "sample": sample,
        "outcome": "error",
        "response_json": None,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_write_tokens": 0,
        "cache_read_tokens": 0,
        "cost_usd": 0.0,
        "latency_ms": latency_ms,
        "attempts": attempts,
        "error": error,
    }


def replay(done: Completed) -> Message:
    """The answer a completed call holds, as the Message its first caller got."""
    return Message.model_validate(done.response)
