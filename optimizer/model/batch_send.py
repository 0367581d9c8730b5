"""Sends one Message Batch and sees it through: create, record in state.db, poll, join results by
custom_id, send the rest direct. Never uses an answer before its batch and its row are committed."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, TypeVar, cast

import anthropic
import structlog
from anthropic.types import Message
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from anthropic.types.messages import MessageBatchResult
from anthropic.types.messages.batch_create_params import Request

from optimizer.logs import redact
from optimizer.model import ledger
from optimizer.model.batch_api import (
    SAMPLES_HEADER,
    BatchItem,
    fetch_results,
    labels,
    systemic,
    unsupported,
)
from optimizer.model.cost import BATCH_PRICE_FACTOR, call_cost, price_for
from optimizer.store import batches
from optimizer.store.rows import BatchMeta

if TYPE_CHECKING:
    from optimizer.model.client import ModelClient

log = structlog.get_logger()

T = TypeVar("T")


class _Failed(Exception):
    """A systemic failure already handed to every caller waiting on a batch."""


class BatchSender:
    """The batches in flight of one client, this process's and those an earlier one left."""

    def __init__(self, client: ModelClient) -> None:
        self.client = client
        self.llm = client.settings.llm
        self.unsupported = False  # the server has no batch endpoints: every call goes direct
        self.stats: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiting: dict[str, list[BatchItem]] = {}  # custom_id → callers of a batch in flight
        self._watchers: dict[str, asyncio.Task[None]] = {}  # batch id → the task collecting it
        self._attached: dict[str, str] | None = None  # custom_id → batch of an earlier process
        self._attached_items: dict[str, dict[str, BatchMeta]] = {}

    def launch(self, items: list[BatchItem]) -> None:
        """Send the items as one batch, in a task of its own that hands each caller its answer."""
        self._spawn(self._safely(self._send(items), [item.key for item in items]))

    def earlier_batch(self, key: str) -> str | None:
        """The id of a batch an earlier process sent this request in, still in flight."""
        return self._attached_map().get(key)

    def wait_for_earlier(self, batch_id: str, item: BatchItem) -> None:
        self._waiting.setdefault(item.key, []).append(item)
        self._watch(batch_id)

    async def aclose(self) -> None:
        """Stop polling; batches in flight stay recorded for the next process to collect."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for items in self._waiting.values():
            for item in items:
                item.future.cancel()  # a caller still waiting is not left hanging
        self._waiting.clear()

    # -- one batch ------------------------------------------------------------------------------

    async def _send(self, items: list[BatchItem]) -> None:
        for item in items:
            self._waiting.setdefault(item.key, []).append(item)
        if self.unsupported:
            await self._direct([item.key for item in items], "batch mode is off")
            return
        requests = [
            Request(custom_id=item.key, params=cast(MessageCreateParamsNonStreaming, item.request))
            for item in items
        ]
        headers = {}
        if self.client.simulated:
            headers[SAMPLES_HEADER] = json.dumps({i.key[:16]: i.sample for i in items if i.sample})
        metas = {item.key: item.meta() for item in items}
        sdk = self.client.sdk
        try:
            # A create that timed out or was cut is not repeated: it may have been accepted.
            batch = await self._request(
                metas,
                "batch_create",
                lambda: sdk.messages.batches.create(requests=requests, extra_headers=headers),
                resend_ambiguous=False,
            )
        except _Failed:
            return
        except Exception as exc:
            if unsupported(exc):
                self.unsupported = True
                log.warning(
                    "batch.unsupported",
                    error=redact(str(exc)),
                    hint="the server has no Message Batches endpoints; calls go direct",
                )
            else:
                log.warning("batch.create_failed", requests=len(items), error=redact(str(exc)))
            await self._direct(list(metas), "the batch could not be created")
            return
        scopes = sorted({str(item.scope) for item in items if item.scope})
        # Recorded before any answer is handed back: a resumed run re-attaches to this id.
        batches.sent(
            self.client.store,
            batch.id,
            scope=", ".join(scopes) or None,
            roles=",".join(sorted({item.role for item in items})),
            items=metas,
        )
        self.stats["batches"] += 1
        self.stats["requests"] += len(items)
        log.info(
            "batch.submitted",
            batch_id=batch.id,
            requests=len(items),
            scope=", ".join(scopes),
            roles=sorted({item.role for item in items}),
        )
        await self._collect(batch.id, metas)

    async def _request(
        self, metas: dict[str, BatchMeta], what: str, send: Callable[[], Awaitable[T]], **kw: bool
    ) -> T:
        """One request to the batch endpoints through the client's one retry policy. A systemic
        failure (the budget, the provider down) is handed to every caller waiting on the batch
        and raised as _Failed; any other failure is raised as is, for the caller to go another
        way."""
        role, model = labels(metas)
        try:
            return await self.client.retry.call(send, what=what, role=role, model=model, **kw)
        except Exception as exc:  # CancelledError is not an Exception: it goes through
            failure = systemic(exc)
            if failure is None:
                raise
            self._fail(list(metas), failure)
            raise _Failed from exc

    def _watch(self, batch_id: str) -> None:
        if batch_id in self._watchers:
            return
        self.stats["reattached"] += 1
        log.info("batch.reattached", batch_id=batch_id)
        metas = self._attached_items.get(batch_id, {})
        self._watchers[batch_id] = self._spawn(
            self._safely(self._collect(batch_id, metas), list(metas))
        )

    async def _collect(self, batch_id: str, metas: dict[str, BatchMeta]) -> None:
        """Poll until the batch ends, then join its results by custom_id."""
        if not await self._ended(batch_id, metas):
            return
        sdk = self.client.sdk
        try:
            results = await self._request(
                metas, "batch_results", lambda: fetch_results(sdk, batch_id)
            )
        except _Failed:
            return
        except Exception as exc:
            await self._lost(batch_id, metas, f"its results could not be read ({redact(str(exc))})")
            return
        await self._join(batch_id, metas, results)

    async def _ended(self, batch_id: str, metas: dict[str, BatchMeta]) -> bool:
        """Wait, looking less often as time passes, until the batch ends (True) or its callers
        have been given another way (False)."""
        sdk = self.client.sdk
        wait = self.llm.batch_poll_s
        while True:
            try:
                batch = await self._request(
                    metas, "batch_poll", lambda: sdk.messages.batches.retrieve(batch_id)
                )
            except _Failed:
                return False
            except Exception as exc:
                if isinstance(exc, anthropic.NotFoundError):
                    await self._lost(batch_id, metas, "the service no longer knows the batch")
                    return False
                log.warning("batch.poll_failed", batch_id=batch_id, error=redact(str(exc)))
                batch = None
            if batch is not None and batch.processing_status == "ended":
                return True
            await asyncio.sleep(wait)
            wait = min(wait * 1.5, self.llm.batch_poll_max_s)

    async def _join(
        self, batch_id: str, metas: dict[str, BatchMeta], results: dict[str, MessageBatchResult]
    ) -> None:
        redo, counts = [], Counter[str]()
        for key, meta in metas.items():
            if self._attached is not None:
                self._attached.pop(key, None)
            result = results.get(key)
            kind = getattr(result, "type", "missing")
            counts[kind] += 1
            if result is None or result.type != "succeeded":
                detail = getattr(
                    getattr(getattr(result, "error", None), "error", None), "type", None
                )
                log.info(
                    "batch.item_not_answered",
                    batch_id=batch_id,
                    hash=key[:12],
                    result=kind,
                    error=detail,
                )
                redo.append(key)
                continue
            message = self._record(key, meta, result.message, batch_id)
            for item in self._waiting.pop(key, []):
                if not item.future.done():
                    item.future.set_result(message)
        batches.ended(self.client.store, batch_id, counts)
        log.info("batch.ended", batch_id=batch_id, **dict(counts))
        await self._direct(redo, "not answered in the batch")

    async def _lost(self, batch_id: str, metas: dict[str, BatchMeta], why: str) -> None:
        log.warning("batch.lost", batch_id=batch_id, reason=why)
        batches.lost(self.client.store, batch_id)
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

        async def one(key: str, items: list[BatchItem]) -> None:
            first = items[0]
            try:
                message = await self.client.send_direct(
                    first.role, first.model, first.sample, key, first.request
                )
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

    def _record(self, key: str, meta: BatchMeta, message: Message, batch_id: str) -> Message:
        """The answer into the ledger at the batch price, committed before any caller sees it."""
        existing = self.client.store.completed_call(key)
        if existing is not None:  # answered meanwhile (a direct call): never counted twice
            return ledger.replay(existing)
        data = ledger.answer_data(message)
        usage = message.usage
        model = meta.get("model") or message.model
        cost = call_cost(price_for(self.client.settings, model), usage) * BATCH_PRICE_FACTOR
        waited = [i.enqueued for i in self._waiting.get(key, [])]
        latency_ms = (time.perf_counter() - min(waited)) * 1000 if waited else 0.0
        self.client.store.record_call(
            ledger.answer_row(
                ledger.CallIdentity(
                    key=key,
                    role=meta["role"],
                    model=model,
                    sample=int(meta.get("sample") or 0),
                    scope=meta.get("scope"),
                    batch_id=batch_id,
                ),
                data=data,
                spend=ledger.CallSpend(usage, cost, latency_ms, attempts=1),
            )
        )
        self.client.count_paid(cost)
        self.stats["answers"] += 1
        log.debug(
            "llm.call_completed",
            hash=key,
            role=meta["role"],
            model=model,
            sample=meta.get("sample"),
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=cost,
            batch_id=batch_id,
        )
        return Message.model_validate(data)

    # -- helpers --------------------------------------------------------------------------------

    def _attached_map(self) -> dict[str, str]:
        """custom_id → id of a batch an earlier process left in flight (read once)."""
        if self._attached is None:
            self._attached = {}
            for batch_id, items in batches.in_progress(self.client.store).items():
                self._attached_items[batch_id] = items
                for key in items:
                    self._attached[key] = batch_id
        return self._attached

    async def _safely(self, work: Awaitable[None], keys: list[str]) -> None:
        """A batch's task never dies silently: its callers get whatever stopped it."""
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error("batch.failed", error=redact(f"{type(exc).__name__}: {exc}"))
            self._fail(keys, exc)

    def _spawn(self, coro: Coroutine[object, None, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
