"""The one model client: one retry policy, one adaptive concurrency limit, the ledger as cache, cost,
budget, prompt caching, structured answers. Never pays twice for a call, never lets the key out."""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import os
import random
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import anthropic
import httpx2
import structlog
from anthropic.types import Message
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from optimizer.config import Price, Settings
from optimizer.errors import (
    BadInput,
    BudgetExhausted,
    OptimizerError,
    ProviderSpendLimit,
    ProviderUnavailable,
    WorkFailed,
)
from optimizer.logs import redact
from optimizer.store.db import Store

log = structlog.get_logger()

Sleep = Callable[[float], Awaitable[None]]
Answer = TypeVar("Answer", bound=BaseModel)


async def sleep(seconds: float) -> None:
    """The wait between attempts; tests replace it (or pass `sleep=` to the client)."""
    await asyncio.sleep(seconds)


# What the calls in flight are for (a version label, "baseline", "proposal 2-0"): set by the
# stage that makes them, recorded per call, so lineage can show the cost of each version.
scope: contextvars.ContextVar[str | None] = contextvars.ContextVar("scope", default=None)

# Retries scheduled by calls made inside counting_retries(): an executor whose run passed its
# time limit while the provider was failing knows the time was ours, not the agent's.
_retries_here: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "retries_here", default=None)


@contextmanager
def counting_retries() -> Iterator[list[int]]:
    """A one-item list holding how many retries the calls made inside have scheduled so far."""
    tally = [0]
    token = _retries_here.set(tally)
    try:
        yield tally
    finally:
        _retries_here.reset(token)


@contextmanager
def scoped(name: str) -> Iterator[None]:
    """Every model call made inside (and in tasks created inside) is recorded as made for `name`."""
    token = scope.set(name)
    try:
        yield
    finally:
        scope.reset(token)


class ModelCallFailed(WorkFailed):
    """A call that failed for good: retries spent, or an error no retry can fix (a 400, a 404).
    Callers that run one eval turn it into data; nothing is recorded as paid."""

    def __init__(self, message: str, *, role: str, cause: str, attempts: int) -> None:
        super().__init__(message)
        self.role, self.cause, self.attempts = role, cause, attempts


class StructuredAnswerError(OptimizerError):
    """The model twice failed to answer through the forced tool with valid input; callers record
    it as data (judge_error), never as a pass or a fail."""

    def __init__(self, *, role: str, tool_name: str, first_error: str, second_error: str) -> None:
        super().__init__(
            f"The {role} did not answer through the tool {tool_name!r} with valid input, twice: "
            f"first {first_error}; after the repair request, {second_error}."
        )
        self.role, self.tool_name = role, tool_name
        self.first_error, self.second_error = first_error, second_error


class _Truncated(Exception):
    """A response that ended early: a stream without message_stop, or an unreadable body."""


# -- request canonical form and cost ------------------------------------------------------------


def plain(value: Any) -> Any:
    """JSON-ready copy of a request part; SDK objects (a previous answer's content blocks) become
    the dicts the API takes, so the hash does not depend on how a caller spelled them."""
    if isinstance(value, BaseModel):
        return plain(value.model_dump(mode="json", exclude_unset=True, exclude_none=True, warnings=False))
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def canonical_json(request: Mapping[str, Any]) -> str:
    """The request as sorted, compact JSON: the text that is hashed and measured."""
    return json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_hash(canonical: str, role: str, sample: int) -> str:
    """sha256 of the canonical request (no headers, no transport flags) with the role and the
    sample index, so the three runs of one eval are three distinct calls."""
    return hashlib.sha256(f"{role}\0{sample}\0{canonical}".encode()).hexdigest()


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


MAX_CACHE_BREAKPOINTS = 4


def with_cache_control(request: Mapping[str, Any], already_marked: int = 0) -> dict[str, Any]:
    """Mark the stable prefixes (the last tool definition, then the last system block) as
    ephemeral cache breakpoints, within the API's limit of four per request. Works on a copy."""
    marked = dict(request)
    used = already_marked
    for part in ("tools", "system"):
        blocks = marked.get(part)
        if used >= MAX_CACHE_BREAKPOINTS or not isinstance(blocks, list) or not blocks:
            continue
        if "cache_control" not in blocks[-1]:
            marked[part] = [*blocks[:-1], {**blocks[-1], "cache_control": {"type": "ephemeral"}}]
            used += 1
    return marked


