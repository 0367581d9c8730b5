"""The one model client: every call passes the ledger (the cache that makes resume free), the
budget, the retry policy and the concurrency limit. Never pays twice, never lets the key out."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import anthropic
import httpx2
import structlog
from anthropic.types import Message, MessageParam, TextBlockParam, ToolChoiceParam, ToolUnionParam

from optimizer.config import Settings
from optimizer.errors import OptimizerError
from optimizer.logs import redact
from optimizer.model import ledger
from optimizer.model.attempt import attempt_once
from optimizer.model.budget import Budget
from optimizer.model.clock import ModelCall, current_clock
from optimizer.model.cost import Outputs, call_cost, estimate_cost, price_for
from optimizer.model.errors import ModelCallFailed, call_failure, outage
from optimizer.model.limiter import AdaptiveLimiter, RequestLocks
from optimizer.model.port import Client, ClientStats
from optimizer.model.request import (
    billed_chars,
    build_request,
    canonical_json,
    request_hash,
    with_cache_control,
)
from optimizer.model.retry import RetryPolicy, Sleep, Truncated
from optimizer.model.scopes import scope
from optimizer.model.structured import Answer, answer_with_repair, asking, forced_tool
from optimizer.prices import Price
from optimizer.store import money
from optimizer.store.db import Completed, Store
from optimizer.store.ledger import longest_by_role
from optimizer.store.rows import CallRow

log = structlog.get_logger()


class BatchRoute(Protocol):
    """Where the first attempt of a batch role's call goes in batch mode (the BatchCollector that
    make_client gives the client)."""

    def handles(self, role: str) -> bool: ...

    async def call(
        self, role: str, model: str, sample: int, key: str, request: dict[str, Any]
    ) -> Message: ...

    async def aclose(self) -> None: ...


class ModelClient:
    """Every model call of the process goes through one instance; make_client builds it."""

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
        # The one budget (budget.py): counted from the ledger's spend before this client, the
        # adoptions made apart left out (store/money.py), and every call counted since.
        self.budget = Budget(budget_usd, money.account(store).budgeted_usd)
        self.sdk = anthropic_client
        self.limiter = AdaptiveLimiter(settings.llm.max_concurrency)
        self.retry = RetryPolicy(settings.llm, sleep=sleep, rng=rng)
        # llm.batch: the first attempt of grader, comparator and analyzer calls goes through one
        # Message Batch per stage (batch.py); None when batch mode is off.
        self.batch: BatchRoute | None = None
        self._simulated = simulated
        self._outputs = Outputs(longest_by_role(store))
        self._locks = RequestLocks()
        self._prices: dict[str, Price] = {}
        self._calls = 0
        self._errors = 0
        self._hits = 0
        self._saved = 0.0
        self._spent = 0.0
        # Requests failed for good since the last success: an outage, once there are many. A
        # request tried again (an unscored run's next pass) counts once.
        self._failed_since_success: set[str] = set()

    @property
    def simulated(self) -> bool:
        """True when answers come from the offline simulator; every result shown says so."""
        return self._simulated

    async def aclose(self) -> None:
        if self.batch is not None:
            await self.batch.aclose()
        await self.sdk.close()

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    def stats(self) -> ClientStats:
        """This client's work (port.ClientStats)."""
        return {
            "calls": self._calls,
            "errors": self._errors,
            "cache_hits": self._hits,
            "saved_usd": self._saved,
            "spent_usd": self._spent,
            "retries": dict(self.retry.counts),
            "concurrency_limit": self.limiter.limit,
            "simulated": self._simulated,
        }

    def count_paid(self, cost: float) -> None:
        """Count a completed call recorded in the ledger elsewhere (a batch, a Ray worker)."""
        self._calls += 1
        self._spent += cost
        self.budget.pay(cost)

    def count_saved(self, saved: float) -> None:
        """Count an answer served from the ledger instead of paid again."""
        self._hits += 1
        self._saved += saved

    # -- calls made outside this client (the Claude Code CLI's, through its relay) --------------

    def estimate(self, role: str, model: str, request_chars: int, max_tokens: int) -> float:
        """A call's upper-leaning cost before it is made (its answer bounded by cost.Outputs)."""
        most = self._outputs.bound(role, max_tokens)
        return estimate_cost(self.price(model), request_chars, most)

    def hold(self, role: str, model: str, estimate: float) -> None:
        """Admit a call (BudgetExhausted past the ceiling); its estimate held until `release`."""
        self.budget.admit(role, model, estimate)

    def release(self, estimate: float, paid: CallRow | None = None) -> None:
        """Let a held estimate go (never below zero, where float sums drift); `paid`, the row of
        a call made elsewhere, is recorded and counted."""
        try:
            if paid is not None:
                self.store.record_call(paid)
                self.count_paid(paid["cost_usd"])
                self._outputs.add(paid["role"], paid["output_tokens"])
        finally:
            self.budget.settle(estimate)

    # -- public calls ---------------------------------------------------------------------------

    async def message(
        self,
        role: str,
        *,
        system: str | list[TextBlockParam] | None = None,
        messages: Sequence[MessageParam],
        tools: list[ToolUnionParam] | None = None,
        tool_choice: ToolChoiceParam | None = None,
        max_tokens: int | None = None,
        sample: int = 0,
        model: str | None = None,
        stream: bool = False,
        temperature: float | None = None,
        batch: bool = False,
        thinking: dict[str, str] | None = None,
    ) -> Message:
        """One answer, from the ledger when this exact request (role, sample) completed before,
        else from the model, recorded in the ledger before it is returned. `batch=True` lets the
        call join a Message Batch when batch mode is on for its role."""
        model = model or self._model_for(role)
        request = build_request(
            model=model,
            max_tokens=max_tokens or self.settings.llm.max_tokens,
            messages=messages,
            system=system,
            tools=tools,
            tool_choice=tool_choice,
            temperature=temperature,
            thinking=thinking,
        )
        canonical = canonical_json(request)
        key = request_hash(canonical, role, sample)
        # The run clock (if any) stops while this call waits on the provider (docs/design.md §7).
        with ModelCall(current_clock()) as timed:
            answer = await self._answer(role, model, sample, key, request, canonical, stream, batch)
            timed.tokens = answer.usage.output_tokens or 0
        return answer

    async def _answer(
        self,
        role: str,
        model: str,
        sample: int,
        key: str,
        request: dict[str, Any],
        canonical: str,
        stream: bool,
        batch: bool,
    ) -> Message:
        async with self._locks.hold(key):  # the same request twice at once is paid once
            cached = self.store.completed_call(key)
            if cached is not None:
                return self._from_ledger(cached, role)
            estimate = self.estimate(
                role, model, billed_chars(request, canonical), request["max_tokens"]
            )
            self.hold(role, model, estimate)
            if self.settings.llm.prompt_caching:
                request = with_cache_control(request, canonical, role=role, model=model)
            try:
                if batch and self.batch is not None and self.batch.handles(role):
                    answer = await self.batch.call(role, model, sample, key, request)
                else:
                    answer = await self.send_direct(role, model, sample, key, request, stream)
                self._outputs.add(role, answer.usage.output_tokens)
                return answer
            finally:
                self.release(estimate)

    async def structured(
        self,
        role: str,
        *,
        system: str | list[TextBlockParam] | None,
        messages: Sequence[MessageParam],
        schema: type[Answer],
        tool_name: str,
        sample: int = 0,
        model: str | None = None,
        max_tokens: int | None = None,
    ) -> Answer:
        """An answer given as the input of one tool whose input_schema is `schema`, asked for as
        the model takes it (structured.asking); a reply that does not validate is sent back once
        with the error, then StructuredAnswerError.
        Only the first attempt may join a Message Batch: the repair goes direct."""
        tool = forced_tool(schema, tool_name)
        how = asking(model or self._model_for(role), tool_name)

        async def ask(turns: Sequence[MessageParam], first: bool) -> Message:
            return await self.message(
                role,
                system=how.system(system),
                messages=turns,
                tools=[tool],
                sample=sample,
                model=model,
                tool_choice=how.tool_choice,
                max_tokens=max_tokens,
                batch=first,
                thinking=how.thinking,
            )

        return await answer_with_repair(ask, messages, schema, role=role, tool_name=tool_name)

    async def send_direct(
        self,
        role: str,
        model: str,
        sample: int,
        key: str,
        request: dict[str, Any],
        stream: bool = False,
    ) -> Message:
        """Send a request with the retry policy and record the outcome in the ledger. The caller
        has checked the ledger and holds the request's lock (message(), the batch route)."""
        headers = {"x-optimizer-role": role, "x-optimizer-sample": str(sample)}
        started = time.perf_counter()
        attempts = 0

        async def attempt() -> Message:
            nonlocal attempts
            attempts += 1
            return await attempt_once(self.sdk, self.limiter, request, headers, stream)

        try:
            message, _ = await self.retry.attempts(attempt, what="message", role=role, model=model)
        except (anthropic.AnthropicError, httpx2.HTTPError, Truncated, OptimizerError) as exc:
            # Provider and transport failures only; a bug in a request is left to surface as is.
            error, cause = self._give_up(exc, key, role, model, sample, attempts, started)
            raise error from cause
        data = ledger.answer_data(message)
        usage = message.usage
        cost = call_cost(self.price(model), usage)
        latency_ms = (time.perf_counter() - started) * 1000
        # Written and committed before the caller sees the answer: a resumed run never pays twice.
        self.store.record_call(
            ledger.answer_row(
                ledger.CallIdentity(key, role, model, sample, scope=scope.get()),
                data=data,
                spend=ledger.CallSpend(usage, cost, latency_ms, attempts),
            )
        )
        self.count_paid(cost)
        self._failed_since_success.clear()
        # The tokens are in the row just recorded; the log names the call and its price.
        log.debug("llm.call_completed", hash=key, role=role, cost_usd=cost, attempts=attempts)
        return Message.model_validate(data)

    # -- insides --------------------------------------------------------------------------------

    def price(self, model: str) -> Price:
        """price_for, once per model: a client's settings never change, and the lookup scans
        the price table twice on every call otherwise."""
        price = self._prices.get(model)
        if price is None:
            price = self._prices[model] = price_for(self.settings, model)
        return price

    def _model_for(self, role: str) -> str:
        if role not in type(self.settings.models).model_fields:
            raise ValueError(f"unknown model role {role!r}")
        return str(getattr(self.settings.models, role))

    def _from_ledger(self, done: Completed, role: str) -> Message:
        saved = done.cost_usd
        self.store.record_cache_hit(done.hash, role, saved_usd=saved)
        self.count_saved(saved)
        log.debug("llm.cache_hit", role=role, hash=done.hash[:12], saved_usd=saved)
        return ledger.replay(done)

    def _give_up(
        self,
        exc: Exception,
        key: str,
        role: str,
        model: str,
        sample: int,
        attempts: int,
        started: float,
    ) -> tuple[Exception, BaseException | None]:
        """Record a call that failed for good; the error to raise and its cause (None hides it)."""
        error = call_failure(exc, role, model, attempts)
        self._errors += 1
        if isinstance(error, ModelCallFailed):
            self._failed_since_success.add(key)
        self.store.record_call(
            ledger.failure_row(
                key=key,
                role=role,
                model=model,
                sample=sample,
                latency_ms=(time.perf_counter() - started) * 1000,
                attempts=attempts,
                error=redact(str(error)),
            )
        )
        log.warning("llm.call_failed", role=role, model=model, attempts=attempts, error=str(error))
        if len(self._failed_since_success) >= self.settings.llm.failure_streak:
            return outage(len(self._failed_since_success), error), None
        return error, (None if error is exc else exc)


if TYPE_CHECKING:  # mypy holds the one client to the protocol the stages are typed against

    def _conforms(client: ModelClient) -> Client:
        return client
