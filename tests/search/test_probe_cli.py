"""The description target measures triggering through the Claude Code CLI when asked (or, with
`auto`, wherever the CLI is installed and the provider is real): one `claude -p QUERY` per query
and run with the skill under .claude/skills/, recorded like the API probe, and named in status."""

from __future__ import annotations

import json
import sqlite3

import pytest
from inprocess import EXAMPLE, cli
from test_claude_code import needs_cli

from optimizer.config import Settings
from optimizer.errors import BadInput
from optimizer.search import probe

QUERIES = [
    ("Profile sales.csv into a markdown report with column types", True),
    ("Summarise the CSV file orders.csv: row count, columns, min and max", True),
    ("Make a markdown report of the survey CSV and show the blank answers", True),
    ("Write a haiku about autumn leaves", False),
    ("Translate this sentence into French: good morning", False),
    ("What is the capital of Australia?", False),
]


def test_auto_is_the_api_probe_offline_and_the_cli_where_it_is_installed(monkeypatch):
    sim = Settings.model_validate({"llm": {"provider": "sim"}})
    real = Settings.model_validate({"llm": {"provider": "anthropic"}})
    assert probe.method_for(sim) == "api"
    monkeypatch.setattr(probe, "find_claude", lambda s: "claude")
    assert probe.method_for(real) == "claude-code"
    assert probe.method_for(Settings.model_validate({"probe": {"method": "api"}})) == "api"

    def missing(settings):
        raise BadInput("not installed")

    monkeypatch.setattr(probe, "find_claude", missing)
    assert probe.method_for(real) == "api"


def test_asking_for_the_cli_probe_without_the_cli_is_bad_input(tmp_path, monkeypatch):
    skill = tmp_path / "skill"
    import shutil

    shutil.copytree(EXAMPLE, skill)
    run_dir = tmp_path / "run"
    out = cli(
        monkeypatch,
        None,
        "run",
        str(skill),
        "--target",
        "description",
        "--provider",
        "sim",
        "--run-dir",
        str(run_dir),
        "--set",
        "probe.method=claude-code",
        "--set",
        f"execute.claude_binary={tmp_path / 'no-claude'}",
        code=2,
    )
    assert "no-claude" in out and not run_dir.exists()


@pytest.mark.slow
@needs_cli
def test_a_description_run_probes_through_the_claude_code_cli(tmp_path, monkeypatch):
    import shutil

    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    (skill / "evals" / "trigger_evals.json").write_text(
        json.dumps([{"query": q, "should_trigger": s} for q, s in QUERIES])
    )
    run_dir = tmp_path / "run"
    cli(
        monkeypatch,
        None,
        "run",
        str(skill),
        "--target",
        "description",
        "--provider",
        "sim",
        "--run-dir",
        str(run_dir),
        "--max-iterations",
        "0",
        "--set",
        "probe.method=claude-code",
        "--set",
        "evals.runs_per_eval=1",
    )
    report = json.loads((run_dir / "v0" / "trigger.json").read_text())
    assert report["probe"] == "claude-code"
    with sqlite3.connect(run_dir / "state.db") as db:
        rows = db.execute(
            "select status, skill_invoked from trials where version = 'v0' and "
            "configuration = 'trigger'"
        ).fetchall()
    assert rows and all(status == "ok" for status, _ in rows)
    assert any(invoked for _, invoked in rows)  # the CLI called Skill with this skill
    assert not (run_dir / ".probes" / "v0").exists() or not any(
        (run_dir / ".probes" / "v0").iterdir()
    )
    status = json.loads(cli(monkeypatch, None, "status", str(run_dir), "--json"))
    assert status["probe"] == "claude-code"


async def test_a_cli_that_fails_before_the_model_answers_is_missing_data(tmp_path):
    from types import SimpleNamespace

    from optimizer.inputs.triggers import Query

    class Fake:
        def __init__(self, **record):
            self.record = SimpleNamespace(**record)

        async def execute(self, **kw):
            return self.record

    q = Query(id=1, query="profile sales.csv", should_trigger=True)
    crashed = Fake(skill_invoked=False, tokens=0, status="error", error="exited with code 1")
    answered = Fake(skill_invoked=False, tokens=420, status="error", error="max turns")
    called = Fake(skill_invoked=True, tokens=420, status="error", error="max turns")
    assert await probe.probe_cli(crashed, tmp_path, "s", q, 1, tmp_path) == probe.Probe(
        1, 1, None, "exited with code 1"
    )
    assert (await probe.probe_cli(answered, tmp_path, "s", q, 1, tmp_path)).triggered is False
    assert (await probe.probe_cli(called, tmp_path, "s", q, 1, tmp_path)).triggered is True
