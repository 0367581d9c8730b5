"""`optimizer evals suggest RUN_DIR`: a run's eval feedback turned into candidates (sharper
expectations, evals for unchecked failure modes, duplicates to drop), and what accepting each does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from optimizer.schemas import CandidatesFile

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "fixtures" / "csv-report"
SUMMARY = "The report has a `## Summary` section"
VAGUE = "The summary is useful"  # no output fails it: what the graders call vague
SHARPER = "The `## Summary` section names the month with the highest revenue"
PRECISE = "The report is at most 150 words"


def setup(tmp_path: Path) -> tuple[Path, Path]:
    """The example skill with a vague expectation in evals 1 and 4 (where the summary one was), a
    precise one in evals 2 and 3, and eval 6 a twin of eval 2; a run whose graders raised them."""
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    path = skill / "evals" / "evals.json"
    data = json.loads(path.read_text())
    for e in data["evals"]:
        e["expectations"] = [VAGUE if t == SUMMARY else t for t in e["expectations"]]
        e["expectations"] += [PRECISE] if e["id"] in (2, 3) else []
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
    vague = "Too vague to discriminate: only 2 content word(s), so almost any answer passes."
    (run / "eval_feedback_aggregate.json").write_text(
        json.dumps(
            {
                "skill_name": "csv-report",
                "iteration": 2,
                "total_runs": 12,
                "suggestions": [
                    {
                        "frequency": 9,
                        "assertion": PRECISE,
                        "reason": vague,
                        "action": f"Make '{PRECISE}' specific enough that a wrong output fails it.",
                    },
                    {
                        "frequency": 4,
                        "assertion": VAGUE,
                        "reason": f'Would pass for any summary; better: "{SHARPER}".',
                        "action": f"Make '{VAGUE}' specific enough that a wrong output fails it.",
                    },
                    {
                        "frequency": 3,
                        "assertion": VAGUE,
                        "reason": vague,
                        "action": f"Make '{VAGUE}' specific enough that a wrong output fails it.",
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
                    {
                        "frequency": 1,
                        "assertion": VAGUE,
                        "reason": f"Eval 1: expectation '{VAGUE}' passes in every run of both "
                        "configurations - does not discriminate the skill's value",
                        "action": "Replace or sharpen it: it passes with and without the skill.",
                        "source": "analyst",
                    },
                    {
                        "frequency": 1,
                        "assertion": PRECISE,
                        "reason": f"Eval 2: expectation '{PRECISE}' passes in every run of both "
                        "configurations - does not discriminate the skill's value",
                        "action": "Replace or sharpen it: it passes with and without the skill.",
                        "source": "analyst",
                    },
                ],
            }
        )
    )
    return skill, run


def test_suggest_drafts_one_suggestion_per_expectation_and_each_kind_once(tmp_path, cli) -> None:
    skill, run = setup(tmp_path)
    result = cli("evals", "suggest", run, "--skill", skill)
    assert result.exit_code == 0, result.output
    data = CandidatesFile.model_validate_json((skill / "evals" / "candidates.json").read_text())
    kinds = [(c.kind, c.target_eval_id) for c in data.candidates]
    # Three reports on the vague expectation make one suggestion; the precise one makes none; the
    # judge errors are no eval; a failure mode no expectation checks becomes a check on a train
    # eval (the first, as none is named).
    assert kinds == [("sharpen", 1), ("add_check", 1), ("drop", 6)]
    sharpen, new, drop = data.candidates
    assert sharpen.replaces == VAGUE and sharpen.eval.expectations == [SHARPER]
    assert sharpen.reason.startswith("raised in 8 gradings of evals 1, 4: ")
    assert new.eval.expectations == ["The report names the date range of the data"]
    assert new.origin.source == "run" and "asks what eval 2 asks" in drop.reason
    again = cli("evals", "suggest", run, "--skill", skill)
    assert "0 new" in again.output


def test_a_precise_expectation_is_never_called_vague(tmp_path, cli) -> None:
    skill, run = setup(tmp_path)
    assert cli("evals", "suggest", run, "--skill", skill).exit_code == 0
    text = (skill / "evals" / "candidates.json").read_text()
    data = CandidatesFile.model_validate_json(text)
    assert PRECISE not in text
    assert not [c for c in data.candidates if c.kind == "sharpen" and c.replaces != VAGUE]


def test_accepting_suggestions_edits_evals_json_as_they_say(tmp_path, cli) -> None:
    skill, run = setup(tmp_path)
    before = {e["id"]: e for e in json.loads((skill / "evals" / "evals.json").read_text())["evals"]}
    assert cli("evals", "suggest", run, "--skill", skill).exit_code == 0
    ids = [
        c["id"] for c in json.loads((skill / "evals" / "candidates.json").read_text())["candidates"]
    ]
    result = cli("evals", "accept", skill, "--all")
    assert result.exit_code == 0, result.output
    # Each line says what changed in evals.json, never "accepted as eval N" for an edit.
    assert result.output.splitlines()[:3] == [
        f"{ids[0]}: eval 1: expectation 3; eval 4: expectation 3 rewritten: "
        f"'{VAGUE}' → '{SHARPER}'",
        f"{ids[1]}: eval 1: expectation 5 added: 'The report names the date range of the data'",
        f"{ids[2]}: eval 6 dropped",
    ]
    evals = {e["id"]: e for e in json.loads((skill / "evals" / "evals.json").read_text())["evals"]}
    assert sorted(evals) == [1, 2, 3, 4, 5]  # the twin dropped
    # The same words in eval 4 are the same vague check: rewritten there too.
    assert evals[1]["expectations"][2] == SHARPER and evals[4]["expectations"][2] == SHARPER
    assert evals[1]["expectations"][-1] == "The report names the date range of the data"
    assert len(evals[1]["expectations"]) == len(before[1]["expectations"]) + 1
    # Nothing the run diagnosed is written into an expectation.
    written = (skill / "evals" / "evals.json").read_text()
    assert "vague" not in written.lower() and "must fail" not in written
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
    path = skill / "evals" / "candidates.json"
    if "nothing was written" in result.output:  # nothing to suggest: no empty file either
        assert not path.exists()
    else:
        assert CandidatesFile.model_validate_json(path.read_text()).candidates


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
    assert cand["eval"]["expectations"] == ["The answer states the units"]


def test_with_a_provider_a_model_rewrites_what_no_one_rewrote_from_the_evals_task(
    tmp_path, monkeypatch
) -> None:
    from inprocess import Recording
    from inprocess import cli as run_cli

    skill, run = setup(tmp_path)
    secret = "sk-ant-api03-PlantedSecretKey0123456789abcdef"
    path = skill / "evals" / "evals.json"
    data = json.loads(path.read_text())
    data["evals"][2]["expectations"].append("The notes are clear")  # eval 3's task names nothing
    path.write_text(json.dumps(data, indent=2))
    vague = f"Too vague to discriminate (the key {secret} was in the output)."
    (run / "eval_feedback_aggregate.json").write_text(
        json.dumps(
            {
                "skill_name": "csv-report",
                "iteration": 1,
                "total_runs": 6,
                "suggestions": [
                    {"frequency": 3, "assertion": VAGUE, "reason": vague, "action": "Sharpen it."},
                    {
                        "frequency": 2,
                        "assertion": "The notes are clear",
                        "reason": vague,
                        "action": "Sharpen it.",
                    },
                ],
            }
        )
    )
    monkeypatch.chdir(tmp_path)  # the rewriting call's ledger goes to ./runs/evals-suggest/
    plain = run_cli(monkeypatch, None, "evals", "suggest", str(run), "--skill", str(skill))
    assert "2 expectation(s) no output could fail" in plain and "--provider" in plain
    sim = Recording(seed=0)
    said = run_cli(
        monkeypatch, sim, "evals", "suggest", str(run), "--skill", str(skill), "--provider", "sim"
    )
    cands = CandidatesFile.model_validate_json((skill / "evals" / "candidates.json").read_text())
    [sharpen] = [c for c in cands.candidates if c.kind == "sharpen"]
    # Eval 1's task names the months and the meeting day: the rewrite asks for them.
    assert sharpen.replaces == VAGUE and sharpen.target_eval_id == 1
    assert sharpen.eval.expectations == ["The summary names January, February and Monday"]
    assert sharpen.drafted_by.startswith("model")
    assert "1 expectation(s) no output could fail" in said and "'The notes are clear'" in said
    sent = [body for _, _, body in sim.requests if "submit_expectation_rewrites" in body]
    assert len(sent) == 1 and VAGUE in sent[0] and "Here is our sales export" in sent[0]
    assert not any(secret in body for _, _, body in sim.requests)


def test_a_quote_of_the_output_in_a_reason_is_not_taken_for_a_rewrite(tmp_path, cli) -> None:
    skill, run = setup(tmp_path)
    (run / "eval_feedback_aggregate.json").write_text(
        json.dumps(
            {
                "skill_name": "csv-report",
                "iteration": 1,
                "total_runs": 3,
                "suggestions": [
                    {
                        "frequency": 3,
                        "assertion": VAGUE,
                        "reason": 'Passed although the summary only says "The report has 12 rows".',
                        "action": "Sharpen it.",
                    }
                ],
            }
        )
    )
    result = cli("evals", "suggest", run, "--skill", skill)
    assert result.exit_code == 0 and f"'{VAGUE}' (eval 1)" in result.output
    data = CandidatesFile.model_validate_json((skill / "evals" / "candidates.json").read_text())
    assert [c.kind for c in data.candidates] == ["drop"]


def test_the_report_marks_as_candidates_only_what_suggest_turns_into_candidates(
    tmp_path, cli
) -> None:
    from optimizer.report import overview

    skill, run = setup(tmp_path)
    result = cli("evals", "suggest", run, "--skill", skill)
    data = CandidatesFile.model_validate_json((skill / "evals" / "candidates.json").read_text())
    made = sorted(c.replaces or "(missing check)" for c in data.candidates if c.kind != "drop")
    aggregate = json.loads((run / "eval_feedback_aggregate.json").read_text())
    rows = overview.suggestions(aggregate)["suggestions"]
    marked = sorted({r["assertion"] or "(missing check)" for r in rows if r["candidate"]})
    assert marked == made == ["(missing check)", VAGUE]
    # The precise expectation twice, the judge errors: what the run said, for the user to read.
    assert "3 of the run's suggestions are notes to read, not candidates" in result.output


def test_suggest_on_a_simulated_run_says_its_suggestions_are_notes(simulated, tmp_path, cli):
    from optimizer.report import overview

    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    aggregate = json.loads((simulated / "eval_feedback_aggregate.json").read_text())
    result = cli("evals", "suggest", simulated, "--skill", skill)
    assert result.exit_code == 0, result.output
    shown = overview.suggestions(aggregate)
    notes = len(aggregate["suggestions"]) - shown["candidates"]
    assert notes and f"{notes} of the run's suggestions are notes to read" in result.output


def test_nothing_to_suggest_writes_no_file_into_the_skill_folder(tmp_path):
    """`evals suggest` with nothing to suggest wrote an empty candidates.json into the user's
    skill folder."""
    from optimizer.grow import mine

    skill = Path(shutil.copytree(EXAMPLE, tmp_path / "skill"))
    stored = mine.store_suggestions(skill, [])
    assert stored.added == 0 and not stored.path.exists()
