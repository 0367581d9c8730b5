"""The simulator answers only when chosen: a command that calls models without a chosen provider
uses the Messages API when ANTHROPIC_API_KEY is set and otherwise refuses in one sentence (exit
2, nothing written); --provider sim stays explicit and labelled (docs/design.md §9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer import config
from optimizer.errors import BadInput
from optimizer.model import provider

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "fixtures" / "csv-report"


@pytest.fixture
def unchosen(monkeypatch, tmp_path) -> Path:
    """No provider chosen anywhere (no variable, no config.toml in the folder) and no key."""
    monkeypatch.delenv("OPTIMIZER_LLM_PROVIDER", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_unchosen_provider_is_the_messages_api_when_the_key_is_set():
    loaded = provider.chosen(config.load(env={}), {"ANTHROPIC_API_KEY": "sk-ant-test"})
    assert loaded.settings.llm.provider == "anthropic"
    assert loaded.source("llm.provider") == "ANTHROPIC_API_KEY is set"


def test_a_chosen_provider_is_kept_with_or_without_the_key():
    for env in ({}, {"ANTHROPIC_API_KEY": "sk-ant-test"}):
        picked = config.load(env={"OPTIMIZER_LLM_PROVIDER": "sim"})
        assert provider.chosen(picked, env) is picked


def test_the_repository_config_toml_chooses_no_provider():
    # Read whenever a command runs from the repository's folder: a provider there would make
    # every night and gate started from it simulated.
    with pytest.raises(BadInput, match="--provider sim"):
        provider.chosen(config.load(ROOT / "config.toml", env={}), {})


@pytest.mark.parametrize("command", ["run", "benchmark", "execute", "gate"])
def test_a_command_without_a_provider_or_a_key_refuses_in_one_sentence(cli, unchosen, command):
    out = unchosen / "out"
    args = {
        "run": ["run", EXAMPLE, "--run-dir", out],
        "benchmark": ["benchmark", EXAMPLE, "--out", out],
        "execute": ["execute", EXAMPLE, "--eval", "1", "--out", out],
        "gate": ["gate", EXAMPLE, EXAMPLE, "--out", out, "--comment", unchosen / "gate.md"],
    }[command]
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [f"error: {provider.UNCHOSEN}"]
    assert "--provider sim" in provider.UNCHOSEN and "ANTHROPIC_API_KEY" in provider.UNCHOSEN
    assert sorted(p.name for p in unchosen.iterdir()) == []  # nothing written


def test_a_night_without_a_provider_or_a_key_says_so_in_its_log_and_runs_nothing(cli, unchosen):
    runs = unchosen / "runs"
    result = cli("nightly", EXAMPLE, "--until", "07:00", "--budget-usd", "5", "--runs-root", runs)
    assert result.exit_code == 2, result.output
    logged = "".join(p.read_text() for p in runs.glob("*.log"))
    assert "this night did not run: No API key" in logged
    assert not [p for p in runs.iterdir() if p.is_dir()]  # no run folder, simulated or not


def test_a_cost_preview_without_a_provider_prices_the_messages_api(cli, unchosen):
    result = cli("run", EXAMPLE, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "cost estimate" in result.output and "simulated" not in result.output


def test_the_simulator_chosen_on_the_command_line_is_labelled(cli, unchosen):
    result = cli("run", EXAMPLE, "--provider", "sim", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "cost estimate (simulated provider)" in result.output


def test_scheduling_nights_without_a_provider_says_they_call_the_messages_api(
    cli, unchosen, monkeypatch
):
    monkeypatch.setenv("OPTIMIZER_SCHEDULER", "cron")  # no detection: the plan is only printed
    args = ["schedule", EXAMPLE, "--budget-usd", "10", "--dry-run"]
    planned = cli(*args)
    assert planned.exit_code == 0, planned.output
    assert "each night calls the Messages API with ANTHROPIC_API_KEY" in planned.stderr
    assert "--provider sim" in planned.stderr and "--provider" not in planned.stdout
    simulated = cli(*args, "--provider", "sim")
    assert simulated.exit_code == 0, simulated.output
    assert "Messages API" not in simulated.stderr and "--set llm.provider=sim" in simulated.stdout
