"""Builds the process's model client for the configured provider (the simulator or the Messages
API) and gives it its batch route. Never keeps a key anywhere but the SDK client it makes."""

from __future__ import annotations

import os
import random
from typing import Any

import anthropic
import httpx2

from optimizer.config import Settings
from optimizer.errors import BadInput
from optimizer.model.batch import BatchCollector
from optimizer.model.client import ModelClient
from optimizer.model.provider import endpoint
from optimizer.model.retry import Sleep
from optimizer.model.simulated import registered
from optimizer.store.db import Store


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
        # A test hands in its own simulator; otherwise the composition root's (simulated.py).
        made = simulator.transport() if simulator is not None else registered().transport(settings)
        sdk = anthropic.AsyncAnthropic(
            api_key="sim-key",
            base_url="http://sim.invalid",
            max_retries=0,
            timeout=llm.timeout_s,
            http_client=httpx2.AsyncClient(transport=made, timeout=llm.timeout_s),
        )
        return build_client(
            settings, store, sdk, budget_usd=budget_usd, simulated=True, sleep=sleep
        )
    key = api_key or os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise BadInput(
            "No API key: set ANTHROPIC_API_KEY, or use the offline simulator with --provider sim."
        )
    sdk = anthropic.AsyncAnthropic(
        api_key=key, base_url=endpoint(settings), max_retries=0, timeout=llm.timeout_s
    )
    return build_client(settings, store, sdk, budget_usd=budget_usd, simulated=False, sleep=sleep)


def build_client(
    settings: Settings,
    store: Store,
    sdk: anthropic.AsyncAnthropic,
    *,
    budget_usd: float | None = None,
    simulated: bool = False,
    sleep: Sleep | None = None,
    rng: random.Random | None = None,
) -> ModelClient:
    """A client over an SDK client already made (the SDK's own retries off), with the batch route
    when settings.llm.batch is on."""
    client = ModelClient(
        settings, store, sdk, budget_usd=budget_usd, simulated=simulated, sleep=sleep, rng=rng
    )
    if settings.llm.batch:
        client.batch = BatchCollector(client)
    return client
