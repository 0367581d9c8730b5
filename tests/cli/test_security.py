"""What a proposal, an eval file, a model-written command and a browser may not do: edit outside the
skill, read outside the skill, escape the sandbox of a whole run (home, writes, network, the key,
time, memory, processes), or reach past the review server's run folder."""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import tiers
from test_daemon import EXAMPLE, ROOT, cli
from test_faults import reference_run

from optimizer import sandbox as sb
from optimizer.schemas import Edit, ProposalAnswer
from optimizer.search.edits import apply_edits
from optimizer.search.proposal import Feedback, Rejected
from optimizer.search.propose import propose

FAKE_KEY = "sk-ant-api03-FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE-0123456789abcdef-AAAA"


def tree(folder: Path, skip: Path | None = None) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and (skip is None or skip not in p.parents)
    }


@pytest.fixture
def parent(tmp_path) -> Path:
    folder = tmp_path / "work" / "parent"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("evals"))
    return folder


# ------------------------------------------------------------------ proposer edits

OUTSIDE = [
    "../x.md",
    "../../../../tmp/planted.md",
    "/etc/planted.md",
    "scripts/../../x.md",
    "..\\x.md",
    "evals/evals.json",
    "./evals/new.json",
    "evals/files/sales.csv",
    "",
    ".",
]
BROKEN = ["a\0b.md", "x" * 300 + ".md", "scripts", "SKILL.md/inner.md"]


@pytest.mark.parametrize("action", ["write", "replace", "delete"])
@pytest.mark.parametrize("path", OUTSIDE + BROKEN, ids=[repr(p)[:30] for p in OUTSIDE + BROKEN])
def test_a_proposed_edit_outside_the_skill_or_unwritable_is_refused(parent, tmp_path, path, action):
    dest = tmp_path / "work" / "candidate"
    before = tree(tmp_path, dest)
    edit = Edit(path=path, action=action, content="planted\n", old="the", new="planted")
    problems = apply_edits(
        parent, dest, ProposalAnswer(summary="s", rationale="r", edits=[edit]), target="body"
    )
    assert problems, f"{action} of {path!r} was accepted"
    assert tree(tmp_path, dest) == before  # the parent and everything beside it untouched
    assert Path("/etc/planted.md").exists() is False and not Path("/tmp/planted.md").exists()


async def test_a_proposer_insisting_on_an_outside_path_is_a_rejection_not_a_crash(parent, tmp_path):
    class Proposer:  # the model, answering the same escape twice
        calls = 0

        async def structured(self, role, **kwargs):
            self.calls += 1
            return ProposalAnswer(
                summary="s",
                rationale="r",
                edits=[
                    Edit(path="../../escape.md", action="write", content="x"),
                    Edit(path="a\0b", action="write", content="x"),
                ],
            )

    client = Proposer()
    result = await propose(
        client,
        parent=parent,
        feedback=Feedback(),
        target="body",
        dest=tmp_path / "work" / "candidate",
        sample=0,
    )
    assert isinstance(result, Rejected) and client.calls == 2
    assert not (tmp_path / "escape.md").exists() and not (tmp_path / "work" / "candidate").exists()


# ------------------------------------------------------------------ eval paths


