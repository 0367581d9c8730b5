"""The claude-code executor with the real CLI from npm (scripts/install-claude-code.sh) against the
simulator on loopback: it calls Skill and Write, and the run folder records it. No network."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import tiers

from optimizer import schemas as s
from optimizer.config import Settings
from optimizer.errors import BadInput
from optimizer.execute import claude_env, claude_stream, get_executor
from optimizer.execute.claude_env import find_claude
from optimizer.grade.benchmark import run_once
from optimizer.inputs.evals import load_evals
from optimizer.model import make_client
from optimizer.sim import Service, Simulator, serve
from optimizer.sim.text import system_text
from optimizer.store.db import Store

pytestmark = pytest.mark.slow  # the Claude Code CLI, in subprocesses

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "fixtures" / "csv-report"
# Lines only the skill's body carries; the simulated agent copies what it follows.
SKILL_SNIPPETS = ("Row count:", "## Columns", "# Report:", "Following the guideline")


def _binary() -> Path | None:
    try:
        return find_claude(Settings())
    except BadInput:
        return None


needs_cli = tiers.needs(
    "claude-code",
    None
    if _binary() is not None
    else "the Claude Code CLI is not installed: run "
    "scripts/install-claude-code.sh (npm package @anthropic-ai/claude-code; CI installs it)",
)


def settings_with(**execute: object) -> Settings:
    return Settings.model_validate({"llm": {"provider": "sim"}, "execute": execute})


async def run(settings: Settings, base_url: str, trial_dir: Path, *, with_skill: bool):
    return await get_executor("claude-code", settings, base_url=base_url).execute(
        skill_dir=EXAMPLE if with_skill else None,
        skill_name="csv-report",
        eval=load_evals(EXAMPLE).by_id(1),
        inputs_root=EXAMPLE,
        trial_dir=trial_dir,
        run_number=1,
        sample=0,
    )


@needs_cli
async def test_claude_code_calls_skill_and_writes_the_output(tmp_path: Path, sim_url: str) -> None:
    record = await run(settings_with(), sim_url, tmp_path / "with_skill/run-1", with_skill=True)
    assert record.status == "ok", record.error
    assert record.skill_invoked is True
    metrics = json.loads((record.trial_dir / "outputs/metrics.json").read_text())
    s.Metrics.model_validate(metrics)
    s.Timing.model_validate_json((record.trial_dir / "timing.json").read_text())
    assert metrics["tool_calls"]["Skill"] == 1 and metrics["tool_calls"]["Write"] == 1
    assert metrics["executor"] == "claude-code" and record.cost_usd > 0 and record.tokens > 0
    assert metrics["sandbox"] == "bwrap" and metrics["confined"] is True
    report = (record.trial_dir / "outputs/report.md").read_text()
    assert any(snippet in report for snippet in SKILL_SNIPPETS)  # loaded through Skill
    transcript = (record.trial_dir / "transcript.jsonl").read_text()
    assert '"type": "result"' in transcript and str(tmp_path) not in transcript
    md = (record.trial_dir / "transcript.md").read_text()
    assert md.startswith("# Transcript\n\n## Eval Prompt") and "### Tool call: Write" in md
    assert not (record.trial_dir / ".work").exists()


@needs_cli
async def test_claude_code_baseline_has_no_skill(tmp_path: Path, sim_url: str) -> None:
    record = await run(settings_with(), sim_url, tmp_path / "without_skill/run-1", with_skill=False)
    assert record.status == "ok", record.error
    assert record.skill_invoked is None and "Skill" not in record.tool_calls
    assert record.files_created == ["report.md"]
    init = json.loads((record.trial_dir / "transcript.jsonl").read_text().splitlines()[1])
    # Bash is offered inside bubblewrap only (see test_claude_code_sandbox.py).
    assert init["subtype"] == "init" and "Skill" not in init["tools"] and "Bash" in init["tools"]


@needs_cli
async def test_claude_code_max_turns_and_timeout_are_data(tmp_path: Path) -> None:
    server, port = serve(Simulator(seed=0), "127.0.0.1", 0)
    try:
        short = await run(
            settings_with(max_turns=1),
            f"http://127.0.0.1:{port}",
            tmp_path / "short",
            with_skill=True,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert short.status == "error" and "error_max_turns" in (short.error or "")
    assert (short.trial_dir / "timing.json").is_file()

    # A provider that takes a minute a call is not the skill's timeout: the run clock stops while
    # the relay waits, and past execute.model_wait_max_s the run is stopped, unscored.
    latency_s = 60
    slow_server, slow_port = serve(
        Simulator(seed=0, service=Service(latency_ms=latency_s * 1000)), "127.0.0.1", 0
    )
    try:
        started = time.monotonic()
        slow = await run(
            settings_with(timeout_s=2, model_wait_max_s=3),
            f"http://127.0.0.1:{slow_port}",
            tmp_path / "slow",
            with_skill=True,
        )
    finally:
        slow_server.shutdown()
        slow_server.server_close()
    assert slow.status == "unscored" and "model_wait_max_s" in (slow.error or "")
    assert time.monotonic() - started < latency_s / 2  # stopped before one call could answer
    assert (slow.trial_dir / "timing.json").is_file()
    left = subprocess.run(["pgrep", "-af", str(tmp_path / "slow")], capture_output=True, text=True)
    assert left.stdout.strip() == ""


@needs_cli
async def test_run_once_starts_a_simulator_for_the_cli(tmp_path: Path) -> None:
    settings = settings_with(executor="claude-code")
    store = Store(tmp_path / "state.db")
    client = make_client(settings, store, simulator=Simulator(seed=0))
    try:
        trial_dir, scored = await run_once(
            settings,
            client,
            store,
            skill_dir=EXAMPLE,
            eval_id=1,
            without_skill=False,
            out_dir=tmp_path,
        )
    finally:
        await client.aclose()
        store.close()
    assert scored.status in ("ok", "gated"), scored
    assert trial_dir == tmp_path / "with_skill" / "run-1" and (trial_dir / "grading.json").is_file()


class Recording(Simulator):
    """The real simulator, keeping every request body the CLI sent."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.bodies: list[dict] = []

    def respond(self, body, headers):  # type: ignore[no-untyped-def]
        self.bodies.append(body)
        return super().respond(body, headers)


