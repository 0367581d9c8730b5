"""Batch mode (`llm.batch`): the first attempt of a stage's grader, comparator and analyzer calls
goes out as one Message Batch, at half the price. Never pays twice, never holds a call forever.

Answers land in the same `calls` ledger rows as direct calls, and a batch is recorded in state.db
as soon as the service acknowledges it, so a resumed run re-attaches to it instead of resending.

How a stage becomes one batch:
- `ModelClient.structured` sends its first attempt with `batch=True`; the client hands such a call
  of a batch role to `BatchCollector.call` (make_client gives the client its collector), which
  queues it and awaits a future. The repair attempt after an invalid answer goes direct, as does
  everything of the other roles.
- The queue is sent when it stops growing: at once when every *producer* (a unit of the
  Evaluator, marked with `producer(client)`) is waiting on a batched answer or has finished;
  when units are still executing, after `llm.batch_hold_s` without a new call (so a stage of long
  runs sends a batch per wave rather than hold answers back, and nothing can wait forever);
  with no producer at all (the comparator and analyzer calls, which come all at once), after
  `llm.batch_settle_s` without a new call; and whenever `llm.batch_max_requests` (or ~200 MB)
  is reached.
- custom_id is the ledger's request hash. The batch is polled with a growing wait
  (`llm.batch_poll_s` × 1.5 per look, at most `llm.batch_poll_max_s`), its results are joined back
  by custom_id (they come in any order), and each answer is written to the ledger before its
  caller sees it (batch_send.py).
- Requests to the batch endpoints go through the client's one retry policy, one
  `llm.retry_scheduled` event per retry (`what`: batch_create, batch_poll, batch_results).
- An item that errored, expired, was canceled or is missing from the results is sent directly
  (the client's own retries apply, at the standard price). A server without the batch endpoints
  (a 404 or 405, as from many Messages-API compatible servers) turns batch mode off for the
  process and every call goes direct.

Cost: Message Batches are billed at 50% of the standard price for every token kind (input,
output, cache writes and reads), so a batched answer's ledger cost is `call_cost(...) × 0.5`
(BATCH_PRICE_FACTOR). The discount covers only the roles batched here.

Resume: the `batches` table holds id, scope, roles, custom_ids, each item's role/model/sample/scope
and a status (in_progress → ended, or lost). A new client loads the batches still in_progress; a
call whose request hash is in one of them waits for that batch instead of joining a new one, and
every succeeded item of it is written to the ledger whether or not anyone asks for it yet. The one
window left is between the service's acknowledgement of a create and the SQLite commit right
after it: a kill exactly there leaves a batch nobody collects (its requests are sent again).
A create that failed for good (retries spent) also sends its items directly; a create that timed
out is not retried, since it may have been accepted."""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from anthropic.types import Message

from optimizer.model.batch_api import BatchItem
from optimizer.model.batch_send import BatchSender
from optimizer.model.client import ModelClient
from optimizer.model.cost import BATCH_PRICE_FACTOR, BATCH_ROLES
from optimizer.model.port import Client
from optimizer.model.scopes import scope

MAX_BATCH_BYTES = 200_000_000  # under the API's 256 MB per batch


@dataclass(eq=False)
class _Producer:
    collector: BatchCollector
    blocked: int = 0  # batched answers this producer is waiting for


_current: contextvars.ContextVar[_Producer | None] = contextvars.ContextVar(
    "batch_producer", default=None
)


def active(client: Client | None) -> bool:
    """True when the client sends batch-role calls through Message Batches."""
    return client is not None and client.batch is not None


def producer(client: Client | None) -> AbstractContextManager[None]:
    """Mark the calling task as one unit of a stage: while any unit is neither waiting on a batched
    answer nor finished, the stage's batch is held for it. A no-op without batch mode."""
    collector = client.batch if client is not None else None
    return collector.producer() if collector is not None else nullcontext()


class BatchCollector:
    """The batch route of one ModelClient (one per process, like the client): gathers a stage's
    calls and decides when they go; its BatchSender sees each batch through."""

    def __init__(self, client: ModelClient) -> None:
        self.llm = client.settings.llm
        self.sender = BatchSender(client)
        self._pending: list[BatchItem] = []
        self._pending_bytes = 0
        self._producers: set[_Producer] = set()
        self._timer: asyncio.TimerHandle | None = None

    @property
    def stats(self) -> Counter[str]:
        """Batches sent and re-attached, requests batched, answers joined, requests sent direct."""
        return self.sender.stats

    def handles(self, role: str) -> bool:
        return role in BATCH_ROLES and not self.sender.unsupported

    @contextmanager
    def producer(self) -> Iterator[None]:
        unit = _Producer(self)
        self._producers.add(unit)
        token = _current.set(unit)
        try:
            yield
        finally:
            _current.reset(token)
            self._producers.discard(unit)
            self._kick()

    async def call(
        self, role: str, model: str, sample: int, key: str, request: dict[str, Any]
    ) -> Message:
        """The answer to one request, through a batch (this stage's, or one still in flight from
        an earlier process). The caller holds the client's per-request lock and has checked the
        ledger, so the same request is never queued twice."""
        unit = _current.get()
        mine = unit if unit is not None and unit.collector is self else None
        item = BatchItem(
            role,
            model,
            sample,
            key,
            request,
            scope.get(),
            asyncio.get_running_loop().create_future(),
            len(json.dumps(request, ensure_ascii=False)),
        )
        earlier = self.sender.earlier_batch(key)
        if earlier is not None:
            self.sender.wait_for_earlier(earlier, item)
        else:
            self._pending.append(item)
            self._pending_bytes += item.size
        if mine is not None:
            mine.blocked += 1
        self._kick()
        try:
            return await item.future
        finally:
            if mine is not None:
                mine.blocked -= 1
            if item in self._pending:  # the caller was canceled before the batch was sent
                self._pending.remove(item)
                self._pending_bytes -= item.size
                self._kick()

    async def aclose(self) -> None:
        """Stop polling; batches in flight stay recorded for the next process to collect."""
        self._cancel_timer()
        await self.sender.aclose()
        for item in self._pending:
            item.future.cancel()  # a caller still waiting is not left hanging
        self._pending.clear()
        self._pending_bytes = 0

    # -- when to send ---------------------------------------------------------------------------

    def _kick(self) -> None:
        if not self._pending:
            self._cancel_timer()
            return
        if (
            len(self._pending) >= self.llm.batch_max_requests
            or self._pending_bytes >= MAX_BATCH_BYTES
        ):
            self._flush()
            return
        if self._producers:
            if all(unit.blocked for unit in self._producers):
                self._schedule(0.0)  # every unit of the stage is waiting: nothing more will come
            else:  # a unit is still executing; its grader call joins this batch, within limits
                self._schedule(self.llm.batch_hold_s)
            return
        self._schedule(self.llm.batch_settle_s)

    def _schedule(self, delay: float) -> None:
        self._cancel_timer()
        self._timer = asyncio.get_running_loop().call_later(delay, self._flush)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _flush(self) -> None:
        self._timer = None
        items: list[BatchItem] = []
        size = 0
        while self._pending and len(items) < self.llm.batch_max_requests:
            if items and size + self._pending[0].size > MAX_BATCH_BYTES:
                break
            item = self._pending.pop(0)
            items.append(item)
            size += item.size
        self._pending_bytes -= size
        if items:
            self.sender.launch(items)
        if self._pending:
            self._kick()


__all__ = ["BATCH_PRICE_FACTOR", "BATCH_ROLES", "BatchCollector", "active", "producer"]
