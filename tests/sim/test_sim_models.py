"""The simulator refuses what the Claude API refuses about a model (the catalog's facts): a name it
does not serve or has retired, an answer limit past the model's, a forced tool to a model that
takes none, thinking left on under a forced tool, a body past the size limit; and it answers the
Models endpoint. Each through the real SDK, as our client meets them."""

from __future__ import annotations

import datetime as dt
import json

import anthropic
import pytest
from test_sim import client_for  # the real SDK over the simulator's transport

from optimizer.config import Settings
from optimizer.model.preflight import ask_with_sdk, refused_by_provider, refused_offline
from optimizer.sim import Simulator, serve

ASK = [{"role": "user", "content": "Say hello."}]
TOOL = {"name": "verdict", "description": "v", "input_schema": {"type": "object"}}
FORCED = {"type": "tool", "name": "verdict"}


@pytest.mark.parametrize("model", ["claude-sonnet-9", "claude-opus-4-1", "gpt-4o"])
async def test_a_name_the_api_does_not_serve_is_a_404(model: str) -> None:
    with pytest.raises(anthropic.NotFoundError, match=f"model: {model}"):
        await client_for(Simulator()).messages.create(model=model, max_tokens=10, messages=ASK)


async def test_a_model_is_served_until_the_day_it_retires() -> None:
    # Sonnet 4.5 retires on 2026-11-30: the simulator's day decides, as the API's does.
    before = client_for(Simulator(today=dt.date(2026, 11, 29)))
    reply = await before.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=ASK)
    assert reply.content
    after = client_for(Simulator(today=dt.date(2026, 11, 30)))
    with pytest.raises(anthropic.NotFoundError):
        await after.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=ASK)


def test_an_answer_limit_past_the_models_is_refused() -> None:
    # Straight to the service: the SDK itself refuses so large a non-streamed answer.
    sim, key = Simulator(), {"x-api-key": "k"}

    def status(max_tokens: int) -> int:
        body = {"model": "claude-haiku-4-5", "max_tokens": max_tokens, "messages": ASK}
        return sim.handle("POST", "/v1/messages", key, json.dumps(body).encode()).status

    assert (status(64_000), status(64_001)) == (200, 400)


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-sonnet-5-5", "claude-fable-5-2"])
async def test_a_forced_tool_to_a_model_that_always_thinks_is_refused(model: str) -> None:
    client = client_for(Simulator())
    with pytest.raises(anthropic.BadRequestError, match='type "tool" and "any" are not supported'):
        await client.messages.create(
            model=model, max_tokens=100, messages=ASK, tools=[TOOL], tool_choice=FORCED
        )
    with pytest.raises(anthropic.BadRequestError, match='type "disabled" is not supported'):
        await client.messages.create(
            model=model, max_tokens=100, messages=ASK, thinking={"type": "disabled"}
        )
    # Offered alone with tool_choice auto, the tool is called.
    reply = await client.messages.create(
        model=model, max_tokens=100, messages=ASK, tools=[TOOL], tool_choice={"type": "auto"}
    )
    assert reply.content is not None


async def test_a_forced_tool_to_a_model_that_thinks_by_default_needs_thinking_off() -> None:
    client = client_for(Simulator())
    asked = dict(model="claude-haiku-5-5", max_tokens=100, messages=ASK, tools=[TOOL])
    with pytest.raises(anthropic.BadRequestError, match="Thinking may not be enabled"):
        await client.messages.create(**asked, tool_choice=FORCED)
    reply = await client.messages.create(**asked, tool_choice=FORCED, thinking={"type": "disabled"})
    assert reply.content is not None
    # A model that does not think by default takes the forced tool as it is.
    await client.messages.create(**{**asked, "model": "claude-opus-4-8"}, tool_choice=FORCED)


async def test_a_body_past_the_request_size_limit_is_a_413() -> None:
    big = [{"role": "user", "content": "x" * (32 * 1024 * 1024)}]
    with pytest.raises(anthropic.APIStatusError) as caught:
        await client_for(Simulator()).messages.create(
            model="claude-haiku-5-5", max_tokens=10, messages=big
        )
    assert caught.value.status_code == 413


async def test_the_models_endpoint_lists_and_names_the_served_models() -> None:
    client = client_for(Simulator(today=dt.date(2026, 11, 29)))
    listed = [m.id async for m in client.models.list()]
    assert "claude-opus-5-5" in listed and "claude-sonnet-4-5" in listed
    assert "claude-opus-4-1" not in listed  # retired on 2026-08-05
    assert (await client.models.retrieve("claude-haiku-5-5")).id == "claude-haiku-5-5"
    with pytest.raises(anthropic.NotFoundError):
        await client.models.retrieve("claude-opus-4-1")


@pytest.mark.slow  # the simulator on a loopback port
def test_the_preflight_asks_the_provider_once_a_name_and_refuses_what_it_does_not_serve():
    server, port = serve(Simulator(), "127.0.0.1", 0)
    try:
        ask = ask_with_sdk("k", f"http://127.0.0.1:{port}")
        asked: list[str] = []

        def counting(model: str) -> bool | None:
            asked.append(model)
            return ask(model)

        served = Settings.model_validate({"llm": {"provider": "anthropic"}})
        assert refused_by_provider(served, counting) is None
        assert sorted(asked) == sorted(set(served.models.model_dump().values()))
        # A name newer than the catalog, priced by the user, and one the provider does not serve.
        priced = {"claude-sonnet-9": {"input": 2, "output": 10}}
        unknown = Settings.model_validate(
            {
                "llm": {"provider": "anthropic"},
                "models": {"analyzer": "claude-sonnet-9"},
                "prices": priced,
            }
        )
        assert refused_offline(unknown) is None  # priced: only the provider can tell
        said = refused_by_provider(unknown, ask)
        assert said is not None and said.startswith("models.analyzer = claude-sonnet-9:")
        assert "404" in said
    finally:
        server.shutdown()
        server.server_close()


def test_the_preflight_leaves_a_server_of_the_users_own_alone() -> None:
    local = Settings.model_validate(
        {
            "llm": {"provider": "anthropic", "base_url": "http://127.0.0.1:8080"},
            "models": {"executor": "qwen2.5:0.5b"},
        }
    )
    assert refused_offline(local) is None
    assert refused_by_provider(local, lambda model: False) is None


def test_the_preflight_reads_the_endpoint_the_client_uses(monkeypatch) -> None:
    # ANTHROPIC_BASE_URL points the client at a server of the user's own, as llm.base_url does.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080")
    local = Settings.model_validate(
        {"llm": {"provider": "anthropic"}, "models": {"executor": "qwen2.5:0.5b"}}
    )
    assert refused_offline(local) is None
    assert refused_by_provider(local, lambda model: False) is None
