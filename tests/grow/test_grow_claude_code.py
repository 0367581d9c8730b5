"""Sessions written by the real Claude Code CLI (npm, scripts/install-claude-code.sh) against the
simulator on loopback, with an isolated HOME whose ~/.claude/projects/ receives them, mined into
candidate evals of examples/csv-report. No network."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from inprocess import Recording
from inprocess import cli as run_cli

from optimizer.config import Settings
from optimizer.errors import BadInput
from optimizer.execute.claude_env import COMMON_ENV, find_claude
from optimizer.schemas import CandidatesFile
from optimizer.sim import Simulator, serve

pytestmark = pytest.mark.slow  # the Claude Code CLI's sessions

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "fixtures" / "csv-report"
KEY = "sk-ant-api03-RealCliPlantedSecretKey0123456789"
TOKEN = "ghp_RealCliPlantedToken0123456789abcdefABCD"
# Five tasks a user could have given Claude Code, each naming a file of the project.
TASKS = {
    "sales": f"Write a markdown report on data/sales.csv to outputs/report.md for Monday's meeting (key {KEY})",
    "survey": "Profile data/survey.csv in a markdown report at outputs/report.md and make the gaps visible",
    "inventory": f"Purchasing wants a markdown report on data/inventory.csv at outputs/report.md; token={TOKEN}",
    "weather": "Turn data/weather.csv into a markdown report at outputs/report.md for the weekly update",
    "employees": "Write a markdown report profiling data/employees.csv to outputs/report.md",
}
CORRECTION = "No, that is wrong: round every number to two decimals and add a Notes section"


class SkillFirst(Simulator):
    """The simulator, but its agent always calls the Skill tool first: whether the simulated agent
    picks the skill is drawn from the request, which names the test's temporary folder, and a
    session without the skill is (rightly) no candidate. The rest of each turn is the world's."""

    def respond(self, body, headers):  # type: ignore[no-untyped-def]
        offered = any(t.get("name") == "Skill" for t in body.get("tools") or [])
        called = any(
            b.get("type") == "tool_use" and b.get("name") == "Skill"
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
        )
        if not offered or called:
            return super().respond(body, headers)
        return {
            "id": "msg_skill_first",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_skill_first",
                    "name": "Skill",
                    "input": {"skill": "csv-report"},
                }
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }


def _binary() -> Path | None:
    try:
        return find_claude(Settings())
    except BadInput:
        return None


needs_cli = pytest.mark.skipif(
    _binary() is None,
    reason="the Claude Code CLI is not installed: run "
    "scripts/install-claude-code.sh (npm package @anthropic-ai/claude-code)",
)