@pytest.mark.slow
@pytest.mark.parametrize("how", ["dot-dot", "absolute", "link out"])
def test_eval_input_paths_that_leave_the_skill_are_refused(tmp_path, how):
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    secret = tmp_path / "secret.csv"
    secret.write_text("password\nhunter2\n")
    evals_file = skill / "evals" / "evals.json"
    text = evals_file.read_text()
    target = {
        "dot-dot": "../../secret.csv",
        "absolute": str(secret),
        "link out": "evals/files/link.csv",
    }[how]
    if how == "link out":
        (skill / "evals" / "files" / "link.csv").symlink_to(secret)
    evals_file.write_text(text.replace('"evals/files/sales.csv"', f'"{target}"', 1))
    run_dir = tmp_path / "run"
    proc = cli("run", str(skill), "--run-dir", str(run_dir), "--provider", "sim", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "secret.csv" in proc.stderr or "link.csv" in proc.stderr
    assert not run_dir.exists()


# ------------------------------------------------------------------ a whole run in the sandbox

PROBE = r"""#!/bin/bash
# probe.sh HOME_MARKER RUN_DIR ESCAPE PORT TAG: what a model-written command can reach.
mkdir -p /workspace/outputs
{
echo "home_marker: $(cat "$1" 2>/dev/null | wc -c)"
echo "home_listing: $(ls -A "$(dirname "$1")" 2>/dev/null | wc -l)"
echo "project: $(ls -A /work 2>/dev/null | wc -l)"
echo "run_db: $(head -c 16 "$2/state.db" 2>/dev/null | wc -c)"
touch "$3" 2>/dev/null && echo "write_outside: done" || echo "write_outside: refused"
touch /skill/planted 2>/dev/null && echo "write_skill: done" || echo "write_skill: refused"
echo "key_in_env: $(env | grep -c -e sk-ant -e ANTHROPIC_API_KEY -e GITHUB_TOKEN)"
echo "key_in_proc: $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c sk-ant)"
python3 -c "import socket; socket.create_connection(('127.0.0.1', $4), 2)" 2>/dev/null \
  && echo "network: connected" || echo "network: refused"
echo "processes: $(python3 -c "
import subprocess
n = 0
try:
    for _ in range(150):
        subprocess.Popen(['sleep', '5.$5'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        n += 1
except OSError:
    pass
print(n)")"
python3 -c "b = bytearray(600_000_000)" 2>/dev/null && echo "memory: allocated" || echo "memory: refused"
echo "done: yes"
} > /workspace/outputs/probe.txt 2>&1
env > /workspace/outputs/env.txt
sleep 30.$5
"""


def leftovers(tag: str) -> str:
    found = subprocess.run(
        ["pgrep", "-af", f"sleep (5|30).{tag}"], capture_output=True, text=True, check=False
    )
    return found.stdout.strip()


@pytest.mark.slow
def test_a_whole_run_keeps_the_key_the_host_and_the_network_out_of_reach(tmp_path):
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    (skill / "scripts" / "probe.sh").write_text(PROBE)
    tag = str(uuid.uuid4().int % 10**9)
    marker = Path.home() / f".optimizer-probe-{tag}"
    escape = tmp_path / "escaped.txt"
    run_dir = tmp_path / "run"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    command = f"bash {{skill_dir}}/scripts/probe.sh {marker} {run_dir} {escape} {port} {tag}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPTIMIZER_", "ANTHROPIC_"))}
    env.update(ANTHROPIC_API_KEY=FAKE_KEY, GITHUB_TOKEN="ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE")
    marker.write_text("the host home is private\n")
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "optimizer",
                "run",
                str(skill),
                "--run-dir",
                str(run_dir),
                "--provider",
                "sim",
                "--max-iterations",
                "0",
                "--set",
                "execute.executor=command",
                "--set",
                f"execute.command={command}",
                "--set",
                "execute.timeout_s=6",
                "--set",
                "evals.runs_per_eval=1",
                "--set",
                "evals.baseline_comparison=false",
                "--set",
                "sandbox.memory_mb=256",
                "--set",
                "sandbox.max_processes=64",
            ],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
            cwd=ROOT,
        )
    finally:
        marker.unlink()
        listener.setblocking(False)
        try:
            listener.accept()
            reached = True
        except BlockingIOError:
            reached = False
        listener.close()
    assert proc.returncode == 0, proc.stderr
    assert leftovers(tag) == ""  # the timeout and the end of each run killed every process

    # The key is in no file of the run folder (state.db and the log included) and not printed.
    for path in run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert FAKE_KEY.encode() not in data and b"sk-ant-api03" not in data, path
            assert b"ghp_FAKE" not in data, path
    assert FAKE_KEY not in proc.stdout + proc.stderr

    probes = sorted(run_dir.glob("**/with_skill/run-*/outputs/probe.txt"))
    assert len(probes) == 5  # four train evals and the sealed test's one, each a timeout
    import sqlite3

    conn = sqlite3.connect(run_dir / "state.db")
    statuses = [s for (s,) in conn.execute("select status from trials")]
    durations = [t for (t,) in conn.execute("select time_seconds from trials")]
    conn.close()
    # Each stopped at its 6 s limit, in under half of the probe's `sleep 30`.
    assert statuses == ["timeout"] * 5 and max(durations) < 30 / 2
    if not sb.bwrap_available():
        tiers.skip(
            "bubblewrap",
            "bubblewrap does not work here: the run was only limited, not "
            "confined, so the confinement assertions below did not run",
        )
    for probe in probes:
        seen = dict(line.split(": ", 1) for line in probe.read_text().splitlines() if ": " in line)
        assert seen.get("done") == "yes", seen  # every probe ran before the time limit
        assert seen["home_marker"] == "0" and seen["home_listing"] == "0", seen
        assert seen["project"] == "0" and seen["run_db"] == "0", seen
        assert seen["write_outside"] == "refused" and seen["write_skill"] == "refused", seen
        assert seen["key_in_env"] == "0" and seen["key_in_proc"] == "0", seen
        assert seen["network"] == "refused" and seen["memory"] == "refused", seen
        if sb.process_limit_mechanism() != "none":
            assert int(seen["processes"]) < 64, seen
    assert not escape.exists() and not reached
    assert not (run_dir / "v0" / "skill" / "planted").exists()
    if sb.process_limit_mechanism() == "none":  # the process limit above was not asserted
        tiers.skip("pids-cgroup", "no process limit here: the probe's process count is unchecked")


