"""What the Claude API says of each model it serves, as its documentation gives it on 2026-11-12
(docs/real-api.md names the pages): the price, the minimum cacheable prefix, the output ceiling,
whether it thinks by default and whether it refuses a forced tool, and the date it was retired.
The one table: the client prices and marks its calls by it, the preflight checks a night's models
against it, and the simulator refuses what the API refuses by it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from optimizer.prices import Price


@dataclass(frozen=True)
class ModelFacts:
    price: Price
    cache_minimum_tokens: int  # a marked prefix shorter than this is neither written nor read
    max_output_tokens: int
    # Thinking on unless the request turns it off, or on whatever the request says.
    thinks_by_default: bool = False
    # tool_choice {"type": "tool"} or {"type": "any"} answered with a 400 invalid_request_error.
    refuses_forced_tool: bool = False
    retired: str | None = None  # ISO date from which the API answers 404 for it


def _price(inp: float, out: float, read: float) -> Price:
    # A 5-minute cache write costs 1.25 times input for every model; reads differ by model.
    return Price(input=inp, output=out, cache_write=inp * 1.25, cache_read=read)


K = 1000
MODELS: dict[str, ModelFacts] = {
    # Current. Fable 5.2's forced-tool rule is Fable 5.1's (its page lists no change).
    "claude-fable-5-2": ModelFacts(_price(8, 40, 0.20), 512, 128 * K, True, True),
    "claude-opus-5-5": ModelFacts(_price(4, 20, 0.20), 512, 128 * K, True, True),
    "claude-sonnet-5-5": ModelFacts(_price(2, 10, 0.10), 512, 128 * K, True, True),
    # Haiku 5.5's price for prompts up to 100,000 tokens (five times that past them).
    "claude-haiku-5-5": ModelFacts(_price(0.10, 0.50, 0.01), 512, 128 * K, True),
    # Legacy, still served.
    "claude-fable-5-1": ModelFacts(_price(10, 50, 0.25), 512, 128 * K, True, True),
    "claude-fable-5": ModelFacts(_price(10, 50, 1.00), 512, 128 * K, True),
    "claude-opus-5": ModelFacts(_price(5, 25, 0.50), 512, 128 * K, True),
    "claude-sonnet-5": ModelFacts(_price(2, 10, 0.20), 1024, 128 * K, True),
    "claude-opus-4-8": ModelFacts(_price(5, 25, 0.50), 1024, 128 * K),
    "claude-opus-4-7": ModelFacts(_price(5, 25, 0.50), 2048, 128 * K),
    "claude-opus-4-6": ModelFacts(_price(5, 25, 0.50), 4096, 128 * K),
    # The caching page says 1,024; requests observed caching nothing below 2,048 (the stricter).
    "claude-sonnet-4-6": ModelFacts(_price(3, 15, 0.30), 2048, 128 * K),
    "claude-haiku-4-5": ModelFacts(_price(1, 5, 0.10), 4096, 64 * K),
    "claude-opus-4-5": ModelFacts(_price(5, 25, 0.50), 4096, 64 * K),
    "claude-sonnet-4-5": ModelFacts(_price(3, 15, 0.30), 1024, 64 * K, retired="2026-11-30"),
    # Retired: a request names them to a 404.
    "claude-opus-4-1": ModelFacts(_price(15, 75, 1.50), 1024, 32 * K, retired="2026-08-05"),
}

# The defaults of a night's roles: the documentation's recommended model for the work that needs
# judgment, its cheapest current one for the routing probe.
DEFAULT_MODELS = {
    "executor": "claude-sonnet-5-5",
    "grader": "claude-opus-5-5",
    "comparator": "claude-opus-5-5",
    "analyzer": "claude-opus-5-5",
    "proposer": "claude-opus-5-5",
    "trigger": "claude-haiku-5-5",
}

# A model the catalog does not list (a local server's, a name newer than this table): the
# strictest figures, so that nothing is assumed to be cached or allowed that might not be.
UNLISTED = ModelFacts(_price(15, 75, 1.50), 4096, 8192, thinks_by_default=True)


def listed(model: str) -> str | None:
    """The catalog's name for `model`: itself, or the listed name a dated one extends
    ("claude-haiku-4-5-20251001"); None when the catalog does not know it."""
    if model in MODELS:
        return model
    return next((name for name in MODELS if model.startswith(name + "-20")), None)


def facts(model: str) -> ModelFacts:
    name = listed(model)
    return MODELS[name] if name is not None else UNLISTED


def retired(model: str, today: dt.date | None = None) -> str | None:
    """The date `model` was retired, when it is by `today`; None while the API serves it."""
    date = facts(model).retired if listed(model) else None
    if date is None or dt.date.fromisoformat(date) > (today or dt.date.today()):
        return None
    return date


def served(today: dt.date | None = None) -> list[str]:
    """The names the API serves by `today`, in the catalog's order."""
    return [name for name in MODELS if retired(name, today) is None]


# The prices a settings file starts from: every model the catalog lists, retired ones included
# (a resumed night of theirs is still priced; the preflight refuses a new call to them).
DEFAULT_PRICES = {name: model.price for name, model in MODELS.items()}
