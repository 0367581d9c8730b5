"""What the calls in flight are made for (a version label, "baseline"). Holds context only: it must
never make a call or touch the ledger. The model layer's other context is the run clock
(clock.py: a run's time waiting on the provider) and the batch producer (batch.py)."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

# Set by the stage that makes the calls and recorded per call, so lineage can show the cost of
# each version.
scope: contextvars.ContextVar[str | None] = contextvars.ContextVar("scope", default=None)


@contextmanager
def scoped(name: str) -> Iterator[None]:
    """Every model call made inside (and in tasks created inside) is recorded as made for `name`."""
    token = scope.set(name)
    try:
        yield
    finally:
        scope.reset(token)
