"""`optimizer evals suggest RUN_DIR`: a run's eval feedback turned into candidates (sharper
expectations, evals for unchecked failure modes, duplicates to drop), and what accepting each does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from optimizer.schemas import CandidatesFile

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "csv-report"
SUMMARY = "The report has a `## Summary` section"


def setup(tmp_path: Path) -> tuple[Path, Path]:
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    path = skill / "evals" / "evals.json"
    data = json.loads(path.read_text())
    twin = dict(
        data["evals"][1],
        id=6,
        name="Survey again",
        prompt=data["evals"][1]["prompt"].replace("Our customer", "Our customers'"),
    )
    data["evals"].append(twin)
    path.write_text(json.dumps(data, indent=2))
    run = tmp_path / "run"
    run.mkdir()
    (run / "eval_feedback_aggregate.json").write_text(
        json.dumps(
            {
                "skill_name": "csv-report",
                "iteration": 2,
                "total_runs": 12,
                "suggestions": [
                    {
                        "frequency": 3,
                        "assertion": SUMMARY,
                        "reason": f"Eval 1: expectation '{SUMMARY}' passes in "
                        "every run of both configurations - does not discriminate the skill's value",
                        "action": "Replace or sharpen it: it passes with and without the skill.",
                        "source": "analyst",
                    },
                    {
                        "frequency": 2,
                        "assertion": None,
                        "reason": "No assertion checks that the report names the "
                        "date range of the data",
                        "action": "Add an expectation that checks this.",
                    },
                    {
                        "frequency": 1,
                        "assertion": None,
                        "reason": "3 run(s) had judge error(s), excluded from the means",
                        "action": "Look at the judge.",
                        "source": "analyst",
                    },
                ],
            }
        )
    )
    return skill, run


def test_suggest_drafts_the_three_kinds(tmp_path, cli) -> None:
    skill, run = setup(tmp_path)
    result = cli("evals", "suggest", run, "--skill", skill)
    assert result.exit_code == 0, result.output
    data = CandidatesFile.model_validate_json((skill / "evals" / "candidates.json").read_text())
    kinds = [(c.kind, c.target_eval_id) for c in data.candidates]
    # Eval 4 carries the same expectation, but the analyst named eval 1; the judge errors are no eval.
    # A failure mode no expectation checks becomes a check on a train eval (the first, as none is named).
    assert kinds == [("sharpen", 1), ("add_check", 1), ("drop", 6)]
    sharpen, new, drop = data.candidates
    assert sharpen.replaces == SUMMARY and sharpen.eval.expectations[0].startswith(
        SUMMARY + ", and it must fail"
    )
    assert new.eval.expectations == ["The report names the date range of the data"]
    assert new.origin.source == "run" and "asks what eval 2 asks" in drop.reason
    again = cli("evals", "suggest", run, "--skill", skill)
    assert "0 new" in again.output


def test_accepting_suggestions_edits_evals_json_as_they_say(tmp_path, cli) -> None:
    skill, run = setup(tmp_path)
    before = {e["id"]: e for e in json.loads((skill / "evals" / "evals.json").read_text())["evals"]}
    assert cli("evals", "suggest", run, "--skill", skill).exit_code == 0
    assert cli("evals", "accept", skill, "--all").exit_code == 0
    evals = {e["id"]: e for e in json.loads((skill / "evals" / "evals.json").read_text())["evals"]}
    assert sorted(evals) == [1, 2, 3, 4, 5]  # the twin dropped
    assert SUMMARY not in evals[1]["expectations"] and SUMMARY in evals[4]["expectations"]
    assert evals[1]["expectations"][-1] == "The report names the date range of the data"
    # the sharper expectation takes the old one's place, the added check is one more
    assert len(evals[1]["expectations"]) == len(before[1]["expectations"]) + 1
    assert cli("validate", skill).exit_code == 0


def test_suggest_without_the_aggregate_says_what_to_do(tmp_path, cli) -> None:
    skill, run = setup(tmp_path)
    (run / "eval_feedback_aggregate.json").unlink()
    result = cli("evals", "suggest", run, "--skill", skill)
    assert result.exit_code == 2 and "eval_feedback_aggregate.json: missing" in result.output
    assert not (skill / "evals" / "candidates.json").exists()


def test_suggest_on_a_real_simulated_run(simulated, tmp_path, cli) -> None:
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    result = cli("evals", "suggest", simulated, "--skill", skill)
    assert result.exit_code == 0, result.output
    CandidatesFile.model_validate_json((skill / "evals" / "candidates.json").read_text())


def test_a_missing_check_seen_on_a_sealed_eval_goes_to_a_train_eval(
    simulated, tmp_path, cli
) -> None:
    import sqlite3

    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    with sqlite3.connect(simulated / "state.db") as db:
        split = json.loads(db.execute("select split_json from runs").fetchone()[0])
    sealed = split["test"][0]
    (simulated / "eval_feedback_aggregate.json").write_text(
        json.dumps(
            {
                "skill_name": "csv-report",
                "iteration": 1,
                "total_runs": 4,
                "suggestions": [
                    {
                        "frequency": 2,
                        "assertion": None,
                        "reason": f"Eval {sealed}: no assertion checks the units",
                        "action": "Add an expectation that checks this.",
                    }
                ],
            }
        )
    )
    assert cli("evals", "suggest", simulated, "--skill", skill).exit_code == 0
    [cand] = json.loads((skill / "evals" / "candidates.json").read_text())["candidates"]
    assert cand["kind"] == "add_check" and cand["target_eval_id"] in split["train"]
    assert cand["eval"]["expectations"] == ["The units"]
