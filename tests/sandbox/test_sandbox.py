"""Tests of the sandbox under the real bubblewrap: what a command can see, reach and exhaust.
They never leave a process or a marker file behind, and they never touch the network."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import subprocess
import uuid
from pathlib import Path

import pytest
import tiers
from structlog.testing import capture_logs

from optimizer import sandbox as sb
from optimizer.config import Sandbox, Settings
from optimizer.errors import BadInput
from optimizer.sandbox import (
    SandboxPolicy,
    cgroups,
    confinement,
    run,
    run_async,
    scrub_env,
    to_host_path,
    to_sandbox_path,
)

pytestmark = pytest.mark.slow  # commands in the sandbox, timeouts and limits

needs_bwrap = tiers.needs(
    "bubblewrap",
    None
    if sb.bwrap_available()
    else "bubblewrap is not installed or does not work here (apt-get install bubblewrap)",
)

POLICY = SandboxPolicy(
    mode="bwrap",
    timeout_s=3.0,
    memory_mb=256,
    max_output_bytes=10_000,
    max_processes=64,
    max_file_bytes=100_000,
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    folder = tmp_path / "skill"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: probe\n---\nskill body\n")
    return folder


def leftovers(marker: str) -> str:
    """Processes whose command line holds marker (pgrep's own line never matches itself)."""
    done = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def marker_digits() -> str:
    return str(uuid.uuid4().int % 10**9)


# ---------------------------------------------------------------- what is visible


@needs_bwrap
def test_workspace_is_writable_and_the_skill_readable(work: Path, skill: Path) -> None:
    result = run(
        "echo hello > /workspace/out.txt && cat /skill/SKILL.md && pwd",
        work_dir=work,
        skill_dir=skill,
        policy=POLICY,
    )
    assert result.ok, result
    assert result.confined
    assert (work / "out.txt").read_text() == "hello\n"
    assert "skill body" in result.stdout
    assert result.stdout.strip().endswith("/workspace")


@needs_bwrap
def test_the_skill_is_read_only(work: Path, skill: Path) -> None:
    result = run("echo x > /skill/new.txt", work_dir=work, skill_dir=skill, policy=POLICY)
    assert result.exit_code not in (0, None)
    assert "Read-only file system" in result.stderr
    assert not (skill / "new.txt").exists()


@needs_bwrap
def test_host_home_and_project_are_invisible(work: Path, skill: Path) -> None:
    probe = Path.home() / f".sandbox-probe-{uuid.uuid4().hex}"
    probe.write_text("secret\n")
    try:
        project = Path(__file__).resolve().parents[2]
        result = run(
            f"cat {probe}; ls {Path.home()}; ls {project}; ls /work; ls /opt",
            work_dir=work,
            skill_dir=skill,
            policy=POLICY,
        )
    finally:
        probe.unlink()
    assert "secret" not in result.stdout
    assert result.stdout == ""
    assert result.stderr.count("No such file or directory") == 5


@needs_bwrap
def test_host_tmp_is_invisible(
    work: Path, skill: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "marker.txt"
    outside.write_text("outside\n")
    result = run(
        f"cat {outside}; ls {outside.parent}", work_dir=work, skill_dir=skill, policy=POLICY
    )
    assert "outside" not in result.stdout
    assert result.exit_code != 0


@needs_bwrap
def test_cannot_write_outside_the_work_folder(work: Path, skill: Path) -> None:
    name = f"sandbox-probe-{uuid.uuid4().hex}"
    result = run(
        f"for d in / /usr /etc /proc /skill; do touch $d/{name} 2>/dev/null && echo wrote $d; done;"
        f" touch /tmp/{name} && echo tmp-ok",
        work_dir=work,
        skill_dir=skill,
        policy=POLICY,
    )
    assert result.stdout.strip() == "tmp-ok"  # /tmp is the sandbox's own tmpfs
    for folder in ("/tmp", "/", "/usr", "/etc"):
        assert not (Path(folder) / name).exists()


# ---------------------------------------------------------------- network and environment


@needs_bwrap
def test_no_network(work: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    connect = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'"
    try:
        confined = run(connect, work_dir=work, skill_dir=None, policy=POLICY)
        # The same command unconfined reaches the listener, so the failure above is the sandbox.
        open_run = run(
            connect, work_dir=work, skill_dir=None, policy=SandboxPolicy(mode="none", timeout_s=3.0)
        )
        interfaces = run("cat /proc/net/dev", work_dir=work, skill_dir=None, policy=POLICY)
    finally:
        listener.close()
    assert confined.exit_code not in (0, None), confined
    assert "ConnectionRefusedError" in confined.stderr or "unreachable" in confined.stderr
    assert open_run.exit_code == 0, open_run
    names = [line.split(":")[0].strip() for line in interfaces.stdout.splitlines()[2:]]
    assert names == ["lo"]


@pytest.mark.parametrize("mode", ["bwrap", "none"])
def test_no_api_key_inside(mode: str, work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if mode == "bwrap" and not sb.bwrap_available():
        tiers.skip("bubblewrap", "bubblewrap is not installed or does not work here")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-parent")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-parent")
    passed = {"ANTHROPIC_API_KEY": "sk-passed", "GITHUB_TOKEN": "ghp-passed", "KEEP_ME": "yes"}
    policy = SandboxPolicy(mode=mode, timeout_s=3.0)  # type: ignore[arg-type]
    result = run("env", work_dir=work, skill_dir=None, policy=policy, env=passed)
    assert result.ok, result
    assert "sk-" not in result.stdout and "ghp-" not in result.stdout
    assert "ANTHROPIC_API_KEY" not in result.stdout
    assert "KEEP_ME=yes" in result.stdout
    assert "PATH=" in result.stdout


def test_scrub_env_drops_secret_looking_names_and_keeps_path() -> None:
    env = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "ANTHROPIC_BASE_URL": "http://x",
        "openai_org": "o",
        "AWS_REGION": "eu",
        "my_api_key": "k",
        "GH_TOKEN": "t",
        "DB_PASSWORD": "p",
        "SOME_SECRET_THING": "s",
        "GOOGLE_APPLICATION_CREDENTIALS": "c",
        "LANG": "C.UTF-8",
    }
    assert scrub_env(env) == {"PATH": "/usr/bin", "HOME": "/root", "LANG": "C.UTF-8"}
    assert scrub_env(None) == {}


# ---------------------------------------------------------------- limits


@pytest.mark.parametrize("mode", ["bwrap", "none"])
def test_timeout_kills_the_whole_process_group(mode: str, work: Path) -> None:
    if mode == "bwrap" and not sb.bwrap_available():
        tiers.skip("bubblewrap", "bubblewrap is not installed or does not work here")
    digits = marker_digits()
    background, foreground = f"1000.{digits}1", f"1000.{digits}2"
    # `( … & )` double-forks, so the first sleep is no longer a child of the command's shell.
    policy = SandboxPolicy(mode=mode, timeout_s=1.0)  # type: ignore[arg-type]
    result = run(
        f"(sleep {background} &); sleep {foreground}", work_dir=work, skill_dir=None, policy=policy
    )
    assert result.timed_out
    assert result.exit_code is None
    # Not before its limit, and stopped at it: a small part of the foreground sleep's 1000 s.
    assert policy.timeout_s <= result.duration_s < 1000 / 10
    assert leftovers(f"sleep 1000.{digits}") == ""


@needs_bwrap
def test_background_leftovers_die_when_the_command_ends(work: Path) -> None:
    digits = marker_digits()
    result = run(
        f"sleep 1000.{digits} & echo started", work_dir=work, skill_dir=None, policy=POLICY
    )
    assert result.ok and result.stdout == "started\n"
    assert result.duration_s < 1000 / 10  # ended with its command, not with the background sleep
    assert leftovers(f"sleep 1000.{digits}") == ""


@needs_bwrap
@pytest.mark.parametrize("mechanism", ["as found", "rlimit only"])
def test_memory_limit(mechanism: str, work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if mechanism == "rlimit only":
        monkeypatch.setattr(cgroups, "cgroup_parents", dict)
    result = run(
        'python3 -c "b = bytearray(2_000_000_000)"', work_dir=work, skill_dir=None, policy=POLICY
    )
    assert result.exit_code not in (0, None)
    if sb.memory_limit_mechanism() == "rlimit":
        assert "MemoryError" in result.stderr  # RLIMIT_AS refuses the allocation
    else:
        assert result.exit_code == 137  # the memory cgroup's OOM killer stops the run


@needs_bwrap
def test_output_cap(work: Path) -> None:
    result = run("yes | head -c 10000000", work_dir=work, skill_dir=None, policy=POLICY)
    assert result.output_truncated
    assert 0 < len(result.stdout) <= POLICY.max_output_bytes
    assert result.exit_code == 0 and not result.timed_out


@needs_bwrap
def test_file_size_cap(work: Path) -> None:
    result = run(
        "head -c 1000000 /dev/zero > /workspace/big.bin",
        work_dir=work,
        skill_dir=None,
        policy=POLICY,
    )
    assert result.exit_code not in (0, None)  # SIGXFSZ
    assert (work / "big.bin").stat().st_size <= POLICY.max_file_bytes


@needs_bwrap
def test_fork_bomb_is_contained(work: Path) -> None:
    if sb.process_limit_mechanism() == "none":
        tiers.skip(
            "pids-cgroup",
            "root without a usable pids cgroup: a fork bomb would only be "
            "stopped by the clock, and running one would hurt this machine",
        )
    marker = f"forkbomb-{uuid.uuid4().hex}"
    # $0 names every forked copy of the shell, so pgrep can find any that survive.
    result = run(
        ["bash", "-c", ":(){ :|:& };:; sleep 30", marker],
        work_dir=work,
        skill_dir=None,
        policy=POLICY,
    )
    assert result.timed_out
    assert result.duration_s < POLICY.timeout_s + 3.0
    assert "Resource temporarily unavailable" in result.stderr  # the process limit was hit
    assert leftovers(marker) == ""


# ---------------------------------------------------------------- results, stdin, errors


@needs_bwrap
def test_exit_code_stdin_and_list_commands(work: Path) -> None:
    assert run("exit 7", work_dir=work, skill_dir=None, policy=POLICY).exit_code == 7
    echoed = run("cat", work_dir=work, skill_dir=None, policy=POLICY, stdin="piped\n")
    assert echoed.stdout == "piped\n"
    listed = run(["printf", "%s|", "a b", "$HOME"], work_dir=work, skill_dir=None, policy=POLICY)
    assert listed.stdout == "a b|$HOME|"


def test_a_missing_work_folder_is_data_not_an_exception(tmp_path: Path) -> None:
    result = run(
        "true", work_dir=tmp_path / "missing", skill_dir=None, policy=SandboxPolicy(mode="none")
    )
    assert result.exit_code is None
    assert result.error and "does not exist" in result.error


async def test_run_async_in_parallel(work: Path) -> None:
    policy = POLICY if sb.bwrap_available() else SandboxPolicy(mode="none", timeout_s=3.0)
    results = await asyncio.gather(
        *(
            run_async(
                f"echo {i} > /workspace/{i}.txt && echo {i}",
                work_dir=work,
                skill_dir=None,
                policy=policy,
            )
            for i in range(6)
        )
    )
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)]
    assert sorted(p.name for p in work.iterdir()) == sorted(f"{i}.txt" for i in range(6))


async def test_cancelling_run_async_kills_the_command(work: Path) -> None:
    policy = SandboxPolicy(mode="bwrap" if sb.bwrap_available() else "none", timeout_s=30.0)
    digits = marker_digits()
    command = f"touch /workspace/started; sleep 1000.{digits}"
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(
            run_async(command, work_dir=work, skill_dir=None, policy=policy), timeout=0.5
        )
    assert (work / "started").exists()
    assert leftovers(f"sleep 1000.{digits}") == ""


# ---------------------------------------------------------------- modes


def test_every_mode_but_none_refuses_without_bubblewrap(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without bubblewrap no mode runs a command unconfined behind the user's back: "auto" too
    refuses, with the one sentence that says how to install it or opt in."""
    monkeypatch.setattr(confinement, "bwrap_available", lambda: False)
    for mode in ("auto", "bwrap", "strict"):
        with pytest.raises(BadInput, match=r"apt-get install bubblewrap.*--unconfined"):
            run(
                "touch /workspace/ran",
                work_dir=work,
                skill_dir=None,
                policy=SandboxPolicy(mode=mode),
            )
        with pytest.raises(BadInput):
            sb.startup_line(SandboxPolicy(mode=mode))
    assert not (work / "ran").exists()


def test_bubblewrap_hidden_from_path_is_missing(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe itself, not a stub: with no bwrap on PATH, "auto" refuses."""
    monkeypatch.setenv("PATH", str(work))
    sb.bwrap_available.cache_clear()
    try:
        assert not sb.bwrap_available()
        with pytest.raises(BadInput, match="bubblewrap"):
            run("true", work_dir=work, skill_dir=None, policy=SandboxPolicy(mode="auto"))
    finally:
        monkeypatch.undo()
        sb.bwrap_available.cache_clear()


def test_none_runs_unconfined_as_asked_with_fixed_paths(
    work: Path, skill: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confinement, "bwrap_available", lambda: False)
    policy = SandboxPolicy(mode="none", timeout_s=3.0)
    # The opt-in is said once, by the command that starts the work
    # (tests/sandbox/test_confinement.py).
    assert sb.startup_line(policy) == confinement.UNCONFINED_LINE
    first = run(
        "cat /skill/SKILL.md > /workspace/copy.md; pwd; echo $WORKSPACE; ls /workspace",
        work_dir=work,
        skill_dir=skill,
        policy=policy,
    )
    assert not first.confined
    assert first.ok, first
    assert (work / "copy.md").read_text() == (skill / "SKILL.md").read_text()
    # Host paths never reach the caller: they are shown as the fixed sandbox paths.
    assert first.stdout == "/workspace\n/workspace\ncopy.md\n"
    assert str(work) not in first.stdout


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        SandboxPolicy(mode="chroot")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SandboxPolicy(timeout_s=0)


def test_policy_from_settings_takes_every_field() -> None:
    box = Sandbox(
        mode="strict",
        timeout_s=7.5,
        memory_mb=300,
        max_output_bytes=4096,
        max_file_bytes=8192,
        max_processes=32,
        max_workspace_mb=64,
    )
    assert SandboxPolicy.from_settings(box) == SandboxPolicy(
        mode="strict",
        timeout_s=7.5,
        memory_mb=300,
        max_output_bytes=4096,
        max_processes=32,
        max_file_bytes=8192,
        max_workspace_mb=64,
    )
    assert SandboxPolicy.from_settings(Settings().sandbox) == SandboxPolicy()


def test_report_says_what_confinement_is_in_force(monkeypatch: pytest.MonkeyPatch) -> None:
    strict = SandboxPolicy(mode="strict", memory_mb=300)
    found = sb.report(strict)
    assert found["bwrap_works"] is sb.bwrap_available()
    assert found["confined"] is sb.bwrap_available()
    assert found["refused"] is not sb.bwrap_available()
    assert found["process_limit"] == sb.process_limit_mechanism()
    assert found["memory_limit"] == sb.memory_limit_mechanism()
    assert found["policy"] == {
        "mode": "strict",
        "timeout_s": 60.0,
        "memory_mb": 300,
        "max_output_bytes": 1_000_000,
        "max_processes": 256,
        "max_file_bytes": 50_000_000,
        "max_workspace_mb": 512,
    }
    # Without bubblewrap a strict policy is reported as refused, not raised, and nothing warns.
    monkeypatch.setattr(confinement, "bwrap_available", lambda: False)
    confinement.reset_warnings()
    with capture_logs() as logs:
        missing = sb.report(strict)
        auto = sb.report()
    assert missing["refused"] is True and missing["confined"] is False
    assert auto["refused"] is True and auto["confined"] is False
    assert sb.report(SandboxPolicy(mode="none"))["refused"] is False
    assert auto["policy"] == dataclasses.asdict(SandboxPolicy())
    assert logs == []


# ---------------------------------------------------------------- path translation


def test_to_host_path_maps_the_two_roots(work: Path, skill: Path) -> None:
    assert to_host_path("/workspace/a/b.txt", work, skill) == work.resolve() / "a" / "b.txt"
    assert to_host_path("a/b.txt", work, skill) == work.resolve() / "a" / "b.txt"
    assert to_host_path("/workspace", work, skill) == work.resolve()
    assert to_host_path("/skill/SKILL.md", work, skill) == skill.resolve() / "SKILL.md"
    assert to_host_path("/workspace/a/../b", work, skill) == work.resolve() / "b"


def test_to_host_path_refuses_escapes(work: Path, skill: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / "out-link").symlink_to(outside)
    (work / "file-link").symlink_to(Path("/etc/passwd"))
    (work / "in-link").symlink_to(work / "sub")
    for bad in (
        "/workspace/../etc/passwd",
        "../x",
        "/etc/passwd",
        "/",
        "/workspacex/a",
        "/workspace/out-link/x",
        "/workspace/file-link",
        "//etc/passwd",
        "",
        "/skill/../workspace/../../x",
        "/workspace/a\x00b",
    ):
        assert to_host_path(bad, work, skill) is None, bad
    assert to_host_path("/skill/x", work, None) is None
    assert to_host_path("/skill/SKILL.md", work, skill, for_write=True) is None
    assert to_host_path("/workspace/in-link/x", work, skill) == work.resolve() / "sub" / "x"


def test_to_sandbox_path(work: Path, skill: Path, tmp_path: Path) -> None:
    assert to_sandbox_path(work / "a" / "b.txt", work, skill) == "/workspace/a/b.txt"
    assert to_sandbox_path(work, work, skill) == "/workspace"
    assert to_sandbox_path(skill / "SKILL.md", work, skill) == "/skill/SKILL.md"
    assert to_sandbox_path(tmp_path / "elsewhere", work, skill) is None
    assert to_sandbox_path(work / ".." / "skill", work, None) is None
    (work / "out-link").symlink_to(tmp_path)
    assert to_sandbox_path(work / "out-link" / "x", work, skill) is None
    nested_skill = work / "skill"
    nested_skill.mkdir()
    assert to_sandbox_path(nested_skill / "x", work, nested_skill) == "/skill/x"


def test_env_var_names_inside_are_fixed(work: Path, skill: Path) -> None:
    if not sb.bwrap_available():
        tiers.skip("bubblewrap", "bubblewrap is not installed or does not work here")
    result = run(
        'echo "$WORKSPACE $SKILL_DIR $HOME"; hostname',
        work_dir=work,
        skill_dir=skill,
        policy=POLICY,
    )
    assert result.stdout == "/workspace /skill /tmp\nsandbox\n"
    assert os.fspath(work) not in result.stdout
