"""USD for a model call: the price of an answer's usage, an estimate before a call, the batch
discount, and which price an unlisted model gets. Arithmetic only: never reads the ledger and never
decides about a budget."""

from __future__ import annotations

from typing import Any

import structlog

from optimizer.config import Settings
from optimizer.prices import Price, quoted
from optimizer.store.rows import RoleLongest

log = structlog.get_logger()

BATCH_PRICE_FACTOR = 0.5  # Message Batches cost half the standard price, every token kind
# The roles whose calls may go through a batch: one answer per run or pair, none waited on by a
# next turn (the executor and the proposer are never batched).
BATCH_ROLES = frozenset({"grader", "comparator", "analyzer"})


def call_cost(price: Price, usage: Any) -> float:
    """USD for one answer's usage; input, output, cache writes and cache reads each at their rate."""
    return (
        (usage.input_tokens or 0) * price.input
        + (usage.output_tokens or 0) * price.output
        + (getattr(usage, "cache_creation_input_tokens", 0) or 0) * price.cache_write
        + (getattr(usage, "cache_read_input_tokens", 0) or 0) * price.cache_read
    ) / 1_000_000


def estimate_cost(price: Price, request_chars: int, max_tokens: int) -> float:
    """An upper-leaning estimate before the call: the whole request JSON at 4 characters a token
    (its keys and quoting over-count the text), priced at the dearer of input and cache write,
    plus max_tokens of output, which the answer can never exceed."""
    prompt = request_chars / 4 * max(price.input, price.cache_write)
    return (prompt + max_tokens * price.output) / 1_000_000


_warned: set[str] = set()  # models warned about in this process


def unpriced(settings: Settings, model: str) -> str | None:
    """The listed model that an unlisted one is priced as (the most expensive, so a budget is
    never under-counted); None when the model, or a prefix of its name, has a price."""
    name = settings.priced_as(model)
    return None if model.startswith(name) else name


def unpriced_note(model: str, fallback: str) -> str:
    key = f"prices.{quoted(model)}"
    return (
        f"{model} has no price: priced as {fallback}; set {key} to correct it "
        f"(--set '{key}=0' for a free model)"
    )


def price_for(settings: Settings, model: str) -> Price:
    """settings.price(model), warning once per process when the model is priced as another: a
    free local model would otherwise drain the budget at the dearest rate, unexplained."""
    fallback = unpriced(settings, model)
    if fallback is not None and model not in _warned:
        _warned.add(model)
        log.warning(
            "prices.unknown_model",
            model=model,
            priced_as=fallback,
            hint=unpriced_note(model, fallback),
        )
    return settings.price(model)


class Outputs:
    """The longest answer of each role so far, in output tokens, so that the cost guard before a
    call prices the answer it can expect, not max_tokens of it (docs/design.md §9): the worst
    case is ten to fifty times a typical answer and stopped runs dollars short of their budget.
    Until MEASURED answers of a role are known, its worst case stands."""

    MEASURED = 3
    MARGIN = 2.0  # an answer twice the longest yet still fits, plus a fixed 256 tokens

    def __init__(self, rows: list[RoleLongest] | None = None) -> None:
        self.longest: dict[str, int] = {}
        self.seen: dict[str, int] = {}
        for row in rows or []:
            if (longest := row.get("longest")) is not None:
                self.longest[row["role"]] = int(longest)
                self.seen[row["role"]] = int(row.get("n") or 0)

    def add(self, role: str, output_tokens: int | None) -> None:
        if output_tokens:
            self.longest[role] = max(self.longest.get(role, 0), output_tokens)
            self.seen[role] = self.seen.get(role, 0) + 1

    def bound(self, role: str, max_tokens: int) -> int:
        if self.seen.get(role, 0) < self.MEASURED:
            return max_tokens
        return min(max_tokens, int(self.longest[role] * self.MARGIN) + 256)
