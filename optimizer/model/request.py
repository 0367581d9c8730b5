"""The canonical form of a Messages request: the JSON that is hashed, measured and cached, and the
prompt-caching breakpoints. Pure functions: never sends, never reads the ledger."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anthropic.types import MessageParam, TextBlockParam, ToolChoiceParam, ToolUnionParam

    from optimizer.schemas.common import Json, JsonObject

from pydantic import BaseModel

from optimizer import catalog

MAX_CACHE_BREAKPOINTS = 4
# The roles whose calls are turns of one conversation, each read again by the next: an agent's.
CONVERSATION_ROLES = frozenset({"executor"})
# An attachment is billed by what it shows, not by its base64: an image within 1568 px costs at
# most about 1,600 input tokens, a PDF page about that much as an image plus its text. Counted at
# the 4 characters a token of the estimate, so a 5 MB image is not priced as 7 million characters.
ATTACHMENT_TOKENS = 1_600
PDF_BYTES_PER_TOKEN = 30  # upper-leaning: a 50 KB page counts as about 1,700 tokens


def plain(value: object) -> Any:
    """JSON-ready copy of a request part; SDK objects (a previous answer's content blocks) become
    the dicts the API takes, so the hash does not depend on how a caller spelled them."""
    if isinstance(value, BaseModel):
        return plain(
            value.model_dump(mode="json", exclude_unset=True, exclude_none=True, warnings=False)
        )
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def build_request(
    *,
    model: str,
    max_tokens: int,
    messages: Sequence[MessageParam],
    system: str | list[TextBlockParam] | None,
    tools: list[ToolUnionParam] | None,
    tool_choice: ToolChoiceParam | None,
    temperature: float | None,
    thinking: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The request body with only the parts that were given, so an absent part never changes
    the hash."""
    request: dict[str, Json] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": plain(messages),
    }
    if system:
        request["system"] = (
            [{"type": "text", "text": system}] if isinstance(system, str) else plain(system)
        )
    if tools:
        request["tools"] = plain(tools)
    if tool_choice:
        request["tool_choice"] = plain(tool_choice)
    if temperature is not None:
        request["temperature"] = temperature
    if thinking is not None:
        request["thinking"] = dict(thinking)
    return request


def canonical_json(request: object) -> str:
    """The request as sorted, compact JSON: the text that is hashed and measured."""
    return json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def billed_chars(request: Mapping[str, Any], canonical: str) -> int:
    """The length of the canonical request with each base64 image or document counted as the
    text it costs about as much as, for estimates before a call."""
    chars = len(canonical)
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else []:
            source = block.get("source") if isinstance(block, Mapping) else None
            if not isinstance(source, Mapping) or source.get("type") != "base64":
                continue
            encoded = len(str(source.get("data", "")))
            tokens = ATTACHMENT_TOKENS
            if block.get("type") == "document":
                tokens = max(tokens, encoded * 3 // 4 // PDF_BYTES_PER_TOKEN)
            chars += 4 * tokens - encoded
    return chars


def request_hash(canonical: str, role: str, sample: int) -> str:
    """sha256 of the canonical request (no headers, no transport flags) with the role and the
    sample index, so the three runs of one eval are three distinct calls."""
    return hashlib.sha256(f"{role}\0{sample}\0{canonical}".encode()).hexdigest()


def with_cache_control(
    request: JsonObject, canonical: str, *, role: str, model: str
) -> dict[str, Any]:
    """Mark the stable prefixes (the last tool definition, then the last system block) and, for
    a conversation role, the turns so far (the last block of the last message) as ephemeral
    cache breakpoints, within the API's limit of four per request (counting those `canonical`,
    the request's JSON, already holds): each turn of an agent then writes its own turn and reads
    the turns before it, which the service finds by looking back from the new mark. A single
    question is not marked: a write costs a quarter more than plain input, and nothing would
    read it again. A prefix shorter than the model's minimum cacheable length (counted as the
    estimate counts, 4 characters a token) is not marked: the service would not cache it.
    Works on a copy."""
    marked = dict(request)
    used = canonical.count('"cache_control":')
    min_tokens = catalog.facts(model).cache_minimum_tokens
    chars = 0
    parts = ("tools", "system", "messages") if role in CONVERSATION_ROLES else ("tools", "system")
    for part in parts:
        blocks = marked.get(part)
        if not isinstance(blocks, list) or not blocks:
            continue
        chars += len(canonical_json(blocks))
        if used >= MAX_CACHE_BREAKPOINTS or chars / 4 < min_tokens:
            continue
        last = _with_breakpoint(blocks[-1], conversation=part == "messages")
        if last is not None:
            marked[part] = [*blocks[:-1], last]
            used += 1
    return marked


EPHEMERAL = {"type": "ephemeral"}
# Blocks that cannot carry a breakpoint: a model's thinking is cached with its turn, not marked.
_UNMARKABLE = ("thinking", "redacted_thinking")


def _with_breakpoint(item: object, *, conversation: bool) -> dict[str, Json] | None:
    """A copy of a tool, a system block or (conversation) a message with a breakpoint on it (on
    a message, on its last block; a string content is one text block), or None when it already
    has one or cannot carry one."""
    if not isinstance(item, Mapping):
        return None
    if not conversation:
        return None if "cache_control" in item else {**item, "cache_control": EPHEMERAL}
    content = item.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list) or not blocks or not isinstance(blocks[-1], Mapping):
        return None
    last = blocks[-1]
    if "cache_control" in last or last.get("type") in _UNMARKABLE:
        return None
    return {**item, "content": [*blocks[:-1], {**last, "cache_control": EPHEMERAL}]}
