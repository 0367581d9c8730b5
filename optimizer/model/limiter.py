"""How many model calls may be in flight: one adaptive limit for the process, and one lock per
request so the same request twice at once is paid once. Never sends a call or retries one."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping

import structlog

log = structlog.get_logger()


def _header_int(headers: Mapping[str, str] | None, name: str) -> int | None:
    try:
        value = headers.get(name) if headers is not None else None
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


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

    def slot(self) -> _Slot:
        """`async with limiter.slot() as epoch:` one slot for one attempt. A class, not a
        generator: it is entered on every model call."""
        return _Slot(self)

    def on_rate_limited(self, epoch: int) -> None:
        self._successes = 0
        if epoch == self._epoch and self.limit > 1:
            self._lower(max(1, self.limit // 2), "rate_limited")

    def on_success(
        self, headers: Mapping[str, str] | None = None, tokens_per_call: int = 0
    ) -> None:
        caps = []
        if (
            requests_left := _header_int(headers, "anthropic-ratelimit-requests-remaining")
        ) is not None:
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


class _Slot:
    __slots__ = ("limiter",)

    def __init__(self, limiter: AdaptiveLimiter) -> None:
        self.limiter = limiter

    async def __aenter__(self) -> int:
        return await self.limiter.acquire()

    async def __aexit__(self, *_exc: object) -> None:
        self.limiter.release()


class RequestLocks:
    """One lock per request hash, held while its ledger row is checked and its call is made; a
    lock nobody holds or waits for is dropped, so the table stays as small as the calls in flight."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    def hold(self, key: str) -> _Held:
        """`async with locks.hold(key):` the request's lock (a class, as _Slot is)."""
        return _Held(self._locks, key)


class _Held:
    __slots__ = ("key", "locks")

    def __init__(self, locks: dict[str, tuple[asyncio.Lock, list[int]]], key: str) -> None:
        self.locks, self.key = locks, key

    async def __aenter__(self) -> None:
        lock, users = self.locks.setdefault(self.key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            await lock.acquire()
        except BaseException:
            self._leave(users)
            raise

    async def __aexit__(self, *_exc: object) -> None:
        lock, users = self.locks[self.key]
        lock.release()
        self._leave(users)

    def _leave(self, users: list[int]) -> None:
        users[0] -= 1
        if users[0] == 0:
            del self.locks[self.key]
