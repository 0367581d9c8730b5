"""The canonical form of a Messages request: the JSON that is hashed, measured and cached, and the
prompt-caching breakpoints. Pure functions: never sends, never reads the ledger."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anthropic.types import TextBlockParam, ToolChoiceParam, ToolUnionParam

from pydantic import BaseModel

MAX_CACHE_BREAKPOINTS = 4
# An attachment is billed by what it shows, not by its base64: an image within 1568 px costs at
# most about 1,600 input tokens, a PDF page about that much as an image plus its text. Counted at
# the 4 characters a token of the estimate, so a 5 MB image is not priced as 7 million characters.
ATTACHMENT_TOKENS = 1_600
PDF_BYTES_PER_TOKEN = 30  # upper-leaning: a 50 KB page counts as about 1,700 tokens


def plain(value: Any) -> Any:
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
    messages: list[Any],
    system: str | list[TextBlockParam] | None,
    tools: list[ToolUnionParam] | None,
    tool_choice: ToolChoiceParam | None,
    temperature: float | None,
) -> dict[str, Any]:
    """The request body with only the parts that were given, so an absent part never changes
    the hash."""
    request: dict[str, Any] = {
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
    return request


def canonical_json(request: Mapping[str, Any]) -> str:
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


def with_cache_control(request: Mapping[str, Any], already_marked: int = 0) -> dict[str, Any]:
    """Mark the stable prefixes (the last tool definition, then the last system block) as
    ephemeral cache breakpoints, within the API's limit of four per request. Works on a copy."""
    marked = dict(request)
    used = already_marked
    for part in ("tools", "system"):
        blocks = marked.get(part)
        if used >= MAX_CACHE_BREAKPOINTS or not isinstance(blocks, list) or not blocks:
            continue
        if "cache_control" not in blocks[-1]:
            marked[part] = [*blocks[:-1], {**blocks[-1], "cache_control": {"type": "ephemeral"}}]
            used += 1
    return marked