# -- errors: which are retried, and what the others mean ----------------------------------------

_STREAM_ERROR_CAUSES = {
    "overloaded_error": "overloaded",
    "api_error": "server_error",
    "rate_limit_error": "rate_limit",
}


def retry_cause(exc: BaseException | None) -> str | None:
    """The name of a transient failure worth another attempt, or None for one that is not."""
    if isinstance(exc, _Truncated):
        return "truncated"
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return "timeout"
    # The peer closed the connection in the middle of the body: the answer was cut short.
    if isinstance(exc, httpx2.RemoteProtocolError) or isinstance(
        getattr(exc, "__cause__", None), httpx2.RemoteProtocolError
    ):
        return "truncated"
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        return "connection"
    if isinstance(exc, anthropic.APIStatusError):
        code = exc.status_code
        if code < 400:  # an error event inside a 200 stream
            return _STREAM_ERROR_CAUSES.get(str(exc.type or _error_type(exc.body)))
        if code == 408:
            return "request_timeout"
        if code == 409:
            return "conflict"
        if code == 429:
            return None if _is_spend_limit(exc) else "rate_limit"
        if code == 529:
            return "overloaded"
        if code >= 500:
            return "server_error"
    return None


def _error_type(body: object) -> str | None:
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        return body["error"].get("type")
    return None


def _api_message(exc: anthropic.APIStatusError) -> str:
    return str(exc.api_message or exc.message)


def _is_spend_limit(exc: anthropic.APIStatusError) -> bool:
    text = f"{exc.error_code or ''} {_api_message(exc)}".lower()
    return exc.status_code in (402, 429) and (
        "spend_limit" in text or "spend limit" in text or "usage limits" in text
    )


def _retry_after(exc: BaseException | None) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms, retry-after as seconds or a date)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        if (value := headers.get("retry-after")) is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
    return None


def _header_int(headers: Any, name: str) -> int | None:
    try:
        value = headers.get(name) if headers is not None else None
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


# -- concurrency ------------------------------------------------------------------------------


