"""The Claude Code CLI inside bubblewrap, driven through the simulator on loopback by a scripted
agent: its Bash tool works on the skill's scripts, it sees nothing of the home or the run folder
around its workspace, and it reaches nothing but the model, through the relay. No network."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest
import tiers
from test_claude_code import EXAMPLE, Scripted, needs_cli

from optimizer import sandbox
from optimizer.config import Settings
from optimizer.errors import BadInput
from optimizer.execute import get_executor
from optimizer.inputs.evals import load_evals
from optimizer.sandbox import box, confinement
from optimizer.sim import serve

pytestmark = [
    needs_cli,
    tiers.needs(
        "bubblewrap", None if sandbox.bwrap_available() else "bubblewrap does not work here"
    ),
]
REAL_KEY = "sk-ant-test-the-real-key-0042"


def bash(command: str) -> tuple[str, dict]:
    return "Bash", {"command": command, "description": "a step of the test"}


async def run_scripted(
    tmp_path: Path, steps: list[tuple[str, dict]], *, skill: Path = EXAMPLE, **box: object
) -> tuple[object, Scripted]:
    sim = Scripted(steps)
    server, port = serve(sim, "127.0.0.1", 0)
    settings = Settings.model_validate({"llm": {"provider": "sim"}, "sandbox": box})
    # The run folder laid out as in a real run: the evals sit five folders above the workspace.
    trial_dir = tmp_path / "run" / "v0" / "eval-1" / "with_skill" / "run-1"
    try:
        record = await get_executor(
            "claude-code", settings, base_url=f"http://127.0.0.1:{port}", api_key=REAL_KEY
        ).execute(
            skill_dir=skill,
            skill_name=None,
            eval=load_evals(EXAMPLE).by_id(1),
            inputs_root=EXAMPLE,
            trial_dir=trial_dir,
            run_number=1,
            sample=0,
        )
    finally:
        server.shutdown()
        server.server_close()
    return record, sim


def texts(record) -> str:  # type: ignore[no-untyped-def]
    trial_dir = record.trial_dir
    parts = [(trial_dir / "transcript.jsonl").read_text()]
    parts += [
        p.read_text(errors="replace") for p in (trial_dir / "outputs").rglob("*") if p.is_file()
    ]
    return "\n".join(parts)


async def test_the_home_and_the_evals_are_not_visible(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("home-canary-7f3a\n")
    monkeypatch.setenv("HOME", str(home))
    evals = tmp_path / "run" / "inputs" / "evals" / "evals.json"
    evals.parent.mkdir(parents=True)
    evals.write_text('{"expectations": "evals-canary-91bc"}\n')
    up = "../../../../../inputs/evals/evals.json"  # from .work up to the run's inputs/
    steps = [
        ("Read", {"file_path": str(home / ".ssh" / "id_ed25519")}),
        ("Read", {"file_path": "../inputs/evals/evals.json"}),
        ("Read", {"file_path": up}),
        bash(
            f"echo probe-ran; cat {home}/.ssh/id_ed25519 ~/.ssh/id_ed25519 {up} "
            f"../inputs/evals/evals.json {evals}; ls -a .. / {tmp_path} 2>&1 | head -50"
        ),
        bash("cat > outputs/report.md <<'EOF'\n# Report\nwritten from inside\nEOF"),
    ]
    record, sim = await run_scripted(tmp_path, steps)
    assert record.status == "ok", record.error
    seen = texts(record) + "\n".join(sim.results)
    assert "probe-ran" in seen  # the shell did run: nothing it printed was hidden from us
    assert "home-canary-7f3a" not in seen and "evals-canary-91bc" not in seen
    assert (record.trial_dir / "outputs" / "report.md").read_text().startswith("# Report")
    metrics = json.loads((record.trial_dir / "outputs" / "metrics.json").read_text())
    assert metrics["sandbox"] == "bwrap" and metrics["confined"] is True


async def test_a_skill_script_runs_through_bash(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: hello-skill\ndescription: Says hello from a "
        "script.\n---\n\nRun scripts/hello.sh.\n"
    )
    script = skill / "scripts" / "hello.sh"
    script.write_text('#!/bin/sh\necho "hello from the skill, $1"\n')
    script.chmod(0o755)
    where = ".claude/skills/hello-skill"
    steps = [
        bash(f"{where}/scripts/hello.sh sandbox > outputs/hello.txt; cat outputs/hello.txt"),
        # The CLI itself refuses a write it sees into .claude/; one it cannot see meets the mount.
        bash(
            "python3 -c \"import sys; open('.cl' + 'aude/skills/hello-skill/SKILL.md', 'w')\" "
            "2>&1 | grep -o 'Read-only file system' || echo skill-is-writable"
        ),
        bash("env"),
    ]
    record, sim = await run_scripted(tmp_path, steps, skill=skill)
    assert record.status == "ok", record.error
    assert (
        record.trial_dir / "outputs" / "hello.txt"
    ).read_text() == "hello from the skill, sandbox\n"
    seen = "\n".join(sim.results)
    assert "hello from the skill, sandbox" in seen and "Read-only file system" in seen
    assert record.tool_calls["Bash"] == 3
    # The real key never enters the sandbox: the relay puts it in on the way to the model.
    assert REAL_KEY not in seen and REAL_KEY not in texts(record)
    assert sim.headers and all(h.get("x-api-key") == REAL_KEY for h in sim.headers)


async def test_the_sandbox_reaches_only_the_model(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        steps = [
            bash(
                f"if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo "
                "host-listener-reachable; else echo host-listener-unreachable; fi; "
                "cat /proc/net/dev | tail -n +3 | cut -d: -f1"
            )
        ]
        record, sim = await run_scripted(tmp_path, steps)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody ever connected
    assert record.status == "ok", record.error  # its model calls went through the relay
    seen = "\n".join(sim.results)
    assert "host-listener-unreachable" in seen and "host-listener-reachable" not in seen
    assert "eth0" not in seen and "lo" in seen  # a network namespace with a loopback only


async def test_a_workspace_over_its_limit_stops_the_cli(tmp_path: Path) -> None:
    sleep_s = 120
    fill = f"for i in $(seq 40); do head -c 1000000 /dev/zero > outputs/f$i; done; sleep {sleep_s}"
    started = time.monotonic()
    record, _ = await run_scripted(tmp_path, [bash(fill)], max_workspace_mb=5)
    assert record.status == "resource_limit", record.error
    # Stopped while it ran, not when its command ended: in under half of the command's sleep.
    assert time.monotonic() - started < sleep_s / 2
    assert list((record.trial_dir / "outputs").glob("f*")) == []


async def test_a_sandbox_that_cannot_start_leaves_the_run_unscored(
    tmp_path: Path, monkeypatch
) -> None:
    # A bind whose source is gone: bwrap fails before the CLI starts, which is not the skill's.
    monkeypatch.setattr(
        box,
        "find_node",
        lambda: ("/opt/node/bin/node", [("--ro-bind", str(tmp_path / "gone"), "/opt/node")]),
    )
    record, sim = await run_scripted(tmp_path, [])
    assert record.status == "unscored" and "could not start" in (record.error or "")
    assert "bwrap:" in (record.error or "") and sim.headers == []


async def test_unconfined_on_request_runs_on_the_host_without_bash(tmp_path: Path) -> None:
    record, _ = await run_scripted(tmp_path, [bash("echo should-not-run")], mode="none")
    assert record.status == "ok", record.error
    metrics = json.loads((record.trial_dir / "outputs" / "metrics.json").read_text())
    assert metrics["sandbox"] == "host" and metrics["confined"] is False
    init = json.loads((record.trial_dir / "transcript.jsonl").read_text().splitlines()[1])
    assert "Bash" not in init["tools"]


async def test_without_bubblewrap_it_refuses_unless_asked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(confinement, "bwrap_available", lambda: False)
    with pytest.raises(BadInput, match="apt-get install bubblewrap"):
        await run_scripted(tmp_path, [])
    assert not (tmp_path / "run").exists()
    record, _ = await run_scripted(tmp_path, [], mode="none")
    assert record.status == "ok" and record.sandbox == "host"


def test_a_node_outside_the_system_folders_is_bound_alone_never_its_folder(tmp_path, monkeypatch):
    # node at ~/bin/node: binding its folder's parent would show the whole home to the sandbox.
    home_bin = tmp_path / "home" / "bin"
    home_bin.mkdir(parents=True)
    (home_bin / "node").write_text("#!/bin/sh\n")
    (home_bin / "node").chmod(0o755)
    (tmp_path / "home" / ".ssh").mkdir()
    monkeypatch.setenv("PATH", str(home_bin))
    from optimizer.sandbox import find_node

    node, binds = find_node()
    assert node == "/opt/node/bin/node"
    assert binds == [("--ro-bind", str((home_bin / "node").resolve()), "/opt/node/bin/node")]


class Overloaded(Scripted):
    """An endpoint that answers every message with 529, as the API does when it is overloaded."""

    def handle(self, method, target, headers, raw):  # type: ignore[no-untyped-def]
        from optimizer.sim.protocol import error_reply

        if target.startswith("/v1/messages"):
            self.headers.append({k.lower(): v for k, v in headers.items()})
            return error_reply(529, "overloaded_error", "Overloaded")
        return super().handle(method, target, headers, raw)


async def test_an_endpoint_that_fails_the_cli_leaves_the_run_unscored(
    tmp_path: Path, monkeypatch
) -> None:
    # The API's failure, past the CLI's own retries, is not the skill's: no score of 0. One
    # retry instead of the CLI's ten, whose backoff would take three minutes.
    from optimizer.execute import claude_code

    boxed = claude_code.boxed_env
    monkeypatch.setattr(
        claude_code,
        "boxed_env",
        lambda settings: {**boxed(settings), "CLAUDE_CODE_MAX_RETRIES": "1"},
    )
    monkeypatch.setattr(sys.modules[__name__], "Scripted", Overloaded)
    record, sim = await run_scripted(tmp_path, [])
    assert sim.headers, "the CLI never reached the endpoint"
    assert record.status == "unscored" and "model endpoint failed" in (record.error or "")
