"""What the calls in flight are made for (a version label, "baseline"), and how many retries they
scheduled. Holds context only: it must never make a call or touch the ledger."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

# Set by the stage that makes the calls and recorded per call, so lineage can show the cost of
# each version.
scope: contextvars.ContextVar[str | None] = contextvars.ContextVar("scope", default=None)

# Retries scheduled by calls made inside counting_retries(): an executor whose run passed its
# time limit while the provider was failing knows the time was ours, not the agent's.
_retries_here: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "retries_here", default=None)


@contextmanager
def scoped(name: str) -> Iterator[None]:
    """Every model call made inside (and in tasks created inside) is recorded as made for `name`."""
    token = scope.set(name)
    try:
        yield
    finally:
        scope.reset(token)


@contextmanager
def counting_retries() -> Iterator[list[int]]:
    """A one-item list holding how many retries the calls made inside have scheduled so far."""
    tally = [0]
    token = _retries_here.set(tally)
    try:
        yield tally
    finally:
        _retries_here.reset(token)


def note_retry() -> None:
    """Count one scheduled retry in the innermost counting_retries(), if any."""
    if (here := _retries_here.get()) is not None:
        here[0] += 1
