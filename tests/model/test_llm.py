"""The model client through the real SDK, with an inline Messages API or the simulator as its
HTTP transport: retries, the ledger cache, cost, budget, structured answers, concurrency."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import anthropic
import httpx2
import pytest
from pydantic import BaseModel, ConfigDict, Field

from optimizer.config import Settings
from optimizer.errors import BadInput, BudgetExhausted, ProviderSpendLimit, WorkFailed
from optimizer.model import (
    AdaptiveLimiter,
    ModelCallFailed,
    ModelClient,
    StructuredAnswerError,
    call_cost,
    make_client,
)
from optimizer.store.db import Store

USER = [{"role": "user", "content": "Say hello."}]


# -- an inline Messages API ---------------------------------------------------------------------


def answer(text="hello", *, tool=None, usage=None, model="claude-sonnet-4-6") -> dict:
    content = [{"type": "text", "text": text}]
    if tool is not None:
        name, tool_input = tool
        content = [{"type": "tool_use", "id": "toolu_1", "name": name, "input": tool_input}]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if tool else "end_turn",
        "stop_sequence": None,
        "usage": usage
        or {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def ok(body=None, headers=None) -> httpx2.Response:
    return httpx2.Response(200, json=body or answer(), headers=headers or {})


def error(status: int, kind: str, message: str = "try later", headers=None) -> httpx2.Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return httpx2.Response(status, json=body, headers=headers or {})


def sse(message: dict, *, stop: bool = True, error_kind: str | None = None) -> httpx2.Response:
    """A streamed answer: text deltas, or a tool_use block as input_json_delta pieces."""
    start = {**message, "content": [], "usage": {**message["usage"], "output_tokens": 0}}
    events = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            events += [
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "text_delta", "text": block["text"]},
                    },
                ),
            ]
        else:
            raw = json.dumps(block["input"])
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {**block, "input": {}},
                    },
                )
            )
            for piece in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
                )
        if error_kind:
            events.append(
                ("error", {"type": "error", "error": {"type": error_kind, "message": "Overloaded"}})
            )
            break
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    if not error_kind:
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": message["usage"]["output_tokens"]},
                },
            )
        )
        if stop:
            events.append(("message_stop", {"type": "message_stop"}))
    text = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return httpx2.Response(
        200, content=text.encode(), headers={"content-type": "text/event-stream"}
    )


class Api:
    """Answers each request with the next scripted reply (the last one repeats); a reply may be a
    Response, an exception to raise, or a callable of the request."""

    def __init__(self, *replies) -> None:
        self.replies = list(replies) or [ok()]
        self.requests: list[httpx2.Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = 0.0

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
            if isinstance(reply, Exception):
                raise reply
            return reply(request) if callable(reply) else reply
        finally:
            self.in_flight -= 1

    def bodies(self) -> list[dict]:
        return [json.loads(r.content) for r in self.requests]


class Forced:
    """The simulator behind a handler that forces the given faults (x-sim-force-error) on the
    next requests, one each; None lets a request through clean."""

    def __init__(self, sim, *faults: str | None) -> None:
        self.sim = sim
        self.inner = sim.transport()
        self.faults = list(faults)

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if self.faults and (fault := self.faults.pop(0)):
            request.headers["x-sim-force-error"] = fault
        return await self.inner.handle_async_request(request)


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


# Prices of our own, so the arithmetic below does not move when the defaults do (USD per million).
PRICES = {
    "claude-opus-4-8": {"input": 15.0, "output": 75.0, "cache_write": 18.75, "cache_read": 1.5},
    "claude-sonnet-4-6": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.1},
}
MODELS = {
    "executor": "claude-sonnet-4-6",
    "grader": "claude-opus-4-8",
    "comparator": "claude-opus-4-8",
    "analyzer": "claude-opus-4-8",
    "proposer": "claude-opus-4-8",
    "trigger": "claude-haiku-4-5",
}


def settings_with(**llm) -> Settings:
    return Settings.model_validate(
        {"llm": {"provider": "sim", **llm}, "models": MODELS, "prices": PRICES}
    )


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def connect(store, sleeps):
    """Build a client over an inline Api through the real SDK; closed after the test."""
    made: list[ModelClient] = []

    def build(api, settings: Settings | None = None, **kw) -> ModelClient:
        sdk = anthropic.AsyncAnthropic(
            api_key="test-key",
            base_url="http://api.invalid",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api)),
        )
        client = ModelClient(settings or settings_with(), store, sdk, sleep=sleeps, **kw)
        made.append(client)
        return client

    yield build
    for client in made:
        await client.aclose()


def retry_events(logs) -> list[dict]:
    return [e for e in logs if e["event"] == "llm.retry_scheduled"]


# -- retries ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("retry_after", "cap", "expected"), [("7", 60.0, 7.0), ("120", 10.0, 10.0)]
)
async def test_429_waits_as_long_as_retry_after_says_capped_at_backoff_max(
    connect, sleeps, store, log_capture, retry_after, cap, expected
):
    api = Api(error(429, "rate_limit_error", headers={"retry-after": retry_after}), ok())
    client = connect(api, settings_with(backoff_max_s=cap))
    reply = await client.message("grader", messages=USER)
    assert reply.content[0].text == "hello"
    assert sleeps.waits == [expected]
    [event] = retry_events(log_capture)
    assert event == {
        **event,
        "role": "grader",
        "attempt": 1,
        "cause": "rate_limit",
        "wait": expected,
    }
    assert store.query("select attempts, outcome from calls") == [{"attempts": 2, "outcome": "ok"}]
    assert client.stats()["retries"] == {"rate_limit": 1}


@pytest.mark.parametrize(
    ("fault", "cause", "stream"),
    [
        ("429", "rate_limit", False),
        ("529", "overloaded", False),
        ("500", "server_error", False),
        ("timeout", "timeout", False),
        ("truncate", "truncated", False),
        ("truncate", "truncated", True),
        ("529", "overloaded", True),
    ],
)
async def test_each_simulated_fault_is_retried_then_answered(
    connect, sim, sleeps, log_capture, fault, cause, stream
):
    client = connect(Forced(sim, fault), settings_with(backoff_initial_s=2.0))
    reply = await client.message("executor", messages=USER, stream=stream)
    assert reply.content and reply.stop_reason == "end_turn"
    assert sim.stats.calls == 2 and sim.stats.faults_injected == {fault: 1}
    [event] = retry_events(log_capture)
    assert (event["cause"], event["attempt"], event["role"]) == (cause, 1, "executor")
    expected_wait = 0.0 if fault == "429" else sleeps.waits[0]  # the sim's 429 says retry-after: 0
    assert sleeps.waits == [expected_wait] and event["wait"] == round(expected_wait, 3)
    if fault != "429":
        # Exponential backoff with equal jitter: the first wait is within [initial/2, initial].
        assert 1.0 <= sleeps.waits[0] <= 2.0
    assert client.stats()["retries"] == {cause: 1}


def _disconnect(request):
    raise httpx2.ConnectError("connection refused", request=request)


@pytest.mark.parametrize(
    ("fault", "cause", "stream"),
    [
        (error(503, "api_error"), "server_error", False),
        (error(408, "timeout_error"), "request_timeout", False),
        (error(409, "conflict_error"), "conflict", False),
        (_disconnect, "connection", False),
        (sse(answer("half"), error_kind="overloaded_error"), "overloaded", True),
        (sse(answer("half"), stop=False), "truncated", True),
    ],
    ids=["503", "408", "409", "connection", "stream-overloaded-event", "stream-without-stop"],
)
async def test_other_transient_failures_are_retried(
    connect, sleeps, log_capture, fault, cause, stream
):
    good = sse(answer("whole")) if stream else ok(answer("whole"))
    api = Api(fault, good)
    client = connect(api)
    reply = await client.message("executor", messages=USER, stream=stream)
    assert reply.content[0].text == "whole" and len(api.requests) == 2
    assert [e["cause"] for e in retry_events(log_capture)] == [cause]


async def test_the_simulated_spend_limit_stops_without_retrying(connect, sim, sleeps, store):
    client = connect(Forced(sim, "429-spend"))
    with pytest.raises(ProviderSpendLimit, match="spend limit is reached") as caught:
        await client.message("proposer", messages=USER)
    assert "usage limits" in str(caught.value) and len(caught.value.problems) == 1
    assert sim.stats.calls == 1 and sleeps.waits == []
    assert store.query("select outcome from calls") == [{"outcome": "error"}]


@pytest.mark.parametrize(
    "fault",
    [
        error(429, "rate_limit_error", "You have reached your specified API usage limits."),
        httpx2.Response(
            429,
            json={
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "limit",
                    "details": {"error_code": "enforced_spend_limit_reached"},
                },
            },
        ),
    ],
    ids=["message", "error_code"],
)
async def test_spend_limit_stops_without_retrying(connect, sleeps, store, log_capture, fault):
    api = Api(fault, ok())
    client = connect(api)
    with pytest.raises(ProviderSpendLimit, match="spend limit is reached"):
        await client.message("proposer", messages=USER)
    assert len(api.requests) == 1 and sleeps.waits == [] and retry_events(log_capture) == []
    assert store.query("select outcome from calls") == [{"outcome": "error"}]
    assert client.limiter.limit == 8  # not a rate limit: the concurrency stays


async def test_gives_up_after_max_attempts_with_a_typed_error(
    connect, sim, sleeps, store, log_capture
):
    client = connect(Forced(sim, "529", "529", "529"), settings_with(max_attempts=3))
    with pytest.raises(ModelCallFailed, match="after 3 attempts") as caught:
        await client.message("grader", messages=USER)
    assert (caught.value.cause, caught.value.attempts, caught.value.exit_code) == (
        "overloaded",
        3,
        1,
    )
    assert sim.stats.calls == 3 and len(sleeps.waits) == 2
    assert [e["attempt"] for e in retry_events(log_capture)] == [1, 2]
    [row] = store.query("select outcome, attempts, cost_usd, error from calls")
    assert (row["outcome"], row["attempts"], row["cost_usd"]) == ("error", 3, 0.0)
    assert "Overloaded" in row["error"]
    # A failed call is not a cache entry: asking again reaches the model again.
    await client.message("grader", messages=USER)
    assert sim.stats.calls == 4
    assert store.query("select outcome from calls") == [{"outcome": "ok"}]


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_credentials_name_the_key_variable_and_the_simulator(connect, sleeps, status):
    api = Api(error(status, "authentication_error", "invalid x-api-key"))
    with pytest.raises(WorkFailed) as caught:
        await connect(api).message("grader", messages=USER)
    assert "ANTHROPIC_API_KEY" in str(caught.value) and "--provider sim" in str(caught.value)
    assert len(caught.value.problems) == 1 and len(api.requests) == 1 and sleeps.waits == []


async def test_a_bad_request_is_not_retried(connect, sleeps):
    api = Api(error(400, "invalid_request_error", "max_tokens: too large"))
    with pytest.raises(ModelCallFailed, match="HTTP 400: max_tokens: too large"):
        await connect(api).message("grader", messages=USER)
    assert len(api.requests) == 1 and sleeps.waits == []


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        # llama.cpp (its body has the same error.message shape) and Anthropic's own words.
        (
            error(
                400,
                "exceed_context_size_error",
                "request (1531 tokens) exceeds the available "
                "context size (1024 tokens), try increasing it",
            ),
            "longer than the model's context window",
        ),
        (
            error(
                400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
            ),
            "longer than the model's context window",
        ),
        (error(404, "not_found_error", "model: nope"), "check models.grader and llm.base_url"),
        (
            error(400, "invalid_request_error", "tools.0: unknown type"),
            "check models.grader and that the server at llm.base_url takes this request",
        ),
    ],
)
async def test_a_refused_call_says_why_and_what_to_change(connect, reply, expected):
    with pytest.raises(ModelCallFailed) as caught:
        await connect(Api(reply)).message("grader", messages=USER)
    assert expected in str(caught.value) and "check the model name" not in str(caught.value)


async def test_a_server_that_is_not_there_is_named_as_such(connect):
    with pytest.raises(ModelCallFailed) as caught:
        await connect(Api(_disconnect), settings_with(max_attempts=2)).message(
            "grader", messages=USER
        )
    assert "failed after 2 attempts (connection: Connection error. connection refused)" in str(
        caught.value
    )
    assert "the server at llm.base_url is running" in str(caught.value)


# -- ledger, cache, cost ---------------------------------------------------------------------------


async def test_a_repeated_call_is_served_from_the_ledger(client, sim, store):
    one = await client.message("executor", system="Be brief.", messages=USER)
    assert sim.stats.calls == 1 and client.simulated
    two = await client.message(
        "executor", system=[{"type": "text", "text": "Be brief."}], messages=USER
    )
    assert sim.stats.calls == 1 and one == two
    [call] = store.query("select hash, cost_usd from calls")
    [hit] = store.query("select hash, role, saved_usd from cache_hits")
    assert hit == {"hash": call["hash"], "role": "executor", "saved_usd": call["cost_usd"]}
    stats = client.stats()
    assert (stats["calls"], stats["cache_hits"], stats["saved_usd"]) == (1, 1, call["cost_usd"])
    assert call["cost_usd"] > 0 and stats["spent_usd"] == pytest.approx(call["cost_usd"])


async def test_a_resumed_run_never_pays_twice_for_a_completed_call(tmp_path, settings, sim):
    from optimizer.sim import Simulator

    first_store = Store(tmp_path / "run" / "state.db")
    first = make_client(settings, first_store, simulator=sim)
    answer_ = await first.message("executor", messages=USER, sample=2)
    # The process dies here: no close, no flush. A new process opens the same run folder.
    fresh_sim = Simulator(seed=0)
    second_store = Store(tmp_path / "run" / "state.db")
    second = make_client(settings, second_store, simulator=fresh_sim)
    again = await second.message("executor", messages=USER, sample=2, stream=True)
    assert again == answer_ and fresh_sim.stats.calls == 0
    assert second.stats()["cache_hits"] == 1 and second.stats()["calls"] == 0
    for client, db in ((first, first_store), (second, second_store)):
        await client.aclose()
        db.close()


async def test_samples_are_distinct_calls_and_roles_too(connect, store):
    api = Api(ok())
    client = connect(api)
    for sample in (0, 1, 1):
        await client.message("executor", messages=USER, sample=sample)
    await client.message("trigger", messages=USER, model="claude-sonnet-4-6")
    assert len(api.requests) == 3
    rows = store.query("select role, sample from calls order by role, sample")
    assert rows == [
        {"role": "executor", "sample": 0},
        {"role": "executor", "sample": 1},
        {"role": "trigger", "sample": 0},
    ]
    assert [r.headers["x-optimizer-sample"] for r in api.requests] == ["0", "1", "0"]
    assert [r.headers["x-optimizer-role"] for r in api.requests] == [
        "executor",
        "executor",
        "trigger",
    ]


async def test_cost_prices_each_kind_of_token_at_its_own_rate(connect, store):
    usage = {
        "input_tokens": 1000,
        "output_tokens": 500,
        "cache_creation_input_tokens": 2000,
        "cache_read_input_tokens": 3000,
    }
    client = connect(Api(ok(answer(usage=usage))))
    await client.message("executor", messages=USER, model="claude-sonnet-4-6")
    # claude-sonnet-4-6: $3 in, $15 out, $3.75 cache write, $0.30 cache read per million tokens
    expected = (1000 * 3 + 500 * 15 + 2000 * 3.75 + 3000 * 0.30) / 1e6
    [row] = store.query("select * from calls")
    assert row["cost_usd"] == pytest.approx(expected) == pytest.approx(0.0189)
    assert (
        row["input_tokens"],
        row["output_tokens"],
        row["cache_write_tokens"],
        row["cache_read_tokens"],
    ) == (1000, 500, 2000, 3000)
    assert row["model"] == "claude-sonnet-4-6" and row["latency_ms"] >= 0
    assert client.stats()["spent_usd"] == pytest.approx(expected)
    big = settings_with().price("claude-opus-4-8")
    assert call_cost(big, anthropic.types.Usage(**usage)) == pytest.approx(
        (1000 * 15 + 500 * 75 + 2000 * 18.75 + 3000 * 1.5) / 1e6
    )


async def test_concurrent_identical_calls_are_paid_once(connect):
    api = Api(ok())
    api.delay = 0.01
    client = connect(api)
    replies = await asyncio.gather(*(client.message("grader", messages=USER) for _ in range(5)))
    assert len(api.requests) == 1 and all(r == replies[0] for r in replies)
    assert client.stats()["cache_hits"] == 4


# -- prompt caching and request shape ---------------------------------------------------------------


async def test_stable_prefixes_and_the_conversation_are_marked_for_prompt_caching(connect):
    api = Api(ok())
    tools = [{"name": n, "description": n * 9000, "input_schema": {"type": "object"}} for n in "ab"]
    turns = [
        {"role": "user", "content": "profile the file"},
        {"role": "assistant", "content": [{"type": "text", "text": "Reading it."}]},
        {"role": "user", "content": [{"type": "text", "text": "go on"}]},
    ]
    await connect(api).message("executor", system="You are careful.", messages=turns, tools=tools)
    body = api.bodies()[0]
    # The executor's model caches prefixes from 2,048 tokens: the tools (18,000
    # characters) pass it, and so do the system prompt and the conversation after them.
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    # The conversation's last block: the next turn reads this one from the cache.
    assert body["messages"][-1]["content"][-1] == {
        "type": "text",
        "text": "go on",
        "cache_control": {"type": "ephemeral"},
    }
    assert [m.get("cache_control") for m in body["messages"][0:2]] == [None, None]
    assert json.dumps(body).count('"cache_control"') == 3  # within the API's four
    assert "x-api-key" not in body and "stream" not in body


async def test_a_prefix_below_the_models_cacheable_minimum_is_not_marked(connect):
    api = Api(ok())
    tools = [{"name": "a", "description": "a", "input_schema": {"type": "object"}}]
    await connect(api).message("executor", system="You are careful.", messages=USER, tools=tools)
    # A few hundred characters, far below 2,048 tokens: a breakpoint would buy nothing.
    assert "cache_control" not in json.dumps(api.bodies()[0])


async def test_prompt_caching_off_sends_no_breakpoints_and_keeps_the_hash(store, connect):
    api = Api(ok())
    await connect(api, settings_with(prompt_caching=False)).message(
        "executor", system="S", messages=USER
    )
    assert "cache_control" not in json.dumps(api.bodies()[0])
    # The same request with caching on is the same ledger entry.
    await connect(api).message("executor", system="S", messages=USER)
    assert len(api.requests) == 1


# -- streaming -------------------------------------------------------------------------------------


async def test_a_streamed_answer_with_a_tool_call_is_parsed(connect, store):
    streamed = answer(
        tool=("verdict", {"score": 4, "notes": ["a", "b"]}),
        usage={"input_tokens": 30, "output_tokens": 12},
    )
    api = Api(sse(streamed))
    reply = await connect(api).message("grader", messages=USER, stream=True)
    assert api.bodies()[0]["stream"] is True
    [block] = reply.content
    assert (block.type, block.name, block.input) == (
        "tool_use",
        "verdict",
        {"score": 4, "notes": ["a", "b"]},
    )
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (30, 12)
    assert store.query("select output_tokens from calls") == [{"output_tokens": 12}]


async def test_a_simulated_stream_gives_the_same_answer_as_a_plain_call(connect, sim, store):
    from optimizer.sim import Simulator

    tool = {
        "name": "submit_label",
        "description": "label",
        "input_schema": Labelled.model_json_schema(),
    }
    ask = dict(messages=USER, tools=[tool], tool_choice={"type": "tool", "name": "submit_label"})
    streamed = await connect(Forced(sim)).message("grader", stream=True, **ask)
    plain_ = await connect(Forced(Simulator(seed=0))).message("grader", sample=1, **ask)
    twin = await connect(Forced(Simulator(seed=0))).message("grader", **ask)
    assert streamed.content == twin.content and streamed.usage == twin.usage
    assert streamed.content[0].type == "tool_use" and plain_.content[0].type == "tool_use"


# -- structured answers ---------------------------------------------------------------------------


class Verdict(BaseModel):
    """The grade of one output."""

    score: int = Field(ge=1, le=5)
    reasons: list[Reason]


class Reason(BaseModel):
    text: str


Verdict.model_rebuild()


async def test_a_malformed_structured_answer_is_repaired_once(connect, store):
    bad = answer(tool=("grade", {"score": 9}))
    good = answer(tool=("grade", {"score": 4, "reasons": [{"text": "clear"}]}))
    api = Api(ok(bad), ok(good))
    verdict = await connect(api).structured(
        "grader", system="Grade.", messages=USER, schema=Verdict, tool_name="grade"
    )
    assert verdict == Verdict(score=4, reasons=[Reason(text="clear")])
    first, second = api.bodies()
    assert first["tool_choice"] == {"type": "tool", "name": "grade"}
    [tool] = first["tools"]
    assert tool["name"] == "grade" and tool["description"] == "The grade of one output."
    assert "$defs" in tool["input_schema"] and "Reason" in tool["input_schema"]["$defs"]
    assert second["messages"][:1] == USER
    assert second["messages"][1]["role"] == "assistant"
    [result] = second["messages"][2]["content"]
    assert (result["type"], result["tool_use_id"], result["is_error"]) == (
        "tool_result",
        "toolu_1",
        True,
    )
    assert "score" in result["content"] and "reasons" in result["content"]
    assert store.query("select outcome from calls") == [{"outcome": "ok"}, {"outcome": "ok"}]


async def test_two_malformed_answers_raise_structured_answer_error(connect):
    api = Api(ok(answer(tool=("grade", {"score": 9}))), ok(answer("I think it is fine.")))
    with pytest.raises(StructuredAnswerError) as caught:
        await connect(api).structured(
            "grader", system="Grade.", messages=USER, schema=Verdict, tool_name="grade"
        )
    assert (
        "score" in caught.value.first_error and "no call of the tool" in caught.value.second_error
    )
    assert len(api.requests) == 2


class Labelled(BaseModel):
    """A label with notes."""

    model_config = ConfigDict(extra="forbid")
    label: str
    notes: list[Note]


class Note(BaseModel):
    text: str


Labelled.model_rebuild()


async def test_a_malformed_simulated_answer_is_repaired_once(connect, sim, store):
    client = connect(Forced(sim, "malformed"))
    answer_ = await client.structured(
        "grader", system="Label it.", messages=USER, schema=Labelled, tool_name="submit_label"
    )
    assert isinstance(answer_, Labelled)
    assert sim.stats.calls == 2 and sim.stats.faults_injected == {"malformed": 1}
    assert [r["outcome"] for r in store.query("select outcome from calls")] == ["ok", "ok"]
    # The same question again is two ledger hits: the malformed first answer and its repair.
    again = await client.structured(
        "grader", system="Label it.", messages=USER, schema=Labelled, tool_name="submit_label"
    )
    assert again == answer_ and sim.stats.calls == 2 and client.stats()["cache_hits"] == 2


async def test_two_malformed_simulated_answers_raise_structured_answer_error(connect, sim):
    client = connect(Forced(sim, "malformed", "malformed"))
    with pytest.raises(StructuredAnswerError) as caught:
        await client.structured(
            "grader", system="Label it.", messages=USER, schema=Labelled, tool_name="submit_label"
        )
    assert "label" in caught.value.first_error and "label" in caught.value.second_error
    assert caught.value.role == "grader" and sim.stats.calls == 2


# -- budget ---------------------------------------------------------------------------------------


async def test_a_call_that_would_pass_the_budget_never_starts(connect, store):
    api = Api(ok())
    client = connect(api, budget_usd=0.001)
    # claude-opus-4-8 output at $75/M here: 8192 tokens of room alone cost about $0.61
    with pytest.raises(BudgetExhausted, match=r"budget of \$0.00") as caught:
        await client.message("grader", messages=USER)
    assert caught.value.exit_code == 0
    assert api.requests == [] and store.query("select * from calls") == []


async def test_spend_already_in_the_ledger_counts_against_the_budget(connect, store):
    store.record_call(
        {
            "hash": "old",
            "role": "grader",
            "model": "claude-opus-4-8",
            "sample": 0,
            "outcome": "ok",
            "cost_usd": 0.95,
            "attempts": 1,
        }
    )
    api = Api(ok())
    client = connect(api, budget_usd=1.0)
    await client.message("executor", messages=USER, max_tokens=100, model="claude-haiku-4-5")
    with pytest.raises(BudgetExhausted, match=r"from \$0.95"):
        await client.message("grader", messages=USER, max_tokens=1000)
    assert len(api.requests) == 1


async def test_a_budget_stop_says_its_dollars_in_cents_and_no_empty_flight(connect, store):
    store.record_call(
        {
            "hash": "old",
            "role": "grader",
            "model": "claude-opus-4-8",
            "sample": 0,
            "outcome": "ok",
            "cost_usd": 0.9512,
            "attempts": 1,
        }
    )
    client = connect(Api(ok()), budget_usd=1.0)
    with pytest.raises(BudgetExhausted) as caught:
        await client.message("grader", messages=USER, max_tokens=1000)
    said = str(caught.value)
    assert "the run's spend from $0.95 past its budget of $1.00" in said, said
    assert "in flight" not in said and "$0.9512" not in said  # was "$0.9512 (plus $0.0000 …)"


async def test_the_budget_check_prices_the_answers_measured_so_far_not_max_tokens(connect, store):
    """Three measured grader answers of 5 tokens: the fourth is priced at 2 × 5 + 256 tokens, not
    at its 1,060 tokens of room ($0.0795 at $75/M), which would pass the $0.08 budget."""
    client = connect(Api(ok()), budget_usd=0.08)
    for sample in range(3):
        await client.message("grader", messages=USER, max_tokens=1000, sample=sample)
    await client.message("grader", messages=USER, max_tokens=1060, sample=3)
    assert len(store.query("select * from calls")) == 4


# -- concurrency ----------------------------------------------------------------------------------


async def test_the_concurrency_limit_is_never_exceeded(connect):
    from optimizer.sim import Service, Simulator

    sim = Simulator(seed=0, service=Service(latency_ms=20))
    client = connect(Forced(sim), settings_with(max_concurrency=5))
    await asyncio.gather(*(client.message("executor", messages=USER, sample=i) for i in range(50)))
    assert sim.stats.calls == 50
    assert sim.stats.max_in_flight == client.limiter.max_in_flight == 5


async def test_a_429_halves_the_limit_once_per_burst(connect, sim):
    client = connect(Forced(sim, "429"), settings_with(max_concurrency=8))
    await client.message("executor", messages=USER)
    assert client.limiter.limit == 4 and sim.stats.calls == 2


def test_the_limit_recovers_additively_and_never_drops_below_one():
    limiter = AdaptiveLimiter(8)
    epoch = limiter._epoch
    limiter.on_rate_limited(epoch)
    limiter.on_rate_limited(epoch)  # same burst: counted once
    assert limiter.limit == 4
    for _ in range(4):
        limiter.on_success()
    assert limiter.limit == 5
    for _ in range(10):
        limiter.on_rate_limited(limiter._epoch)
    assert limiter.limit == 1


async def test_rate_limit_headers_cap_the_limit(connect):
    api = Api(
        ok(
            headers={
                "anthropic-ratelimit-requests-remaining": "3",
                "anthropic-ratelimit-tokens-remaining": "90000",
            }
        )
    )
    client = connect(api)
    await client.message("executor", messages=USER)
    assert client.limiter.limit == 3


# -- providers ----------------------------------------------------------------------------------


def test_the_anthropic_provider_needs_a_key(store, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings = Settings.model_validate({"llm": {"provider": "anthropic"}})
    with pytest.raises(BadInput, match="No API key: set ANTHROPIC_API_KEY"):
        make_client(settings, store)


async def test_providers_are_labelled_and_the_base_url_is_used(store, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    settings = Settings.model_validate({"llm": {"provider": "anthropic", "timeout_s": 12}})
    client = make_client(settings, store, api_key="sk-test")
    assert client.simulated is False
    assert str(client.sdk.base_url).startswith("http://127.0.0.1:9")
    assert client.sdk.max_retries == 0 and client.sdk.timeout == 12
    await client.aclose()


def test_the_package_exports_its_verbs_and_loads_the_sdk_only_when_asked():
    import optimizer.model as model

    assert all(getattr(model, name) is not None for name in model.__all__)
    # The simulator and the light commands import prompts and scopes: that must not load the SDK.
    code = (
        "import sys, optimizer.model.prompts; from optimizer.model import scope, scoped; "
        "print('anthropic' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
