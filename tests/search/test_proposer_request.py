"""What the proposer is shown: transcript excerpts of failing runs, per-eval costs, work repeated
across evals, the evidence within a budget, and guidance written like a skill author's. The
golden files show one whole rendered proposer request and one grader request; after a change
that means to alter them, regenerate with UPDATE_GOLDEN=1 and read the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from inprocess import EXAMPLE, Recording, cli
from test_judge import make_eval, make_run

from optimizer.grade import judge
from optimizer.inputs import skill as skills
from optimizer.search import work
from optimizer.search.proposal import EvalCost, Failure, Feedback
from optimizer.search.propose import build_request
from optimizer.store.files import Workspace
from optimizer.tags import parse_tags, section

GOLDEN = Path(__file__).parents[1] / "golden"


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), (
        f"{path} differs; UPDATE_GOLDEN=1 to regenerate"
    )


def feedback() -> Feedback:
    return Feedback(
        failures=[
            Failure(
                2,
                "The report states the `Row count:`",
                3,
                "No row count in report.md",
                "## Step 4\nI computed the rows by eye and wrote the table.\n",
            )
        ],
        costs=[EvalCost(1, 3, 1.0, 2_900, 4.0), EvalCost(2, 3, 0.33, 5_400, 9.0)],
        repeated_work=["runs `python - <<EOF` (in 2 evals, 5 runs)"],
        judge_feedback=["Reports never state the units."],
        analysis_suggestions=["[high] Tell the agent to run the profiling script first."],
        human_feedback=["v0-eval-1-with_skill-run-1: the table is hard to read"],
        lost_attempts=["Add a checklist — lost: Δ −0.04"],
    )


def test_the_proposer_request_is_the_golden_one(tmp_path):
    skill = tmp_path / "skill"
    skills.snapshot(EXAMPLE, skill)
    golden("proposer_request.txt", build_request(skill, feedback(), "body"))


def test_the_grader_request_is_the_golden_one(tmp_path):
    run_dir, _ = make_run(tmp_path)
    golden("grader_request.txt", judge.build_request(make_eval(), run_dir))


def test_the_evidence_keeps_to_its_budget_by_priority(tmp_path, monkeypatch):
    from optimizer.search import propose

    skill = tmp_path / "skill"
    skills.snapshot(EXAMPLE, skill)
    big = feedback()
    big.lost_attempts = [f"attempt {k}: " + "x" * 2_000 for k in range(40)]
    monkeypatch.setattr(propose, "MAX_EVIDENCE_CHARS", 6_000)
    text = build_request(skill, big, "body")
    assert "No row count in report.md" in section(text, "failed_expectations")
    assert "I computed the rows by eye" in text  # the excerpts come before what was cut
    assert "over the evidence limit" in section(text, "lost_attempts")
    assert "attempt 39" not in text


def test_repeated_work_is_what_recurs_across_evals(tmp_path):
    ws = Workspace(tmp_path)

    def transcript(e: int, n: int, *calls: dict) -> None:
        path = ws.trial_dir("v0", e, "with_skill", n) / "transcript.jsonl"
        path.parent.mkdir(parents=True)
        blocks = [{"type": "tool_use", "id": f"t{k}", **c} for k, c in enumerate(calls)]
        path.write_text(
            json.dumps({"type": "message", "role": "assistant", "content": blocks}) + "\n"
        )

    profile = {"name": "bash", "input": {"command": "python scripts/profile_csv.py  data.csv"}}
    helper = {
        "name": "str_replace_based_edit_tool",
        "input": {"command": "create", "path": "/workspace/count.py", "file_text": "..."},
    }
    deliverable = {"name": "Write", "input": {"file_path": "/workspace/outputs/chart.py"}}
    once = {"name": "bash", "input": {"command": "ls evals/files"}}
    transcript(1, 1, profile, helper, deliverable, profile)
    transcript(2, 1, profile, helper, deliverable)
    transcript(3, 1, once, profile)
    found = work.repeated(ws, "v0", [(1, 1), (2, 1), (3, 1)])
    assert found == [
        "runs `python scripts/profile_csv.py data.csv` (in 3 evals, 3 runs)",
        "writes a helper script `count.py` (in 2 evals, 2 runs)",
    ]


@pytest.mark.slow
def test_a_run_sends_the_proposer_excerpts_costs_and_guidance(tmp_path, monkeypatch):
    sim = Recording(seed=0)
    cli(
        monkeypatch,
        sim,
        "run",
        str(EXAMPLE),
        "--provider",
        "sim",
        "--max-iterations",
        "1",
        "--run-dir",
        str(tmp_path / "run"),
        "--set",
        "loop.proposals_per_iteration=1",
    )
    (body,) = [json.loads(b) for b in sim.bodies("proposer")][:1]
    text = body["messages"][0]["content"]
    assert "tokens" in section(text, "eval_costs") and "turns" in section(text, "eval_costs")
    excerpts = parse_tags(section(text, "transcript_excerpts"), "failing_run")
    assert excerpts and all("Step" in content for _, content in excerpts)
    system = json.dumps(body["system"])
    assert "Generalise from the evidence" in system and "Bundle repeated work" in system
