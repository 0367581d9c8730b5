"""What the simulated service bills for a request's input: plain input, cache writes and cache
reads, as the API's prompt caching does. A breakpoint (a block marked cache_control) ends a
cacheable prefix; a prefix shorter than the model's minimum cacheable length is neither written
nor read; from a breakpoint the service looks back up to LOOKBACK_BLOCKS blocks for a prefix an
earlier request wrote, which is how each turn of a conversation marked at its end reads the turns
before it. The real service bills the first request with a prefix for the write and later ones
for reads, so a real bill follows the order calls land in; here whether a written prefix is
still warm is drawn from the prefix and the request itself (WARM_SHARE of the time): the same
request always costs the same, so twin runs cost the same to the last digit and a run's spend is
a function of its ledger."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from optimizer.sim.protocol import tokens
from optimizer.sim.text import canonical

ATTACHMENT_TOKENS = 1_600  # an image or a PDF is billed by what it shows, not by its base64
LOOKBACK_BLOCKS = 20  # how far back from a breakpoint the service looks for a cached prefix
WARM_SHARE = 0.75  # of requests that find a cacheable prefix already written


@dataclass(frozen=True)
class Boundary:
    """The end of one block of the request: the prefix's length, its digest, whether the block
    carries a breakpoint, and whether it ends an earlier turn of the conversation (where the
    request before this one put its own breakpoint)."""

    chars: int
    digest: str
    marked: bool
    turn_end: bool
    newest: bool  # a block of the last message: the turn being asked, which no request wrote


def input_usage(body: dict, seed: int, minimum_tokens: int) -> dict[str, int]:
    """input_tokens, cache_creation_input_tokens and cache_read_input_tokens of a request."""
    ends = boundaries(body)
    total = ends[-1].chars if ends else 0
    cacheable = [i for i, end in enumerate(ends) if tokens(end.chars) >= minimum_tokens]
    marks = [i for i in cacheable if ends[i].marked]
    whole = ends[-1].digest if ends else ""
    # Earlier turns' ends were written by the requests before this one only when the
    # conversation is marked at its end (by the same client, turn after turn).
    conversation = bool(ends) and ends[-1].marked
    readable = {
        j
        for i in marks
        for j in cacheable
        if i - LOOKBACK_BLOCKS <= j <= i
        and not ends[j].newest
        and (j == i or (conversation and ends[j].turn_end))
    }
    read = max((ends[j].chars for j in readable if _warm(seed, ends[j].digest, whole)), default=0)
    written = max((ends[i].chars for i in marks), default=0)
    return {
        "input_tokens": tokens(total - written),
        "cache_creation_input_tokens": tokens(written - read),
        "cache_read_input_tokens": tokens(read),
    }


def boundaries(body: dict) -> list[Boundary]:
    """Every block's end, in the order the service reads them: tools, system, messages."""
    system = body.get("system") or []
    tools = [(tool, False, False) for tool in body.get("tools") or []]
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
    segments: list[tuple[object, bool, bool]] = [*tools, *((b, False, False) for b in blocks)]
    messages = body.get("messages") or []
    for number, message in enumerate(messages):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        newest = number == len(messages) - 1
        last_of_earlier_turn = message.get("role") == "user" and not newest
        segments += [
            (block, last_of_earlier_turn and k == len(blocks) - 1, newest)
            for k, block in enumerate(blocks)
        ]
    digest, chars, ends = hashlib.sha256(), 0, []
    for segment, turn_end, newest in segments:
        text = canonical(segment)
        digest.update(text.encode())
        chars += len(text) if not _attached(segment) else 4 * ATTACHMENT_TOKENS
        marked = isinstance(segment, dict) and bool(segment.get("cache_control"))
        ends.append(Boundary(chars, digest.copy().hexdigest(), marked, turn_end, newest))
    return ends


def _attached(segment: object) -> bool:
    return isinstance(segment, dict) and segment.get("type") in ("image", "document")


def _warm(seed: int, prefix: str, request: str) -> bool:
    draw = hashlib.sha256(f"{seed}\0warm\0{prefix}\0{request}".encode()).digest()
    return int.from_bytes(draw[:8], "big") / 2**64 < WARM_SHARE