async def _metered_runs(tmp_path: Path, budget: float, runs: int):
    """`runs` runs of eval 1 through the CLI with the run's client metering its relay; the
    records, the ledger's total, and the request bodies the simulator saw."""
    sim = Recording()
    server, port = serve(sim, "127.0.0.1", 0)
    settings = settings_with()
    store = Store(tmp_path / "state.db")
    client = make_client(settings, store, budget_usd=budget, simulator=Simulator(seed=0))
    executor = get_executor(
        "claude-code", settings, base_url=f"http://127.0.0.1:{port}", client=client
    )
    records = []
    try:
        for number in range(1, runs + 1):
            records.append(
                await executor.execute(
                    skill_dir=EXAMPLE,
                    skill_name="csv-report",
                    eval=load_evals(EXAMPLE).by_id(1),
                    inputs_root=EXAMPLE,
                    trial_dir=tmp_path / f"run-{number}",
                    run_number=number,
                    sample=number,
                )
            )
        return records, store.spent_usd(), sim.bodies
    finally:
        await client.aclose()
        store.close()
        server.shutdown()
        server.server_close()


@needs_cli
async def test_every_dollar_the_cli_spends_is_in_the_ledger(tmp_path: Path) -> None:
    records, ledger_usd, bodies = await _metered_runs(tmp_path, budget=5.0, runs=2)
    assert [r.status for r in records] == ["ok", "ok"], [r.error for r in records]
    # The CLI prices its own usage; the ledger charged every call of it, at the same prices.
    reported = sum(r.cost_usd for r in records)
    assert reported > 0 and ledger_usd == pytest.approx(reported, abs=1e-5)  # metrics: 6 digits
    # Each call is admitted at its worst case, which the executor's answer limit bounds.
    assert {b["max_tokens"] for b in bodies} == {Settings().execute.max_tokens}


@needs_cli
async def test_a_cli_run_the_budget_cannot_cover_stops_the_night(tmp_path: Path) -> None:
    from optimizer.errors import BudgetExhausted

    # One answer of 8,192 tokens at $15 a million is $0.12: a $0.10 budget admits no call.
    with pytest.raises(BudgetExhausted, match="past its budget of \\$0.10"):
        await _metered_runs(tmp_path, budget=0.10, runs=1)
    assert not list(tmp_path.glob("run-1/**/metrics.json"))  # no run recorded, none scored


