"""The Message Batches endpoints as batch_send.py meets them: one caller's request waiting in a
batch (BatchItem, its custom_id the ledger's request hash), the simulator's header of each item's
sample, a batch's results read back by custom_id, a server without the endpoints (404, 405),
which failures are systemic, and the role and model a batch's retry events name."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anthropic
from anthropic.types import Message
from anthropic.types.messages import MessageBatchResult

from optimizer.errors import OptimizerError
from optimizer.model.errors import account_error
from optimizer.store.rows import BatchMeta

SAMPLES_HEADER = "x-optimizer-samples"  # the simulator's only way to see each item's sample index


@dataclass(eq=False)
class BatchItem:
    """One caller's request waiting for its answer from a batch."""

    role: str
    model: str
    sample: int
    key: str  # the ledger's request hash, sent as the custom_id
    request: dict[str, Any]
    scope: str | None
    future: asyncio.Future[Message]
    size: int
    enqueued: float = field(default_factory=time.perf_counter)

    def meta(self) -> BatchMeta:
        return {"role": self.role, "model": self.model, "sample": self.sample, "scope": self.scope}


def labels(metas: Mapping[str, BatchMeta]) -> tuple[str, str]:
    """The role and model a batch's retry events name: those of its items, joined."""
    return (
        ",".join(sorted({str(m.get("role")) for m in metas.values()})),
        ",".join(sorted({str(m.get("model")) for m in metas.values()})),
    )


def systemic(exc: BaseException) -> OptimizerError | None:
    if isinstance(exc, OptimizerError):
        return exc
    if isinstance(exc, anthropic.APIStatusError):
        return account_error(exc)
    return None


async def fetch_results(
    sdk: anthropic.AsyncAnthropic, batch_id: str
) -> dict[str, MessageBatchResult]:
    results = {}
    decoder = await sdk.messages.batches.results(batch_id)
    async for entry in decoder:
        results[entry.custom_id] = entry.result
    return results


def unsupported(exc: BaseException) -> bool:
    return isinstance(exc, anthropic.APIStatusError) and exc.status_code in (404, 405)