# ------------------------------------------------------------------ the review server


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    return reference_run(tmp_path_factory)


def get(port: int, path: str, host: str | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.putrequest("GET", path, skip_host=True)
    conn.putheader("Host", host or f"127.0.0.1:{port}")
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body


def outward_address() -> str | None:
    """This machine's address on its default route, if it has one besides loopback."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))  # no packet is sent for a UDP connect
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


@pytest.mark.slow
def test_the_review_server_listens_on_loopback_and_serves_only_the_run_folder(reference, tmp_path):
    from optimizer.report.server import serve_in_thread

    run_dir = tmp_path / "run"
    shutil.copytree(reference, run_dir)
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the browser\n")
    (run_dir / "v0" / "leak.txt").symlink_to(secret)  # a link planted inside the run folder
    server, port = serve_in_thread(run_dir, port=0)
    try:
        assert server.server_address[0] == "127.0.0.1"
        outward = outward_address()
        if outward is not None:
            with pytest.raises(OSError):
                socket.create_connection((outward, port), timeout=2).close()
        status, body = get(port, "/history.json")
        assert status == 200 and b"current_best" in body  # the run folder itself is served
        for path in [
            "/v0/leak.txt",
            "/../secret.txt",
            "/%2e%2e/secret.txt",
            "/v0/%2e%2e/%2e%2e/secret.txt",
            f"/{tmp_path}/secret.txt",
            f"/..{tmp_path}/secret.txt",
            "//etc/passwd",
            "/inputs/..%2f..%2fsecret.txt",
            "/v0/skill/../../../secret.txt",
        ]:
            status, body = get(port, path)
            assert status in (403, 404), (path, status)
            assert b"not for the browser" not in body and b"root:" not in body, path
        status, _ = get(port, "/history.json", host=f"attacker.example:{port}")
        assert status == 403  # DNS rebinding: only requests addressed to loopback are answered
    finally:
        server.shutdown()
        server.server_close()