@needs_cli
async def test_a_relative_run_folder_keeps_the_outputs(tmp_path: Path, monkeypatch) -> None:
    # The CLI starts in the work folder: a relative path in its prompt pointed the agent at a
    # nested copy of the run folder, thrown away with every file it wrote.
    monkeypatch.chdir(tmp_path)
    sim = Recording()
    server, port = serve(sim, "127.0.0.1", 0)
    try:
        record = await run(
            settings_with(),
            f"http://127.0.0.1:{port}",
            Path("runs/demo/with_skill/run-1"),
            with_skill=True,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert record.status == "ok", record.error
    assert record.files_created == ["report.md"]
    assert (tmp_path / "runs/demo/with_skill/run-1/outputs/report.md").is_file()
    assert not list(tmp_path.glob("runs/demo/with_skill/run-1/**/runs"))
    # Our part of the request (the appended system prompt) names no host folder; the CLI's own
    # environment block does, as it always has.
    assert sim.bodies
    for body in sim.bodies:
        ours = system_text(body)
        assert "runs/demo" not in ours and str(tmp_path) not in ours


@needs_cli
def test_execute_command_with_a_relative_out_folder(tmp_path: Path, monkeypatch, cli) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli(
        "execute",
        EXAMPLE,
        "--eval",
        "1",
        "--executor",
        "claude-code",
        "--provider",
        "sim",
        "--out",
        "runs/cc",
    )
    assert result.exit_code == 0, result.output
    # The simulated agent skips the skill now and then (drawn from the request, so fixed for
    # one CLI version and tool list): graded, the run may then be gated; the folder is the point.
    assert re.search(r"^(ok|gated): runs/cc/with_skill/run-1\b", result.stdout, re.M)
    assert (tmp_path / "runs/cc/with_skill/run-1/outputs/report.md").is_file()


class Scripted(Simulator):
    """A model that makes the given tool calls one per turn, then stops (to pry outside the
    project folder, to run a skill's script); it keeps the headers the CLI sent and the tool
    results it got back."""

    def __init__(self, steps: list[tuple[str, dict]]) -> None:
        super().__init__(seed=0)
        self.steps = steps
        self.headers: list[dict] = []
        self.results: list[str] = []

    def respond(self, body, headers):  # type: ignore[no-untyped-def]
        self.headers.append({k.lower(): v for k, v in headers.items()})
        results = [
            b
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
        self.results = [json.dumps(b.get("content")) for b in results]
        done = len(results)
        if done < len(self.steps):
            name, tool_input = self.steps[done]
            content = [
                {"type": "tool_use", "id": f"toolu_s_{done}", "name": name, "input": tool_input}
            ]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "Done."}], "end_turn"
        return {
            "id": f"msg_s_{done}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }


@needs_cli
async def test_claude_code_file_tools_stay_in_the_project_folder(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret-words")
    steps = [
        ("Read", {"file_path": str(secret)}),
        ("Write", {"file_path": str(tmp_path / "escaped.txt"), "content": "out"}),
        ("Grep", {"pattern": "secret", "path": str(tmp_path)}),
        ("Write", {"file_path": "outputs/inside.txt", "content": "in"}),
    ]
    server, port = serve(Scripted(steps), "127.0.0.1", 0)
    try:
        record = await run(
            settings_with(), f"http://127.0.0.1:{port}", tmp_path / "runs/run-1", with_skill=True
        )
    finally:
        server.shutdown()
        server.server_close()
    assert record.status == "ok", record.error
    assert record.files_created == ["inside.txt"] and not (tmp_path / "escaped.txt").exists()
    assert "the-secret-words" not in (record.trial_dir / "transcript.jsonl").read_text()
    metrics = json.loads((record.trial_dir / "outputs/metrics.json").read_text())
    assert metrics["errors_encountered"] == 3 and record.skill_invoked is False


def host_settings(**execute: object) -> Settings:
    return Settings.model_validate(
        {"llm": {"provider": "sim"}, "sandbox": {"mode": "none"}, "execute": execute}
    )


@needs_cli
async def test_on_the_host_the_clis_api_failure_is_unscored_from_its_result_line(
    tmp_path: Path, monkeypatch
) -> None:
    """sandbox.mode none: the CLI gives up on an overloaded endpoint; its result line says so
    (api_error_status 529), and the run is ours, unscored, never the skill's 0."""
    monkeypatch.setitem(claude_env.COMMON_ENV, "CLAUDE_CODE_MAX_RETRIES", "1")
    server, port = serve(Simulator(seed=0, service=Service(fail_role="executor")), "127.0.0.1", 0)
    try:
        record = await run(
            host_settings(), f"http://127.0.0.1:{port}", tmp_path / "run-1", with_skill=True
        )
    finally:
        server.shutdown()
        server.server_close()
    assert record.status == "unscored", record.error
    assert "model endpoint failed the Claude Code CLI: HTTP 529 overloaded_error" in (
        record.error or ""
    )
    assert record.confined is False and record.sandbox == "host"


def test_the_result_line_tells_an_api_failure_from_the_agents_own() -> None:
    failed = {
        "is_error": True,
        "subtype": "success",
        "terminal_reason": "api_error",
        "api_error_status": 500,
        "api_error_type": "api_error",
        "result": "API Error: 500",
    }
    assert claude_stream.api_failure(failed) == "HTTP 500 api_error: API Error: 500"
    unreachable = {"is_error": True, "terminal_reason": "api_error", "result": "Connection error."}
    assert claude_stream.api_failure(unreachable) == "HTTP - no answer: Connection error."
    turns = {"is_error": True, "subtype": "error_max_turns", "num_turns": 2}
    assert claude_stream.api_failure(turns) is None
    cut = {"is_error": True, "terminal_reason": "api_error", "api_error": "max_output_tokens"}
    assert claude_stream.api_failure(cut) is None


@needs_cli
async def test_on_the_host_a_slow_provider_is_not_the_skills_timeout(tmp_path: Path) -> None:
    """The host CLI's calls pass a loopback relay that stops the run clock: 2.5 s a call against
    a 2 s limit finishes."""
    server, port = serve(Simulator(seed=0, service=Service(latency_ms=2500)), "127.0.0.1", 0)
    try:
        record = await run(
            host_settings(timeout_s=2),
            f"http://127.0.0.1:{port}",
            tmp_path / "run-1",
            with_skill=True,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert record.status == "ok", record.error
    metrics = json.loads((record.trial_dir / "outputs/metrics.json").read_text())
    assert (
        metrics["model_calls"] >= 2
        and metrics["model_wait_seconds"] >= 2.5 * metrics["model_calls"] - 0.2
    )
    assert metrics["skill_seconds"] < 2 < record.duration_s


async def test_a_missing_cli_names_the_npm_package(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(BadInput, match="@anthropic-ai/claude-code"):
        find_claude(settings_with(claude_binary=str(tmp_path / "no-claude")))
    monkeypatch.setattr(claude_env, "LOCAL_BINARY", tmp_path / "absent" / "claude")
    settings = settings_with(claude_binary="claude-not-on-path-anywhere")
    with pytest.raises(BadInput, match="install-claude-code.sh") as caught:
        await run(settings, "http://127.0.0.1:9", tmp_path / "run-1", with_skill=True)
    assert "@anthropic-ai/claude-code" in str(caught.value)
    assert not (tmp_path / "run-1").exists()


def _fake_cli(tmp_path: Path, version: str, body: str = "exit 3") -> Path:
    """A `claude` that says `version` and otherwise runs `body` (by default: exits without a
    result line, as a CLI that does not know a flag of ours does)."""
    fake = tmp_path / "bin" / "claude"
    fake.parent.mkdir(parents=True, exist_ok=True)
    fake.write_text(
        f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi\n{body}\n'
    )
    fake.chmod(0o755)
    claude_env.check_version.cache_clear()
    return fake


@pytest.mark.parametrize("version", ["1.0.128 (Claude Code)", "3.0.1 (Claude Code)", "garbled"])
async def test_a_cli_outside_the_supported_versions_is_refused_naming_both(
    tmp_path: Path, version: str
) -> None:
    fake = _fake_cli(tmp_path, version)
    settings = host_settings(claude_binary=str(fake))
    with pytest.raises(BadInput) as refused:
        await run(settings, "http://127.0.0.1:9", tmp_path / "run-1", with_skill=True)
    said = str(refused.value)
    assert version.split()[0] in said and "from 2.1.300 and below 3.0.0" in said
    assert not (tmp_path / "run-1").exists()  # refused before a run folder is made


async def test_a_cli_that_ends_without_a_result_is_ours_not_the_skills_zero(tmp_path: Path) -> None:
    fake = _fake_cli(tmp_path, "2.1.330 (Claude Code)")
    record = await run(
        host_settings(claude_binary=str(fake)),
        "http://127.0.0.1:9",
        tmp_path / "run-1",
        with_skill=True,
    )
    assert record.status == "unscored", record.error
    assert "the Claude Code CLI failed, not the skill" in (record.error or "")
