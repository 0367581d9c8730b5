"""The client's one retry policy: which failures are transient, how long to wait, and one
`llm.retry_scheduled` event per retry. Never retries what cannot succeed (a 400, a spend limit)."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import TypeVar

import anthropic
import httpx2
import structlog
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from optimizer.config import Llm

log = structlog.get_logger()

Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")

# A request that may have reached the service before it failed: resending it could pay twice.
AMBIGUOUS_CAUSES = frozenset({"timeout", "truncated"})

_STREAM_ERROR_CAUSES = {
    "overloaded_error": "overloaded",
    "api_error": "server_error",
    "rate_limit_error": "rate_limit",
}


async def sleep(seconds: float) -> None:
    """The wait between attempts; tests replace it (or pass `sleep=` to the client)."""
    await asyncio.sleep(seconds)


class Truncated(Exception):
    """A response that ended early: a stream without message_stop, or an unreadable body."""


def retry_cause(exc: BaseException | None) -> str | None:
    """The name of a transient failure worth another attempt, or None for one that is not."""
    if isinstance(exc, Truncated):
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
            return None if is_spend_limit(exc) else "rate_limit"
        if code == 529:
            return "overloaded"
        if code >= 500:
            return "server_error"
    return None


def _transient(exc: BaseException, resend_ambiguous: bool) -> bool:
    cause = retry_cause(exc)
    return cause is not None and (resend_ambiguous or cause not in AMBIGUOUS_CAUSES)


def api_message(exc: anthropic.APIStatusError) -> str:
    """The service's own words for an error response."""
    return str(exc.api_message or exc.message)


def is_spend_limit(exc: anthropic.APIStatusError) -> bool:
    """True when the account's spend limit refused the call: waiting minutes will not help."""
    text = f"{exc.error_code or ''} {api_message(exc)}".lower()
    return exc.status_code in (402, 429) and (
        "spend_limit" in text or "spend limit" in text or "usage limits" in text
    )


def _error_type(body: object) -> str | None:
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        return body["error"].get("type")
    return None


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


class RetryPolicy:
    """One per client: every request it sends, direct or to the batch endpoints, is retried here
    and counted in `counts` by cause."""

    def __init__(
        self, llm: Llm, *, sleep: Sleep | None = None, rng: random.Random | None = None
    ) -> None:
        self.llm = llm
        self.counts: Counter[str] = Counter()
        self._sleep = sleep
        self._rng = rng or random.Random()

    def retrying(
        self, *, what: str, role: str, model: str, resend_ambiguous: bool = True
    ) -> AsyncRetrying:
        """Attempts of one request. With resend_ambiguous=False a timeout or a cut answer is not
        retried: a request that may have been accepted (a batch create) must not be paid twice."""
        return AsyncRetrying(
            stop=stop_after_attempt(self.llm.max_attempts),
            wait=self._wait,
            retry=retry_if_exception(lambda exc: _transient(exc, resend_ambiguous)),
            before_sleep=lambda state: self._log_retry(what, role, model, state),
            sleep=self._do_sleep,
            reraise=True,
        )

    async def call(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        what: str,
        role: str,
        model: str,
        resend_ambiguous: bool = True,
    ) -> T:
        """`fn()` under this policy; its last failure is raised as is."""
        result, _attempts = await self.attempts(
            fn, what=what, role=role, model=model, resend_ambiguous=resend_ambiguous
        )
        return result

    async def attempts(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        what: str,
        role: str,
        model: str,
        resend_ambiguous: bool = True,
    ) -> tuple[T, int]:
        """`fn()` under this policy and the number of attempts it took. The first attempt runs
        alone: nearly every call succeeds at once, and building tenacity's loop costs about
        100 us, more than the rest of a call's bookkeeping. A transient first failure is replayed
        as the loop's first attempt, so it waits, logs and counts exactly as the loop would."""
        try:
            return await fn(), 1
        except Exception as exc:  # noqa: BLE001 - anything not transient is raised as is
            if self.llm.max_attempts <= 1 or not _transient(exc, resend_ambiguous):
                raise
            first = exc
        async for attempt in self.retrying(
            what=what, role=role, model=model, resend_ambiguous=resend_ambiguous
        ):
            with attempt:
                if attempt.retry_state.attempt_number == 1:
                    raise first
                return await fn(), attempt.retry_state.attempt_number
        raise AssertionError("unreachable")  # pragma: no cover - reraise=True raises instead

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        after = _retry_after(exc)
        if after is not None:
            return min(after, self.llm.backoff_max_s)
        # Exponential with "equal jitter": never zero, so a crowd of retries spreads out.
        llm = self.llm
        base = min(llm.backoff_max_s, llm.backoff_initial_s * 2 ** (state.attempt_number - 1))
        return self._rng.uniform(base / 2, base)

    async def _do_sleep(self, seconds: float) -> None:
        # Looked up at each wait, so a test that replaces the module's sleep is obeyed.
        await (self._sleep or sleep)(seconds)

    def _log_retry(self, what: str, role: str, model: str, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        cause = retry_cause(exc) or "unknown"
        self.counts[cause] += 1
        wait = state.next_action.sleep if state.next_action else 0.0
        log.info(
            "llm.retry_scheduled",
            what=what,
            role=role,
            model=model,
            attempt=state.attempt_number,
            cause=cause,
            wait=round(float(wait), 3),
        )
