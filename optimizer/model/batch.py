"""Batch mode (`llm.batch`, `optimizer run --batch`): the first attempt of every grader, comparator
and analyzer call of a stage goes out as one Message Batch, at the batch price. Never pays twice:
answers land in the same `calls` ledger rows as direct calls, and a batch is recorded in state.db
as soon as the service acknowledges it, so a resumed run re-attaches to it instead of resending.

How a stage becomes one batch:
- `ModelClient.structured` sends its first attempt with `batch=True`; the client hands such a call
  of a batch role to `BatchCollector.call`, which queues it and awaits a future. The repair
  attempt after an invalid answer goes direct, as does everything of the other roles.
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
  caller sees it.
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
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anthropic
import structlog
from anthropic.types import Message
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from optimizer.errors import OptimizerError
from optimizer.logs import redact
from optimizer.model.client import call_cost, retry_cause, scope
from optimizer.store.db import now

if TYPE_CHECKING:
    from optimizer.model.client import ModelClient

log = structlog.get_logger()

BATCH_ROLES = frozenset({"grader", "comparator", "analyzer"})
BATCH_PRICE_FACTOR = 0.5  # Message Batches cost half the standard price, every token kind
MAX_BATCH_BYTES = 200_000_000  # under the API's 256 MB per batch
SAMPLES_HEADER = "x-optimizer-samples"  # the simulator's only way to see each item's sample index
T = TypeVar("T")


@dataclass(eq=False)
class _Producer:
    collector: BatchCollector
    blocked: int = 0  # batched answers this producer is waiting for


_current: contextvars.ContextVar[_Producer | None] = contextvars.ContextVar("batch_producer", default=None)


@dataclass(eq=False)
class _Item:
    role: str
    model: str
    sample: int
    key: str
    request: dict[str, Any]
    scope: str | None
    future: asyncio.Future
    producer: _Producer | None
    size: int
    enqueued: float = field(default_factory=time.perf_counter)

    def meta(self) -> dict[str, Any]:
        return {"role": self.role, "model": self.model, "sample": self.sample, "scope": self.scope}


def active(client: Any) -> bool:
    """True when the client sends batch-role calls through Message Batches."""
    return getattr(client, "batch", None) is not None


def producer(client: Any) -> Any:
    """Mark the calling task as one unit of a stage: while any unit is neither waiting on a batched
    answer nor finished, the stage's batch is held for it. A no-op without batch mode."""
    collector = getattr(client, "batch", None)
    return collector.producer() if collector is not None else nullcontext()


