"""The meter of calls a program makes on its own (the Claude Code CLI through its relay): the
usage read from an answer's bytes however they are cut, each request admitted against the run's
budget, each answer charged to the one ledger at our prices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer.catalog import DEFAULT_PRICES
from optimizer.config import Settings
from optimizer.errors import BudgetExhausted
from optimizer.model import make_client
from optimizer.model.cost import call_cost
from optimizer.model.relayed import RELAYED_PREFIX, RelayMeter, UsageReader
from optimizer.model.scopes import scoped
from optimizer.sim import Simulator
from optimizer.sim.protocol import sse_events
from optimizer.store.db import Store

USAGE = {
    "input_tokens": 120,
    "output_tokens": 37,
    "cache_creation_input_tokens": 900,
    "cache_read_input_tokens": 4000,
}
MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [{"type": "text", "text": "A report of the rows and columns."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": USAGE,
}
REQUEST = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 8192,
    "messages": [{"role": "user", "content": "profile the file"}],
}


@pytest.mark.parametrize("cut", [1, 7, 64, 10_000])
def test_a_streamed_answer_gives_its_final_usage_however_its_bytes_are_cut(cut: int) -> None:
    stream = b"".join(sse_events(MESSAGE))
    reader = UsageReader("text/event-stream; charset=utf-8")
    for start in range(0, len(stream), cut):
        reader.feed(stream[start : start + cut])
    # message_start says 1 output token; message_delta's final count replaces it.
    assert reader.finish() == USAGE
    assert reader.stop_reason == "end_turn"


def test_a_json_answer_gives_its_usage_and_an_error_or_a_cut_stream_none() -> None:
    reader = UsageReader("application/json")
    reader.feed(json.dumps(MESSAGE).encode())
    assert reader.finish() == USAGE
    error = UsageReader("application/json")
    error.feed(b'{"type": "error", "error": {"type": "overloaded_error"}}')
    assert error.finish() is None
    cut = UsageReader("text/event-stream")
    cut.feed(b'event: ping\ndata: {"type": "ping"}\n\n')
    assert cut.finish() is None


def test_a_stream_cut_after_its_start_is_charged_for_its_input(tmp_path: Path) -> None:
    events = sse_events(MESSAGE)
    reader = UsageReader("text/event-stream")
    for event in events[:3]:  # message_start, ping, a block's start: the input was billed
        reader.feed(event)
    assert reader.finish() == {**USAGE, "output_tokens": 1}


def _client(tmp_path: Path, budget: float | None):
    settings = Settings.model_validate({"llm": {"provider": "sim"}})
    store = Store(tmp_path / "state.db")
    return make_client(settings, store, budget_usd=budget, simulator=Simulator(seed=0)), store


async def test_each_answer_is_charged_to_the_ledger_under_the_runs_scope(tmp_path: Path) -> None:
    client, store = _client(tmp_path, budget=5.0)
    try:
        with scoped("v1"):
            meter = RelayMeter(client, role="executor", sample=2)
        body = json.dumps(REQUEST).encode()
        first, second = meter.admit(body), meter.admit(body)
        assert not isinstance(first, str) and not isinstance(second, str)
        assert client.budget.committed_usd() > 0  # both estimates held while in flight
        for metered in (first, second):
            metered.answered("application/json").feed(json.dumps(MESSAGE).encode())
            meter.settle(metered, 200, latency_ms=12.0)
        rows = store.query("select * from calls order by rowid")
    finally:
        await client.aclose()
    price = call_cost(DEFAULT_PRICES["claude-sonnet-4-6"], type("U", (), USAGE)())
    assert [r["cost_usd"] for r in rows] == pytest.approx([price, price])
    assert {r["scope"] for r in rows} == {"v1"} and {r["role"] for r in rows} == {"executor"}
    assert {r["sample"] for r in rows} == {2} and rows[0]["cache_read_tokens"] == 4000
    # Two equal requests are two payments: neither row replaces the other, none is a cache key.
    assert len({r["hash"] for r in rows}) == 2
    assert all(r["hash"].startswith(RELAYED_PREFIX) for r in rows)
    assert store.spent_usd() == pytest.approx(2 * price) == pytest.approx(client.budget.counted_usd)
    assert client.budget.committed_usd() == pytest.approx(
        client.budget.counted_usd
    )  # nothing left held


async def test_a_request_past_the_budget_is_refused_and_stops_the_run(tmp_path: Path) -> None:
    # 8,192 output tokens at $15 a million is $0.12: a $0.10 budget admits none.
    client, store = _client(tmp_path, budget=0.10)
    try:
        meter = RelayMeter(client, role="executor", sample=0)
        meter.check()  # nothing refused yet
        refused = meter.admit(json.dumps(REQUEST).encode())
        assert isinstance(refused, str) and "past its budget of $0.10" in refused
        with pytest.raises(BudgetExhausted):
            meter.check()
        assert store.spent_usd() == 0 and client.budget.committed_usd() == 0
    finally:
        await client.aclose()


async def test_an_error_answer_costs_nothing_and_releases_its_hold(tmp_path: Path) -> None:
    client, store = _client(tmp_path, budget=5.0)
    try:
        meter = RelayMeter(client, role="executor", sample=0)
        metered = meter.admit(json.dumps(REQUEST).encode())
        assert not isinstance(metered, str)
        metered.answered("application/json").feed(b'{"type": "error"}')
        assert meter.settle(metered, 529, latency_ms=3.0) == 0.0
        assert store.spent_usd() == 0 and client.budget.committed_usd() == 0 and meter.calls == 0
    finally:
        await client.aclose()


async def test_a_ledger_write_that_fails_leaves_no_hold_behind(tmp_path: Path, monkeypatch) -> None:
    client, store = _client(tmp_path, budget=5.0)
    try:
        meter = RelayMeter(client, role="executor", sample=0)
        metered = meter.admit(json.dumps(REQUEST).encode())
        assert not isinstance(metered, str) and client.budget.committed_usd() > 0
        metered.answered("application/json").feed(json.dumps(MESSAGE).encode())

        def full_disk(row):  # type: ignore[no-untyped-def]
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(store, "record_call", full_disk)
        with pytest.raises(OSError):
            meter.settle(metered, 200, latency_ms=1.0)
        assert (
            client.budget.committed_usd() == client.budget.counted_usd == 0
        )  # the hold went with it
    finally:
        await client.aclose()
