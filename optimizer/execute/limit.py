"""A run's time limit on the skill's own time (docs/design.md §7): the run clock pauses while a model call
waits on the provider, so a slow or failing provider never turns into the skill's timeout. Never
scores a run: it says only which limit ended it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from optimizer.model.clock import RunClock

T = TypeVar("T")
# The longest sleep between looks at the clock while it is paused: a call that ends lets the
# skill's time run again, and the limit is then found within this.
LOOK_S = 0.25
IDLE_LOOK_S = 1.0


class SkillTimeout(Exception):
    """The skill's own time passed execute.timeout_s: the skill's failure, scored 0."""


class ProviderTooSlow(Exception):
    """The run waited on the provider longer than execute.model_wait_max_s: ours, unscored."""


async def within_limits(
    work: Awaitable[T], clock: RunClock, *, limit_s: float, max_wait_s: float
) -> T:
    """`work`'s result, or SkillTimeout / ProviderTooSlow once a limit passes (it is cancelled
    and awaited first, as asyncio.wait_for does). `work` must be made inside the clock's
    run_clock() so that its model calls pause the clock."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            left = limit_s - clock.skill_s()
            wait_left = max_wait_s - clock.waiting_s()
            if left <= 0 or wait_left <= 0:
                break
            # While the clock runs, the limit cannot come sooner than `left`; a call that starts
            # meanwhile pauses it, and only the wait limit can then pass: look again often
            # enough to see either (one wake a second per run costs nothing).
            nap = min(left, wait_left, LOOK_S if clock.paused() else IDLE_LOOK_S)
            done, _ = await asyncio.wait({task}, timeout=max(nap, 0.01))
            if done:
                return task.result()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    if task.done() and not task.cancelled():
        return task.result()  # it finished on the very look that found the limit passed
    if limit_s - clock.skill_s() <= 0:
        raise SkillTimeout
    raise ProviderTooSlow
