"""The optimizer as a Claude Code plugin (plugin/): the real CLI validates it, loads it with its
skill and slash commands, and, against the simulator on loopback, offers it for a request to
improve a skill. No network."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_claude_code import _binary, needs_cli

from optimizer.execute.claude_env import COMMON_ENV

pytestmark = [pytest.mark.slow, needs_cli]  # the Claude Code CLI, in subprocesses

PLUGIN = Path(__file__).resolve().parents[2] / "plugin"
COMMANDS = (
    "optimize-adopt",
    "optimize-evals",
    "optimize-morning",
    "optimize-night",
    "optimize-status",
)


def ask(request: str, base_url: str, home: Path) -> list[dict]:
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "LANG": "C.UTF-8",
        "ANTHROPIC_API_KEY": "sk-simulated",
        "ANTHROPIC_BASE_URL": base_url,
        **COMMON_ENV,
    }
    done = subprocess.run(
        [
            str(_binary()), "-p", "--output-format", "stream-json", "--verbose", "--max-turns",
            "1", "--model", "claude-sonnet-4-5", "--plugin-dir", str(PLUGIN),
        ],
        input=request, capture_output=True, text=True, env=env, cwd=home, timeout=120,
    )  # fmt: skip
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_the_cli_validates_the_plugin(tmp_path):
    done = subprocess.run(
        [str(_binary()), "plugin", "validate", str(PLUGIN)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **COMMON_ENV},
    )
    assert done.returncode == 0 and "Validation passed" in done.stdout + done.stderr, done.stderr


def test_the_plugin_loads_and_is_offered_for_a_request_to_improve_a_skill(sim_url, tmp_path):
    events = ask("Please improve my csv-report skill overnight.", sim_url, tmp_path)
    init = next(e for e in events if e.get("type") == "system" and e.get("subtype") == "init")
    assert "skill-optimizer" in [p["name"] for p in init["plugins"]]
    assert "skill-optimizer:improve-skills" in init["skills"]
    assert {f"skill-optimizer:{c}" for c in COMMANDS} <= set(init["slash_commands"])
    called = [
        block["input"].get("skill", "")
        for e in events
        if e.get("type") == "assistant"
        for block in e["message"]["content"]
        if block.get("type") == "tool_use" and block.get("name") == "Skill"
    ]
    assert called and called[0].startswith("skill-optimizer:"), called
