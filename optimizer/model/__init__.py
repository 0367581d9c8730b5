"""The one model client and all a model call needs: one retry policy, the adaptive rate limit, the
ledger as cache, cost and budget, structured answers through a forced tool, Message Batches
(batch.py) and prompt rendering (prompts.py). The stages it may import are MAY_IMPORT's
(pyproject.toml's contracts hold it to them); the shared modules are open to every stage.
It loads the offline simulator only when the sim provider is chosen. Callers import the names below
from `optimizer.model`; a test that replaces the client patches
`optimizer.model.factory.make_client`, which every command calls through its module."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from optimizer.model.client import ModelClient
    from optimizer.model.cost import (
        BATCH_PRICE_FACTOR,
        call_cost,
        estimate_cost,
        price_for,
        unpriced,
    )
    from optimizer.model.errors import ModelCallFailed, StructuredAnswerError
    from optimizer.model.factory import build_client, make_client
    from optimizer.model.limiter import AdaptiveLimiter
    from optimizer.model.request import canonical_json, plain, request_hash, with_cache_control
    from optimizer.model.retry import RetryPolicy, retry_cause
    from optimizer.model.scopes import scope, scoped

__all__ = [
    "BATCH_PRICE_FACTOR",
    "AdaptiveLimiter",
    "ModelCallFailed",
    "ModelClient",
    "RetryPolicy",
    "StructuredAnswerError",
    "build_client",
    "call_cost",
    "canonical_json",
    "estimate_cost",
    "make_client",
    "plain",
    "price_for",
    "request_hash",
    "retry_cause",
    "scope",
    "scoped",
    "unpriced",
    "with_cache_control",
]

# Loaded on first use, so the simulator and commands that only render prompts or read a scope
# never pay for importing the SDK.
_HOMES = {
    "ModelClient": "client",
    "BATCH_PRICE_FACTOR": "cost",
    "call_cost": "cost",
    "estimate_cost": "cost",
    "price_for": "cost",
    "unpriced": "cost",
    "ModelCallFailed": "errors",
    "StructuredAnswerError": "errors",
    "build_client": "factory",
    "make_client": "factory",
    "AdaptiveLimiter": "limiter",
    "canonical_json": "request",
    "plain": "request",
    "request_hash": "request",
    "with_cache_control": "request",
    "RetryPolicy": "retry",
    "retry_cause": "retry",
    "scope": "scopes",
    "scoped": "scopes",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ("store",)
