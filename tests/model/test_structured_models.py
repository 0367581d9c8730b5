"""A structured answer is asked for as each model takes it: a forced tool where the model takes one,
with thinking turned off where it thinks by default, and the tool offered alone and named in the
system prompt where the model refuses a forced tool. The simulator refuses what the API refuses,
so each case fails against it when asked the other way."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel
from test_claude_code import Recording  # the simulator, keeping every body it answers

from optimizer.config import Settings
from optimizer.model import make_client
from optimizer.store.db import Store


class Verdict(BaseModel):
    """Whether the answer holds."""

    holds: bool
    why: str


@pytest.mark.parametrize(
    ("model", "tool_choice", "thinking", "told"),
    [
        ("claude-opus-5-5", {"type": "auto"}, None, True),
        ("claude-sonnet-5-5", {"type": "auto"}, None, True),
        ("claude-haiku-5-5", {"type": "tool", "name": "verdict"}, {"type": "disabled"}, False),
        ("claude-opus-4-8", {"type": "tool", "name": "verdict"}, None, False),
    ],
)
async def test_each_model_is_asked_for_its_tool_call_as_it_takes_one(
    tmp_path: Path, model: str, tool_choice: dict, thinking: dict | None, told: bool
) -> None:
    sim = Recording()
    settings = Settings.model_validate({"llm": {"provider": "sim"}, "models": {"grader": model}})
    store = Store(tmp_path / "state.db")
    client = make_client(settings, store, simulator=sim)
    try:
        answer = await client.structured(
            "grader",
            system="Judge the answer.",
            messages=[{"role": "user", "content": "Is 2 + 2 = 4?"}],
            schema=Verdict,
            tool_name="verdict",
        )
    finally:
        await client.aclose()
        store.close()
    assert isinstance(answer, Verdict)
    [body] = sim.bodies
    assert body["model"] == model and body["tool_choice"] == tool_choice
    assert body.get("thinking") == thinking
    said = " ".join(block["text"] for block in body["system"])
    assert ("only by calling the tool verdict" in said) is told


def test_a_model_the_catalog_does_not_list_is_asked_as_before() -> None:
    from optimizer.model.structured import asking

    # A server of the user's own: the forced tool, and no thinking field it may not know.
    how = asking("qwen2.5:0.5b", "verdict")
    assert how.tool_choice == {"type": "tool", "name": "verdict"}
    assert how.thinking is None and how.told is None
