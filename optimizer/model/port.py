"""What the stages may ask of the model client: a protocol, so that a stage names the type it uses
without importing the SDK (client.py does, and costs 2 s), and a test can hand in a client of its
own. `client.ModelClient` is the one implementation; mypy checks it against this."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar

if TYPE_CHECKING:
    from collections.abc import Sequence

    from anthropic.types import (
        Message,
        MessageParam,
        TextBlockParam,
        ToolChoiceParam,
        ToolUnionParam,
    )
    from pydantic import BaseModel

    from optimizer.config import Settings
    from optimizer.model.budget import Budget
    from optimizer.prices import Price
    from optimizer.store.db import Store
    from optimizer.store.rows import CallRow

Answer = TypeVar("Answer", bound="BaseModel")


class ClientStats(TypedDict):
    """A client's work: calls made (paid), failed, served from the ledger, USD spent and saved,
    retries by cause, its concurrency limit now and whether the simulator answered."""

    calls: int
    errors: int
    cache_hits: int
    saved_usd: float
    spent_usd: float
    retries: dict[str, int]
    concurrency_limit: int
    simulated: bool


class Client(Protocol):
    settings: Settings
    store: Store
    budget: Budget  # the run's one budget: ceiling, reserve, counted spend (budget.py)
    batch: Any  # model.client.BatchRoute in batch mode, else None

    @property
    def simulated(self) -> bool:
        """True when the offline simulator answers; every result shown says so."""
        ...

    def count_paid(self, cost: float) -> None: ...

    def count_saved(self, saved: float) -> None: ...

    def price(self, model: str) -> Price: ...

    def estimate(self, role: str, model: str, request_chars: int, max_tokens: int) -> float:
        """A call's upper-leaning cost before it is made."""
        ...

    def hold(self, role: str, model: str, estimate: float) -> None:
        """Admit a call made elsewhere against the budget (BudgetExhausted past the ceiling)."""
        ...

    def release(self, estimate: float, paid: CallRow | None = None) -> None:
        """Let a held estimate go, recording the paid row of a call made elsewhere."""
        ...

    def stats(self) -> ClientStats: ...

    async def aclose(self) -> None: ...

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
    ) -> Message: ...

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
    ) -> Answer: ...
