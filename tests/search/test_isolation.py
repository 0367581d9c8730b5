"""Nothing of the sealed test split reaches a proposer or an analyzer: not its prompts, its
expectations, its outputs, its gradings nor a human remark about one of its runs."""

from __future__ import annotations

import json
import shutil

import pytest
from inprocess import EXAMPLE, Recording, cli

from optimizer import schemas

pytestmark = pytest.mark.slow  # whole runs, their requests inspected


def marked_skill(tmp_path):
    """csv-report whose every eval carries markers naming it, in its prompt and expectations."""
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    path = skill / "evals" / "evals.json"
    data = json.loads(path.read_text())
    for ev in data["evals"]:
        ev["prompt"] += f" (reference PROMPT-MARK-{ev['id']})"
        ev["expectations"].append(f"The report mentions EXPECT-MARK-{ev['id']}")
    path.write_text(json.dumps(data, indent=1))
    return skill


def test_no_request_to_a_proposer_or_analyzer_carries_anything_of_the_test_split(
    tmp_path, monkeypatch
):
    skill, run_dir = marked_skill(tmp_path), tmp_path / "run"
    sim = Recording(seed=3)
    args = ("--provider", "sim", "--set", "sim.seed=3")
    cli(
        monkeypatch,
        sim,
        "run",
        str(skill),
        "--run-dir",
        str(run_dir),
        "--max-iterations",
        "1",
        *args,
    )
    split = json.loads((run_dir / "history.json").read_text())["test"]
    (test_eval,), train = split["evals"], [e for e in range(1, 6) if e not in split["evals"]]
    reviews = [
        {
            "run_id": f"test-v0-eval-{test_eval}-with_skill-run-1",
            "timestamp": "",
            "feedback": "FEEDBACK-MARK-TEST: the sealed run looked off",
        },
        {
            "run_id": f"v0-eval-{train[0]}-with_skill-run-1",
            "timestamp": "",
            "feedback": "FEEDBACK-MARK-TRAIN: the summary is too thin",
        },
    ]
    (run_dir / "feedback.json").write_text(
        schemas.Feedback.model_validate(
            {"reviews": reviews, "status": "complete"}
        ).model_dump_json()
    )
    cli(monkeypatch, sim, "resume", str(run_dir), "--max-iterations", "2")

    seen = "\n".join(sim.bodies("proposer", "analyzer"))
    assert sim.bodies("analyzer"), "no analysis was asked for: nothing to check"
    # The scan sees what it looks for: train evals' markers and the train remark do get through.
    assert "FEEDBACK-MARK-TRAIN" in seen
    assert any(f"EXPECT-MARK-{e}" in seen or f"PROMPT-MARK-{e}" in seen for e in train)
    for mark in (f"PROMPT-MARK-{test_eval}", f"EXPECT-MARK-{test_eval}", "FEEDBACK-MARK-TEST"):
        assert mark not in seen, f"{mark} of the sealed test split reached a proposer or analyzer"