def claude(binary: Path, project: Path, home: Path, url: str, prompt: str, *extra: str) -> str:
    """One `claude -p` turn as a user would run it: sessions persisted under HOME/.claude/projects/."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(home / "tmp"),
        "ANTHROPIC_API_KEY": "sim-key",
        "ANTHROPIC_BASE_URL": url,
        **COMMON_ENV,
    }
    done = subprocess.run(
        [
            str(binary),
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--tools",
            "Read,Write,Edit,Glob,Grep,Skill",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Skill",
            *extra,
        ],
        input=prompt,
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["session_id"]


@pytest.fixture
def cli_sessions(tmp_path: Path):
    """Five real sessions in one project that holds the skill and the data files; one corrected."""
    binary = _binary()
    assert binary is not None
    project, home = tmp_path / "work", tmp_path / "home"
    (home / "tmp").mkdir(parents=True)
    shutil.copytree(
        EXAMPLE,
        project / ".claude" / "skills" / "csv-report",
        ignore=shutil.ignore_patterns("evals"),
    )
    (project / "data").mkdir()
    for name in TASKS:
        shutil.copy(EXAMPLE / "evals" / "files" / f"{name}.csv", project / "data")
    server, port = serve(SkillFirst(seed=0), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{port}"
    try:
        ids = {name: claude(binary, project, home, url, task) for name, task in TASKS.items()}
        claude(binary, project, home, url, CORRECTION, "--resume", ids["sales"])
    finally:
        server.shutdown()
        server.server_close()
    projects = home / ".claude" / "projects"
    assert len(list(projects.rglob("*.jsonl"))) == 5
    return projects, ids


@needs_cli
def test_real_cli_sessions_become_candidates_without_their_secrets(
    cli_sessions, tmp_path, monkeypatch
) -> None:
    projects, ids = cli_sessions
    monkeypatch.chdir(tmp_path)  # the drafting ledger goes to ./runs/evals-mine/
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    for f in (skill / "evals" / "files").iterdir():
        f.unlink()  # the copies must come from the sessions' project, not from the example
    sim = Recording(seed=0)
    printed = run_cli(
        monkeypatch,
        sim,
        "evals",
        "mine",
        str(skill),
        "--from",
        str(projects),
        "--since",
        "3650d",
        "--provider",
        "sim",
    )
    assert "5 use(s) of the skill in 5 session(s); 5 new candidate(s)" in printed
    data = CandidatesFile.model_validate_json((skill / "evals" / "candidates.json").read_text())
    by_session = {c.origin.session_id: c for c in data.candidates}
    assert set(by_session) == set(ids.values())
    for name, task in TASKS.items():
        cand = by_session[ids[name]]
        expected = task.replace(f"data/{name}.csv", f"evals/files/{name}.csv")
        expected = expected.replace(KEY, "[redacted]").replace(TOKEN, "[redacted]")
        assert cand.eval.prompt == expected
        assert cand.eval.files == [f"evals/files/{name}.csv"]
        assert (skill / "evals" / "files" / f"{name}.csv").read_bytes() == (
            EXAMPLE / "evals" / "files" / f"{name}.csv"
        ).read_bytes()
        assert cand.origin.file.endswith(f"{ids[name]}.jsonl") and cand.origin.time.startswith("20")
        assert cand.drafted_by.startswith("model") and cand.signals.outputs == ["outputs/report.md"]
    corrected = by_session[ids["sales"]]
    assert corrected.signals.corrections == [CORRECTION]
    assert any("two decimals" in e for e in corrected.eval.expectations)
    # The secrets are in the sessions, and nowhere we wrote, logged or sent.
    raw = "".join(p.read_text() for p in projects.rglob("*.jsonl"))
    assert KEY in raw and TOKEN in raw
    drafting = [body for role, _, body in sim.requests if "submit_eval_drafts" in body]
    assert len(drafting) == 1 and "evals/files/sales.csv" in drafting[0]
    written = [p for p in [*skill.rglob("*"), *Path("runs/evals-mine").rglob("*")] if p.is_file()]
    seen = printed + "".join(body for _, _, body in sim.requests)
    seen += "".join(p.read_text(errors="replace") for p in written)
    assert KEY not in seen and TOKEN not in seen

    # Accepted, they are evals the checks and skill-creator's format take.
    run_cli(monkeypatch, None, "evals", "accept", str(skill), "--all")
    run_cli(monkeypatch, None, "validate", str(skill))
    grown = json.loads((skill / "evals" / "evals.json").read_text())
    assert [e["id"] for e in grown["evals"]] == list(range(1, 11))
    run_cli(monkeypatch, None, "check-artifact", str(skill / "evals" / "evals.json"), "--strict")
    assert read_as_skill_creator(skill) == 10


def read_as_skill_creator(skill: Path) -> int:
    """evals.json as seed 002 describes it for skill-creator, read without our models: a unique
    integer id, the prompt, the expected output, input files relative to the skill root, and the
    expectations as statements."""
    data = json.loads((skill / "evals" / "evals.json").read_text())
    assert data["skill_name"] == "csv-report"
    ids = [e["id"] for e in data["evals"]]
    assert len(set(ids)) == len(ids) and all(type(i) is int for i in ids)
    for e in data["evals"]:
        assert (
            isinstance(e["prompt"], str)
            and e["prompt"]
            and isinstance(e.get("expected_output", ""), str)
        )
        assert all((skill / f).is_file() for f in e.get("files", []))
        assert all(isinstance(x, str) and x for x in e["expectations"])
    return len(ids)