class BatchCollector:
    """The batch half of one ModelClient (one per process, like the client)."""

    def __init__(self, client: ModelClient) -> None:
        self.client = client
        self.llm = client.settings.llm
        self._pending: list[_Item] = []
        self._pending_bytes = 0
        self._producers: set[_Producer] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        self._waiting: dict[str, list[_Item]] = {}  # custom_id → callers of a batch in flight
        self._watchers: dict[str, asyncio.Task] = {}  # batch id → the task collecting it
        self._attached: dict[str, str] | None = None  # custom_id → batch of an earlier process
        self._attached_items: dict[str, dict[str, dict]] = {}
        self._unsupported = False
        self.stats: Counter[str] = Counter()

    def handles(self, role: str) -> bool:
        return role in BATCH_ROLES and not self._unsupported

    # -- producers ------------------------------------------------------------------------------

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

    # -- the caller's side ----------------------------------------------------------------------

    async def call(self, role: str, model: str, sample: int, key: str, request: dict[str, Any]) -> Message:
        """The answer to one request, through a batch (this stage's, or one still in flight from
        an earlier process). The caller holds the client's per-request lock and has checked the
        ledger, so the same request is never queued twice."""
        unit = _current.get()
        item = _Item(role, model, sample, key, request, scope.get(), asyncio.get_running_loop().create_future(),
                     unit if unit is not None and unit.collector is self else None,
                     len(json.dumps(request, ensure_ascii=False)))
        earlier = self._attached_map().get(key)
        if earlier is not None:
            self._waiting.setdefault(key, []).append(item)
            self._watch(earlier)
        else:
            self._pending.append(item)
            self._pending_bytes += item.size
        if item.producer is not None:
            item.producer.blocked += 1
        self._kick()
        try:
            return await item.future
        finally:
            if item.producer is not None:
                item.producer.blocked -= 1
            if item in self._pending:  # the caller was canceled before the batch was sent
                self._pending.remove(item)
                self._pending_bytes -= item.size
                self._kick()

    # -- when to send ---------------------------------------------------------------------------

    def _kick(self) -> None:
        if not self._pending:
            self._cancel_timer()
            return
        if len(self._pending) >= self.llm.batch_max_requests or self._pending_bytes >= MAX_BATCH_BYTES:
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
        items, size = [], 0
        while self._pending and len(items) < self.llm.batch_max_requests:
            if items and size + self._pending[0].size > MAX_BATCH_BYTES:
                break
            item = self._pending.pop(0)
            items.append(item)
            size += item.size
        self._pending_bytes -= size
        if items:
            self._spawn(self._safely(self._send(items), [item.key for item in items]))
        if self._pending:
            self._kick()

    async def _safely(self, work: Awaitable[None], keys: list[str]) -> None:
        """A batch's task never dies silently: its callers get whatever stopped it."""
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error("batch.failed", error=redact(f"{type(exc).__name__}: {exc}"))
            self._fail(keys, exc)

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- one batch ------------------------------------------------------------------------------

    async def _send(self, items: list[_Item]) -> None:
        for item in items:
            self._waiting.setdefault(item.key, []).append(item)
        if self._unsupported:
            await self._direct([item.key for item in items], "batch mode is off")
            return
        requests = [{"custom_id": item.key, "params": item.request} for item in items]
        headers = {}
        if self.client.simulated:
            headers[SAMPLES_HEADER] = json.dumps({i.key[:16]: i.sample for i in items if i.sample})
        sdk = self.client._anthropic
        try:
            batch = await self._retrying(
                lambda: sdk.messages.batches.create(requests=requests, extra_headers=headers),
                ambiguous_ok=False,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = self._systemic(exc)
            if failure is not None:
                self._fail([item.key for item in items], failure)
                return
            if _unsupported(exc):
                self._unsupported = True
                log.warning("batch.unsupported", error=redact(str(exc)),
                            hint="the server has no Message Batches endpoints; calls go direct")
            else:
                log.warning("batch.create_failed", requests=len(items), error=redact(str(exc)))
            await self._direct([item.key for item in items], "the batch could not be created")
            return
        metas = {item.key: item.meta() for item in items}
        scopes = sorted({str(item.scope) for item in items if item.scope})
        # Recorded before any answer is handed back: a resumed run re-attaches to this id.
        with self.client.store.atomic():
            self.client.store.upsert("batches", {
                "id": batch.id, "scope": ", ".join(scopes) or None,
                "roles": ",".join(sorted({item.role for item in items})),
                "custom_ids_json": json.dumps(list(metas)), "items_json": json.dumps(metas),
                "status": "in_progress", "created_at": now(),
            }, pk="id")
        self.stats["batches"] += 1
        self.stats["requests"] += len(items)
        log.info("batch.submitted", batch_id=batch.id, requests=len(items), scope=", ".join(scopes),
                 roles=sorted({item.role for item in items}))
        await self._collect(batch.id, metas)

    def _watch(self, batch_id: str) -> None:
        if batch_id in self._watchers:
            return
        self.stats["reattached"] += 1
        log.info("batch.reattached", batch_id=batch_id)
        metas = self._attached_items.get(batch_id, {})
        self._watchers[batch_id] = self._spawn(self._safely(self._collect(batch_id, metas), list(metas)))

    async def _collect(self, batch_id: str, metas: dict[str, dict]) -> None:
        """Poll until the batch ends, then join its results by custom_id."""
        sdk = self.client._anthropic
        wait = self.llm.batch_poll_s
        while True:
            try:
                batch = await self._retrying(lambda: sdk.messages.batches.retrieve(batch_id))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = self._systemic(exc)
                if failure is not None:
                    self._fail(list(metas), failure)
                    return
                if isinstance(exc, anthropic.NotFoundError):
                    await self._lost(batch_id, metas, "the service no longer knows the batch")
                    return
                log.warning("batch.poll_failed", batch_id=batch_id, error=redact(str(exc)))
                batch = None
            if batch is not None and batch.processing_status == "ended":
                break
            await asyncio.sleep(wait)
            wait = min(wait * 1.5, self.llm.batch_poll_max_s)
        try:
            results = await self._retrying(lambda: _fetch(sdk, batch_id))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = self._systemic(exc)
            if failure is not None:
                self._fail(list(metas), failure)
                return
            await self._lost(batch_id, metas, f"its results could not be read ({redact(str(exc))})")
            return
        redo, counts = [], Counter()
        for key, meta in metas.items():
            if self._attached is not None:
                self._attached.pop(key, None)
            result = results.get(key)
            kind = getattr(result, "type", "missing")
            counts[kind] += 1
            if kind != "succeeded":
                detail = getattr(getattr(getattr(result, "error", None), "error", None), "type", None)
                log.info("batch.item_not_answered", batch_id=batch_id, hash=key[:12], result=kind,
                         error=detail)
                redo.append(key)
                continue
            message = self._record(key, meta, result.message, batch_id)
            for item in self._waiting.pop(key, []):
                if not item.future.done():
                    item.future.set_result(message)
        with self.client.store.atomic():
            self.client.store.db["batches"].update(batch_id, {
                "status": "ended", "ended_at": now(), "counts_json": json.dumps(dict(counts))})
        log.info("batch.ended", batch_id=batch_id, **dict(counts))
        await self._direct(redo, "not answered in the batch")

    async def _lost(self, batch_id: str, metas: dict[str, dict], why: str) -> None:
        log.warning("batch.lost", batch_id=batch_id, reason=why)
        with self.client.store.atomic():
            self.client.store.db["batches"].update(batch_id, {"status": "lost", "ended_at": now()})
        for key in metas:
            if self._attached is not None:
                self._attached.pop(key, None)
        await self._direct(list(metas), why)

    async def _direct(self, keys: list[str], why: str) -> None:
        """Send each waiting request directly, with the client's retries, at the standard price."""
        jobs = [(key, items) for key in keys if (items := self._waiting.pop(key, []))]
        if not jobs:
            return
        self.stats["direct"] += len(jobs)
        log.info("batch.sent_direct", requests=len(jobs), reason=why)

        async def one(key: str, items: list[_Item]) -> None:
            first = items[0]
            try:
                message = await self.client._call(first.role, first.model, first.sample, key,
                                                   first.request, False)
            except asyncio.CancelledError:
                for item in items:
                    item.future.cancel()
                raise
            except Exception as exc:  # the callers get the failure, as a direct call would
                for item in items:
                    if not item.future.done():
                        item.future.set_exception(exc)
                return
            for item in items:
                if not item.future.done():
                    item.future.set_result(message)

        await asyncio.gather(*(one(key, items) for key, items in jobs))

    def _fail(self, keys: list[str], failure: BaseException) -> None:
        for key in keys:
            for item in self._waiting.pop(key, []):
                if not item.future.done():
                    item.future.set_exception(failure)

    def _record(self, key: str, meta: dict[str, Any], message: Message, batch_id: str) -> Message:
        """The answer into the ledger at the batch price, committed before any caller sees it."""
        existing = self.client.store.completed_call(key)
        if existing is not None:  # answered meanwhile (a direct call): never counted twice
            return Message.model_validate(json.loads(existing["response_json"]))
        data = message.model_dump(mode="json", exclude_none=True, warnings=False)
        usage = message.usage
        model = meta.get("model") or message.model
        cost = call_cost(self.client.settings.price(model), usage) * BATCH_PRICE_FACTOR
        waited = [i.enqueued for i in self._waiting.get(key, [])]
        latency_ms = (time.perf_counter() - min(waited)) * 1000 if waited else 0.0
        self.client.store.record_call({
            "hash": key, "role": meta["role"], "model": model, "sample": int(meta.get("sample") or 0),
            "outcome": "ok", "response_json": json.dumps(data, ensure_ascii=False),
            "input_tokens": usage.input_tokens or 0, "output_tokens": usage.output_tokens or 0,
            "cache_write_tokens": usage.cache_creation_input_tokens or 0,
            "cache_read_tokens": usage.cache_read_input_tokens or 0,
            "cost_usd": cost, "latency_ms": latency_ms, "attempts": 1, "error": None,
            "scope": meta.get("scope"), "batch_id": batch_id,
        })
        self.client._calls += 1
        self.client._spent += cost
        self.stats["answers"] += 1
        log.debug("llm.call_completed", hash=key, role=meta["role"], model=model,
                  sample=meta.get("sample"), input_tokens=usage.input_tokens,
                  output_tokens=usage.output_tokens, cost_usd=cost, batch_id=batch_id)
        return Message.model_validate(data)

    # -- helpers --------------------------------------------------------------------------------

    def _attached_map(self) -> dict[str, str]:
        """custom_id → id of a batch an earlier process left in flight (read once)."""
        if self._attached is None:
            self._attached = {}
            for row in self.client.store.query("select id, items_json from batches where status = 'in_progress'"):
                items = json.loads(row["items_json"] or "{}")
                self._attached_items[row["id"]] = items
                for key in items:
                    self._attached[key] = row["id"]
        return self._attached

    async def _retrying(self, fn: Callable[[], Awaitable[T]], *, ambiguous_ok: bool = True) -> T:
        """The client's retry policy for a batch endpoint. A create that timed out or was cut is
        not repeated (it may have been accepted, and a second one would be paid again)."""
        def transient(exc: BaseException) -> bool:
            cause = retry_cause(exc)
            return cause is not None and (ambiguous_ok or cause not in ("timeout", "truncated"))

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.llm.max_attempts), wait=self.client._wait,
            retry=retry_if_exception(transient), sleep=self.client._do_sleep, reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await fn()
        raise AssertionError("unreachable")  # pragma: no cover

    def _systemic(self, exc: BaseException) -> OptimizerError | None:
        if isinstance(exc, OptimizerError):
            return exc
        if isinstance(exc, anthropic.APIStatusError):
            return self.client._not_retryable(exc)
        return None

    async def aclose(self) -> None:
        """Stop polling; batches in flight stay recorded for the next process to collect."""
        self._cancel_timer()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for item in [*self._pending, *(i for items in self._waiting.values() for i in items)]:
            item.future.cancel()  # a caller still waiting is not left hanging
        self._pending.clear()
        self._pending_bytes = 0
        self._waiting.clear()


async def _fetch(sdk: anthropic.AsyncAnthropic, batch_id: str) -> dict[str, Any]:
    results = {}
    decoder = await sdk.messages.batches.results(batch_id)
    async for entry in decoder:
        results[entry.custom_id] = entry.result
    return results


def _unsupported(exc: BaseException) -> bool:
    return isinstance(exc, anthropic.APIStatusError) and exc.status_code in (404, 405)


__all__ = ["BATCH_PRICE_FACTOR", "BATCH_ROLES", "BatchCollector", "active", "producer"]
