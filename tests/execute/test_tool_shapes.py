"""The built-in agent's tools in both shapes: Anthropic's server-defined bash and text editor for
its own API, ordinary tools with input schemas for any other Messages-API server (which would pass
a server-defined tool on to its model with no parameters). Both shapes run the same agent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from optimizer.config import Settings
from optimizer.execute import get_executor
from optimizer.execute.tools import agent_tools
from optimizer.inputs.evals import load_evals
from optimizer.model import make_client
from optimizer.sim import Simulator
from optimizer.store.db import Store

EXAMPLE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "csv-report"


def settings(provider: str = "anthropic", base_url: str = "", shape: str = "auto") -> Settings:
    return Settings.model_validate(
        {"llm": {"provider": provider, "base_url": base_url}, "execute": {"tool_schemas": shape}}
    )


def shape_of(tools: list[dict]) -> dict[str, str]:
    """Each tool's shape: 'server' (a type, no schema) or 'explicit' (an input_schema)."""
    return {
        t["name"]: "server" if "type" in t and "input_schema" not in t else "explicit"
        for t in tools
    }


@pytest.mark.parametrize(
    ("provider", "base_url", "env_url", "shape", "expected"),
    [
        ("anthropic", "", None, "auto", "server"),  # Anthropic's own API
        ("anthropic", "https://api.anthropic.com", None, "auto", "server"),
        ("sim", "", None, "auto", "server"),  # the simulator plays Anthropic's API
        ("anthropic", "http://127.0.0.1:8080", None, "auto", "explicit"),  # llama.cpp, LiteLLM, ...
        ("anthropic", "", "http://localhost:4000", "auto", "explicit"),  # the SDK's own variable
        ("anthropic", "https://api.anthropic.com.example.org", None, "auto", "explicit"),
        ("anthropic", "http://127.0.0.1:8080", None, "server", "server"),  # forced either way
        ("anthropic", "", None, "explicit", "explicit"),
    ],
)
def test_the_endpoint_decides_the_tool_shape(
    monkeypatch, provider, base_url, env_url, shape, expected
) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    if env_url:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", env_url)
    tools = agent_tools(settings(provider, base_url, shape), with_skill=True)
    assert shape_of(tools) == {
        "bash": expected,
        "str_replace_based_edit_tool": expected,
        "Skill": "explicit",
    }


def test_explicit_tools_name_every_parameter_the_handlers_read() -> None:
    tools = {t["name"]: t for t in agent_tools(settings(shape="explicit"), with_skill=False)}
    bash, editor = (
        tools["bash"]["input_schema"],
        tools["str_replace_based_edit_tool"]["input_schema"],
    )
    assert bash["required"] == ["command"] and bash["properties"]["command"]["type"] == "string"
    assert set(editor["properties"]["command"]["enum"]) == {
        "view",
        "create",
        "str_replace",
        "insert",
    }
    assert {
        "path",
        "file_text",
        "old_str",
        "new_str",
        "insert_line",
        "insert_text",
        "view_range",
    } <= set(editor["properties"])
    assert "Skill" not in tools


class RecordingSim(Simulator):
    def __init__(self, **knobs: object) -> None:
        super().__init__(**knobs)  # type: ignore[arg-type]
        self.bodies: list[dict] = []

    def handle(self, method, target, headers, raw):  # type: ignore[no-untyped-def]
        if target.startswith("/v1/messages"):
            self.bodies.append(json.loads(raw))
        return super().handle(method, target, headers, raw)


@pytest.mark.parametrize("shape", ["server", "explicit"])
def test_both_shapes_run_the_agent_to_the_same_kind_of_run(tmp_path: Path, shape: str) -> None:
    chosen = Settings.model_validate(
        {"llm": {"provider": "sim"}, "execute": {"tool_schemas": shape}}
    )
    sim = RecordingSim(seed=0)
    store = Store(tmp_path / "state.db")

    async def go():  # type: ignore[no-untyped-def]
        client = make_client(chosen, store, simulator=sim)
        try:
            return await get_executor("anthropic", chosen, client=client).execute(
                skill_dir=EXAMPLE,
                skill_name=None,
                eval=load_evals(EXAMPLE).by_id(1),
                inputs_root=EXAMPLE,
                trial_dir=tmp_path / "run-1",
                run_number=1,
                sample=0,
            )
        finally:
            await client.aclose()

    record = asyncio.run(go())
    store.close()
    assert record.status == "ok", record.error
    assert record.files_created == ["report.md"]
    # The editor wrote it, whatever its shape (and the user notes, when this run has some).
    assert record.tool_calls.get("Write") == 1 + (tmp_path / "run-1/outputs/user_notes.md").exists()
    for body in sim.bodies:
        assert shape_of(body["tools"]) == {
            "bash": shape,
            "str_replace_based_edit_tool": shape,
            "Skill": "explicit",
        }