class AdaptiveLimiter:
    """One concurrency limit for the process: halved on a 429 (once per burst, never below 1),
    capped by the rate-limit headers when the server says little is left, and raised by one after
    `limit` successes in a row, up to the configured ceiling."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = ceiling
        self.in_flight = 0
        self.max_in_flight = 0
        self._epoch = 0  # bumps on each decrease, so one burst of 429s lowers the limit once
        self._successes = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> int:
        if not self._waiters and self.in_flight < self.limit:
            self.in_flight += 1
        else:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter  # _wake hands the slot over, already counted in in_flight
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self.release()
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return self._epoch

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        epoch = await self.acquire()
        try:
            yield epoch
        finally:
            self.release()

    def on_rate_limited(self, epoch: int) -> None:
        self._successes = 0
        if epoch == self._epoch and self.limit > 1:
            self._lower(max(1, self.limit // 2), "rate_limited")

    def on_success(self, headers: Any = None, tokens_per_call: int = 0) -> None:
        caps = []
        if (requests_left := _header_int(headers, "anthropic-ratelimit-requests-remaining")) is not None:
            caps.append(requests_left)
        tokens_left = _header_int(headers, "anthropic-ratelimit-tokens-remaining")
        if tokens_left is not None and tokens_per_call > 0:
            caps.append(tokens_left // tokens_per_call)
        if caps and max(1, min(caps)) < self.limit:
            self._lower(max(1, min(caps)), "headers")
            return
        self._successes += 1
        if self._successes >= self.limit and self.limit < self.ceiling:
            self._successes = 0
            self.limit += 1
            log.debug("llm.limit_raised", limit=self.limit)
            self._wake()

    def _lower(self, limit: int, cause: str) -> None:
        self._epoch += 1
        self._successes = 0
        log.info("llm.limit_lowered", limit=limit, previous=self.limit, cause=cause)
        self.limit = limit


# -- the client -------------------------------------------------------------------------------


class _BadAnswer(Exception):
    def __init__(self, error: str, reply: dict[str, Any]) -> None:
        super().__init__(error)
        self.reply = reply  # the user turn that tells the model what was wrong


def _tool_answer(message: Message, schema: type[Answer], tool_name: str) -> Answer:
    uses = [b for b in message.content if b.type == "tool_use"]
    mine = [b for b in uses if b.name == tool_name]
    if message.stop_reason == "max_tokens":
        # Named as what it is: a cut answer's tool input is incomplete, whatever it fails on.
        text = (f"Your answer was cut off at the output token limit before the input of "
                f"{tool_name} was complete. Call {tool_name} again, more briefly.")
        raise _BadAnswer(
            "the answer was cut at max_tokens before its tool input was complete",
            {"role": "user", "content": (
                [{"type": "tool_result", "tool_use_id": b.id, "is_error": True, "content": text}
                 for b in uses] or [{"type": "text", "text": text}])},
        )
    if not mine:
        raise _BadAnswer(
            f"no call of the tool (stop_reason {message.stop_reason})",
            {"role": "user", "content": (
                [{"type": "tool_result", "tool_use_id": b.id, "is_error": True,
                  "content": f"Unknown tool; call {tool_name} instead."} for b in uses]
                + [{"type": "text", "text": f"Answer by calling the tool {tool_name} now."}]
            )},
        )
    try:
        return schema.model_validate(mine[0].input)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        )
        text = (f"The input does not match the tool's input_schema: {problems}. "
                f"Call {tool_name} again with input that matches it.")
        raise _BadAnswer(f"invalid input ({problems})", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "is_error": True, "content": text}
            for b in uses
        ]}) from None


class ModelClient:
    """Every model call of the process goes through one instance (make one per process)."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        anthropic_client: anthropic.AsyncAnthropic,
        *,
        budget_usd: float | None = None,
        simulated: bool = False,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.budget_usd = budget_usd
        self.limiter = AdaptiveLimiter(settings.llm.max_concurrency)
        self._anthropic = anthropic_client
        self._simulated = simulated
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._reserved = 0.0  # estimates of calls in flight, so concurrent calls share the budget
        # The ledger's spend when this client started (a resumed run's earlier calls count); this
        # client adds its own costs as it records them, so no call sums the whole ledger.
        self._spent_before = store.spent_usd() if budget_usd is not None else 0.0
        self._locks: dict[str, list[Any]] = {}
        self._calls = 0
        self._errors = 0
        self._hits = 0
        self._saved = 0.0
        self._spent = 0.0
        self._retries: Counter[str] = Counter()
        # Requests failed for good since the last success: an outage, once there are many. A
        # request tried again (an unscored run's next pass) counts once.
        self._failed_since_success: set[str] = set()
        # llm.batch: the first attempt of grader, comparator and analyzer calls goes through one
        # Message Batch per stage (optimizer/batch.py); None when batch mode is off.
        self.batch: Any = None
        if settings.llm.batch:
            from optimizer.model.batch import BatchCollector

            self.batch = BatchCollector(self)

    @property
    def simulated(self) -> bool:
        """True when answers come from the offline simulator; every result shown says so."""
        return self._simulated

    async def aclose(self) -> None:
        if self.batch is not None:
            await self.batch.aclose()
        await self._anthropic.close()

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    def stats(self) -> dict[str, Any]:
        """This client's work: calls made (paid), failed, served from the ledger, USD spent and
        saved, and retries by cause."""
        return {
            "calls": self._calls,
            "errors": self._errors,
            "cache_hits": self._hits,
            "saved_usd": self._saved,
            "spent_usd": self._spent,
            "retries": dict(self._retries),
            "concurrency_limit": self.limiter.limit,
            "simulated": self._simulated,
        }

    # -- public calls ---------------------------------------------------------------------------

    async def message(
        self,
        role: str,
        *,
        system: str | list[dict[str, Any]] | None = None,
        messages: list[Any],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        sample: int = 0,
        model: str | None = None,
        stream: bool = False,
        temperature: float | None = None,
        batch: bool = False,
    ) -> Message:
        """One answer, from the ledger when this exact request (role, sample) completed before,
        else from the model, recorded in the ledger before it is returned. `batch=True` lets the
        call join a Message Batch when batch mode is on for its role."""
        model = model or self._model_for(role)
        request: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens or self.settings.llm.max_tokens,
            "messages": plain(messages),
        }
        if system:
            request["system"] = [{"type": "text", "text": system}] if isinstance(system, str) else plain(system)
        if tools:
            request["tools"] = plain(tools)
        if tool_choice:
            request["tool_choice"] = plain(tool_choice)
        if temperature is not None:
            request["temperature"] = temperature
        canonical = canonical_json(request)
        key = request_hash(canonical, role, sample)
        async with self._exclusive(key):  # the same request twice at once is paid once
            cached = self.store.completed_call(key)
            if cached is not None:
                return self._from_ledger(cached, role)
            estimate = estimate_cost(self.settings.price(model), len(canonical), request["max_tokens"])
            self._check_budget(role, model, estimate)
            self._reserved += estimate
            if self.settings.llm.prompt_caching:
                request = with_cache_control(request, canonical.count('"cache_control":'))
            try:
                if batch and self.batch is not None and self.batch.handles(role):
                    return await self.batch.call(role, model, sample, key, request)
                return await self._call(role, model, sample, key, request, stream)
            finally:
                self._reserved -= estimate

    async def structured(
        self,
        role: str,
        *,
        system: str | list[dict[str, Any]] | None,
        messages: list[Any],
        schema: type[Answer],
        tool_name: str,
        sample: int = 0,
        model: str | None = None,
        max_tokens: int | None = None,
    ) -> Answer:
        """An answer given as the input of one forced tool whose input_schema is `schema`; a
        reply that does not validate is sent back once with the error, then StructuredAnswerError."""
        description = (schema.__doc__ or "").strip() or f"Give the answer as a {schema.__name__}."
        tool = {"name": tool_name, "description": description,
                "input_schema": schema.model_json_schema()}
        ask = dict(role=role, system=system, tools=[tool], sample=sample, model=model,
                   tool_choice={"type": "tool", "name": tool_name}, max_tokens=max_tokens)
        first = await self.message(messages=messages, batch=True, **ask)  # type: ignore[arg-type]
        try:
            return _tool_answer(first, schema, tool_name)
        except _BadAnswer as exc:
            first_error = exc
        repair = plain(messages)
        if first.content:  # the API refuses an empty assistant turn
            repair.append({"role": "assistant", "content": plain(first.content)})
        repair.append(first_error.reply)
        log.info("llm.structured_repair", role=role, tool=tool_name, error=str(first_error))
        second = await self.message(messages=repair, **ask)  # type: ignore[arg-type]
        try:
            return _tool_answer(second, schema, tool_name)
        except _BadAnswer as exc:
            raise StructuredAnswerError(
                role=role, tool_name=tool_name, first_error=str(first_error), second_error=str(exc)
            ) from None

    # -- insides --------------------------------------------------------------------------------

    def _model_for(self, role: str) -> str:
        if role not in type(self.settings.models).model_fields:
            raise ValueError(f"unknown model role {role!r}")
        return getattr(self.settings.models, role)

    @asynccontextmanager
    async def _exclusive(self, key: str) -> AsyncIterator[None]:
        entry = self._locks.setdefault(key, [asyncio.Lock(), 0])
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self._locks[key]

    def _from_ledger(self, row: dict[str, Any], role: str) -> Message:
        saved = float(row["cost_usd"] or 0.0)
        self.store.record_cache_hit(row["hash"], role, saved_usd=saved)
        self._hits += 1
        self._saved += saved
        log.debug("llm.cache_hit", role=role, hash=row["hash"][:12], saved_usd=saved)
        return Message.model_validate(json.loads(row["response_json"]))

    def _check_budget(self, role: str, model: str, estimate: float) -> None:
        if self.budget_usd is None:
            return
        spent = self._spent_before + self._spent
        if spent + self._reserved + estimate > self.budget_usd:
            log.warning("llm.budget_exhausted", role=role, model=model, spent_usd=spent,
                        in_flight_usd=self._reserved, estimate_usd=estimate, budget_usd=self.budget_usd)
            raise BudgetExhausted(
                f"The next {role} call to {model} (estimated ${estimate:.4f}) would take the "
                f"run's spend from ${spent:.4f} (plus ${self._reserved:.4f} in flight) past its "
                f"budget of ${self.budget_usd:.2f}, so it was not started."
            )

    async def _call(
        self, role: str, model: str, sample: int, key: str, request: dict[str, Any], stream: bool
    ) -> Message:
        headers = {"x-optimizer-role": role, "x-optimizer-sample": str(sample)}
        started = time.perf_counter()
        attempts = 0
        llm = self.settings.llm
        retrying = AsyncRetrying(
            stop=stop_after_attempt(llm.max_attempts),
            wait=self._wait,
            retry=retry_if_exception(lambda exc: retry_cause(exc) is not None),
            before_sleep=lambda state: self._log_retry(role, model, state),
            sleep=self._do_sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    message = await self._attempt(request, headers, stream)
        except (anthropic.AnthropicError, httpx2.HTTPError, _Truncated, OptimizerError) as exc:
            # Provider and transport failures only; a bug in a request is left to surface as is.
            error = self._failure(exc, role, model, attempts)
            self._errors += 1
            if isinstance(error, ModelCallFailed):
                self._failed_since_success.add(key)
            self.store.record_call({
                "hash": key, "role": role, "model": model, "sample": sample, "outcome": "error",
                "response_json": None, "input_tokens": 0, "output_tokens": 0,
                "cache_write_tokens": 0, "cache_read_tokens": 0, "cost_usd": 0.0,
                "latency_ms": (time.perf_counter() - started) * 1000, "attempts": attempts,
                "error": redact(str(error)),
            })
            log.warning("llm.call_failed", role=role, model=model, attempts=attempts,
                        error=str(error))
            if len(self._failed_since_success) >= self.settings.llm.failure_streak:
                raise ProviderUnavailable(
                    f"The model provider failed {len(self._failed_since_success)} different calls "
                    "in a row for good "
                    f"(the last: {error}); the run stops here with everything committed: resume "
                    "it once the provider answers again.") from None
            raise error from (None if error is exc else exc)
        data = message.model_dump(mode="json", exclude_none=True, warnings=False)
        usage = message.usage
        cost = call_cost(self.settings.price(model), usage)
        latency_ms = (time.perf_counter() - started) * 1000
        # Written and committed before the caller sees the answer: a resumed run never pays twice.
        self.store.record_call({
            "hash": key, "role": role, "model": model, "sample": sample, "outcome": "ok",
            "response_json": json.dumps(data, ensure_ascii=False),
            "input_tokens": usage.input_tokens or 0, "output_tokens": usage.output_tokens or 0,
            "cache_write_tokens": usage.cache_creation_input_tokens or 0,
            "cache_read_tokens": usage.cache_read_input_tokens or 0,
            "cost_usd": cost, "latency_ms": latency_ms, "attempts": attempts, "error": None,
            "scope": scope.get(),
        })
        self._calls += 1
        self._failed_since_success.clear()
        self._spent += cost
        log.debug("llm.call_completed", hash=key, role=role, model=model, sample=sample,
                  input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                  cost_usd=cost, latency_ms=round(latency_ms, 1), attempts=attempts)
        return Message.model_validate(data)

    async def _attempt(self, request: dict[str, Any], headers: dict[str, str], stream: bool) -> Message:
        async with self.limiter.slot() as epoch:
            try:
                if stream:
                    message, response_headers = await self._stream_once(request, headers)
                else:
                    raw = await self._anthropic.messages.with_raw_response.create(
                        **request, extra_headers=headers
                    )
                    response_headers = raw.headers
                    try:
                        message = await raw.parse()
                    except ValueError as exc:  # a body cut short is not valid JSON
                        raise _Truncated(f"the response body broke off ({exc})") from None
                    if not isinstance(message, Message):
                        raise _Truncated("the response body is not a message")
            except anthropic.APIStatusError as exc:
                if retry_cause(exc) == "rate_limit":
                    self.limiter.on_rate_limited(epoch)
                raise self._not_retryable(exc) or exc from None
        usage = message.usage
        self.limiter.on_success(response_headers, (usage.input_tokens or 0) + (usage.output_tokens or 0))
        return message

    async def _stream_once(self, request: dict[str, Any], headers: dict[str, str]) -> tuple[Message, Any]:
        async with self._anthropic.messages.stream(**request, extra_headers=headers) as stream:
            stopped = False
            try:
                async for event in stream:
                    stopped = stopped or event.type == "message_stop"
            except ValueError as exc:  # a body cut inside an event's JSON
                raise _Truncated(f"the stream broke off ({exc})") from None
            if not stopped:
                raise _Truncated("the stream ended without message_stop")
            final = await stream.get_final_message()
            data = final.model_dump(mode="json", exclude_none=True, warnings=False)
            return Message.model_validate(data), stream.response.headers

    def _not_retryable(self, exc: anthropic.APIStatusError) -> OptimizerError | None:
        if _is_spend_limit(exc):
            return ProviderSpendLimit(
                f"The model provider says the account's spend limit is reached "
                f"(HTTP {exc.status_code}: {redact(_api_message(exc))}); raise the limit or wait "
                "for it to reset, then resume the run."
            )
        if exc.status_code in (401, 403):
            return WorkFailed(
                f"The model provider refused the credentials (HTTP {exc.status_code}); check "
                "ANTHROPIC_API_KEY, or use the offline simulator with --provider sim."
            )
        return None

    def _failure(self, exc: Exception, role: str, model: str, attempts: int) -> OptimizerError:
        if isinstance(exc, OptimizerError):
            return exc
        cause = retry_cause(exc)
        detail = redact(_api_message(exc) if isinstance(exc, anthropic.APIStatusError) else str(exc))
        if cause is not None:
            return ModelCallFailed(
                f"The {role} call to {model} failed after {attempts} attempts ({cause}: {detail}).",
                role=role, cause=cause, attempts=attempts,
            )
        status = getattr(exc, "status_code", None)
        return ModelCallFailed(
            f"The {role} call to {model} was refused"
            + (f" (HTTP {status}: {detail})" if status else f" ({type(exc).__name__}: {detail})")
            + "; check the model name and the request.",
            role=role, cause=f"http_{status}" if status else type(exc).__name__, attempts=attempts,
        )

    def _wait(self, state: RetryCallState) -> float:
        llm = self.settings.llm
        exc = state.outcome.exception() if state.outcome else None
        after = _retry_after(exc)
        if after is not None:
            return min(after, llm.backoff_max_s)
        # Exponential with "equal jitter": never zero, so a crowd of retries spreads out.
        base = min(llm.backoff_max_s, llm.backoff_initial_s * 2 ** (state.attempt_number - 1))
        return self._rng.uniform(base / 2, base)

    async def _do_sleep(self, seconds: float) -> None:
        await (self._sleep or sleep)(seconds)

    def _log_retry(self, role: str, model: str, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        cause = retry_cause(exc) or "unknown"
        self._retries[cause] += 1
        if (here := _retries_here.get()) is not None:
            here[0] += 1
        wait = state.next_action.sleep if state.next_action else 0.0
        log.info("llm.retry_scheduled", role=role, model=model, attempt=state.attempt_number,
                 cause=cause, wait=round(float(wait), 3))


def make_client(
    settings: Settings,
    store: Store,
    *,
    budget_usd: float | None = None,
    simulator: Any = None,
    api_key: str | None = None,
    sleep: Sleep | None = None,
) -> ModelClient:
    """The process's model client for settings.llm.provider: the offline simulator ("sim") or the
    Messages API ("anthropic", any compatible server through base_url)."""
    llm = settings.llm
    if llm.provider == "sim":
        if simulator is None:
            from optimizer.sim import Simulator

            simulator = Simulator(**settings.sim.model_dump())
        sdk = anthropic.AsyncAnthropic(
            api_key="sim-key", base_url="http://sim.invalid", max_retries=0, timeout=llm.timeout_s,
            http_client=httpx2.AsyncClient(transport=simulator.transport(), timeout=llm.timeout_s),
        )
        return ModelClient(settings, store, sdk, budget_usd=budget_usd, simulated=True, sleep=sleep)
    key = api_key or os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise BadInput("No API key: set ANTHROPIC_API_KEY, or use the offline simulator with --provider sim.")
    base_url = llm.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
    sdk = anthropic.AsyncAnthropic(
        api_key=key, base_url=base_url, max_retries=0, timeout=llm.timeout_s
    )
    return ModelClient(settings, store, sdk, budget_usd=budget_usd, simulated=False, sleep=sleep)
