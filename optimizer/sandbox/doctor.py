"""`optimizer doctor`: whether model-written commands are really confined on this machine, shown
line by line (bubblewrap, cgroups, the limits in force, one confined probe) with what to do.
It must never run anything but its own fixed probe, nor call confinement working untested."""

from __future__ import annotations

import dataclasses
import shlex
import socket
import subprocess
import tempfile
from pathlib import Path

from optimizer.errors import BadInput
from optimizer.sandbox.box import find_node
from optimizer.sandbox.confinement import SMALLEST_SANDBOX, bwrap_available, confinement_for, report
from optimizer.sandbox.policy import SANDBOX_PATH, SandboxPolicy
from optimizer.sandbox.run import run

MB = 2**20
_PROCESSES = {
    "cgroup": "a pids cgroup per command (at most {n} processes)",
    "rlimit": "RLIMIT_NPROC inside the sandbox's user namespace (at most {n} processes)",
    "none": "NOT LIMITED (root without a usable pids cgroup): only the wall clock and the pid "
    "namespace bound a fork bomb",
}
_MEMORY = {
    "cgroup": "a memory cgroup per command ({mb} MB in total, no swap)",
    "rlimit": "RLIMIT_AS per process ({mb} MB of address space; no memory cgroup here)",
}


@dataclasses.dataclass
class Diagnosis:
    lines: list[str]
    ok: bool


def _bwrap_line(found: dict) -> str:
    exe = found["bwrap"]
    if exe is None:
        return "bubblewrap:  not found on PATH"
    try:
        version = (
            subprocess.run(
                [exe, "--version"], capture_output=True, text=True, timeout=10, check=False
            ).stdout.strip()
            or "version unknown"
        )
    except (OSError, subprocess.SubprocessError):
        version = "version unknown"
    if found["bwrap_works"]:
        return f"bubblewrap:  {exe} ({version}), works"
    return f"bubblewrap:  {exe} ({version}) does NOT work here: {_bwrap_error(exe)}"


def _bwrap_error(exe: str) -> str:
    """What bwrap itself says when its smallest sandbox fails (a refused user namespace, most
    often), so the user sees the cause and not only that it failed."""
    probe = [exe, *SMALLEST_SANDBOX]
    try:
        done = subprocess.run(
            probe,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
            env={"PATH": SANDBOX_PATH},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]


def _limits_line(policy: SandboxPolicy) -> str:
    return (
        f'limits:      sandbox.mode = "{policy.mode}"; per command {policy.timeout_s:g} s, '
        f"{policy.memory_mb} MB of memory, {policy.max_processes} processes, files up to "
        f"{policy.max_file_bytes / 1e6:g} MB, output up to {policy.max_output_bytes / 1e6:g} MB; "
        f"the workspace of a run up to {policy.max_workspace_mb} MB"
    )


def _probe(policy: SandboxPolicy) -> tuple[bool, str]:
    """One tiny confined command: it must not reach a listener on the host's loopback, nor see
    the home folder or a file beside its workspace, and it must be able to write /workspace."""
    home = str(Path.home())
    with (
        tempfile.TemporaryDirectory(prefix="optimizer-doctor-") as tmp,
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener,
    ):
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        beside = Path(tmp) / "host-file"
        beside.write_text("not for the sandbox\n")
        work = Path(tmp) / "work"
        work.mkdir()
        script = (
            f"if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo network=reachable; "
            "else echo network=unreachable; fi; "
            f"for p in {shlex.quote(home)} {shlex.quote(str(beside))}; do "
            'if [ -e "$p" ]; then echo "seen=$p"; fi; done; '
            "touch /workspace/probe && echo workspace=writable"
        )
        result = run(
            script,
            work_dir=work,
            skill_dir=None,
            policy=dataclasses.replace(policy, mode="bwrap", timeout_s=30.0),
        )
    if result.error or not result.ok:
        return (
            False,
            f"the confined probe failed: {result.error or result.stderr.strip() or result.exit_code}",
        )
    out = result.stdout.split()
    # "/" as the home is visible anywhere; it says nothing about confinement.
    seen = [w.removeprefix("seen=") for w in out if w.startswith("seen=") and w != "seen=/"]
    problems = (
        (["the network is REACHABLE"] if "network=reachable" in out else [])
        + [f"{path} is VISIBLE" for path in seen]
        + (["/workspace is not writable"] if "workspace=writable" not in out else [])
    )
    if problems:
        return False, "a confined command ran, but " + ", ".join(problems)
    return True, (
        f"a confined command ran: network unreachable, home ({home}) not visible, a "
        "host file beside the workspace not visible, /workspace writable"
    )


def _claude_code_line(policy: SandboxPolicy) -> str:
    """How the claude-code executor would run: confined, its relay needs node."""
    if policy.mode == "none":
        return 'claude code: on the host, without its Bash tool (sandbox.mode = "none")'
    try:
        node, _ = find_node()
    except BadInput:
        return (
            "claude code: CANNOT run confined: node is not on PATH (its relay to the model runs "
            "in node inside the sandbox); install Node.js. Other executors are not affected."
        )
    return (
        "claude code: in bubblewrap with its Bash tool; its model calls go out only through "
        f"the relay to the model endpoint (node inside: {node})"
    )


def diagnose(policy: SandboxPolicy) -> Diagnosis:
    """The doctor's lines; ok when the runs of this policy will be confined, tested here."""
    found = report(policy)
    lines = [
        _bwrap_line(found),
        "processes:   " + _PROCESSES[str(found["process_limit"])].format(n=policy.max_processes),
        "memory:      " + _MEMORY[str(found["memory_limit"])].format(mb=policy.memory_mb),
        _limits_line(policy),
    ]
    works = False
    if bwrap_available():
        works, said = _probe(policy)
        lines.append("probe:       " + said)
    else:
        lines.append("probe:       not run: no working bubblewrap")
    lines.append(_claude_code_line(policy))
    if policy.mode == "none":
        lines.append(
            'confinement: OFF by your settings (sandbox.mode = "none" or --unconfined): '
            "model-written commands run UNCONFINED; drop that setting to confine them"
            + ("." if works else ", after fixing the lines above.")
        )
        return Diagnosis(lines, False)
    try:
        confinement_for(policy)
    except BadInput as exc:
        lines.append(f"confinement: does NOT work here: {exc}")
        return Diagnosis(lines, False)
    if not works:
        lines.append(
            "confinement: does NOT work here: the probe above shows what leaks; check the "
            "bubblewrap install (apt-get install --reinstall bubblewrap) and report it."
        )
        return Diagnosis(lines, False)
    lines.append(
        "confinement: works: model-written commands run under bubblewrap with the limits above."
    )
    return Diagnosis(lines, True)
