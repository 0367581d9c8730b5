"""A proposal that copies a train eval's specific values into the skill goes back to the proposer
once, to be written as a general instruction; one that still copies them is refused, never
accepted (search/copied.py, search/propose.py)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from inprocess import EXAMPLE, cli

from optimizer.inputs.evals import load_evals
from optimizer.schemas import Edit, ProposalAnswer
from optimizer.search import copied
from optimizer.search.proposal import Candidate, Feedback, Rejected
from optimizer.search.propose import propose

VALUES = copied.train_values(load_evals(EXAMPLE).evals, EXAMPLE)
WORDING = copied.wording_of(load_evals(EXAMPLE).evals)


def test_values_are_ids_numbers_colours_files_and_quotes_not_common_words():
    found = copied.values_of(
        "Round to 2 decimals; give a `## Summary`. State #1a2332, $2M seed for 18 months, "
        'INV-2024, 3.5% and "Acme quarterly plan" from sales.csv.'
    )
    assert found == {"#1a2332", "$2M", "18", "INV-2024", "3.5%", "Acme quarterly plan", "sales.csv"}


def test_a_dotted_version_is_named_whole_or_not_at_all():
    # "3.2.1x" is one token: reading its prefix "3.2" would call a value copied that no eval names.
    assert copied.values_of("ships 3.2.1x and 3.2.1, then 0.9.") == {"3.2.1", "0.9"}


def test_the_example_evals_values_come_from_their_words_checks_and_input_files():
    assert {"12", "216", "sales.csv"} <= VALUES  # the expected output's values, an input's name
    assert "S3" not in VALUES  # a check's id labels the eval file; it is no task's value
    assert "A-100" in VALUES  # an id in an input file
    assert not {"Report", "Summary", "Notes", "2"} & VALUES


def test_a_value_the_parent_already_held_is_not_a_copy(tmp_path):
    parent = tmp_path / "parent"
    shutil.copytree(EXAMPLE, parent, ignore=shutil.ignore_patterns("evals"))
    child = tmp_path / "child"
    shutil.copytree(parent, child)
    skill_md = child / "SKILL.md"
    skill_md.write_text(skill_md.read_text() + "\n- State 12 rows and the peak of 216.\n")
    assert copied.copied(parent, child, VALUES) == ["12", "216"]
    assert copied.copied(child, child, VALUES) == []


class Proposer:
    """The model: each answer appends the next of `lines` to SKILL.md."""

    def __init__(self, *lines: str) -> None:
        self.lines, self.calls, self.asked = list(lines), 0, []

    async def structured(self, role, **kwargs):
        self.asked.append(kwargs["messages"][-1]["content"])
        line = self.lines[min(self.calls, len(self.lines) - 1)]
        self.calls += 1
        old = "Do not paste raw rows of the CSV into the report."
        return ProposalAnswer(
            summary="s",
            rationale="r",
            edits=[Edit(path="SKILL.md", action="replace", old=old, new=f"{old}\n{line}")],
        )


async def ask(client: Proposer, tmp_path: Path):
    return await propose(
        client,
        parent=EXAMPLE,
        feedback=Feedback(),
        target="body",
        dest=tmp_path / "work" / "candidate",
        sample=0,
        values=VALUES,
        wording=WORDING,
    )


async def test_a_copy_goes_back_once_and_a_general_rewrite_is_taken(tmp_path):
    client = Proposer("- State 12 rows in the answer.", "- State the row count the file has.")
    result = await ask(client, tmp_path)
    assert isinstance(result, Candidate) and client.calls == 2
    assert "copies specific values of the evals into the skill ('12')" in client.asked[1]


async def test_a_proposer_that_still_copies_is_refused(tmp_path):
    client = Proposer("- State 12 rows in the answer.", "- Peaks are at 216.")
    result = await ask(client, tmp_path)
    assert isinstance(result, Rejected) and client.calls == 2
    assert result.reasons == ["copies eval values"]
    assert not (tmp_path / "work" / "candidate").exists()


@pytest.mark.slow
def test_no_version_a_run_accepts_holds_a_train_value(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    # A world whose proposer copies often: 2 of 5 proposals copy a failing expectation's values.
    copying = ("--set", "sim.overfit_rate=0.4", "--set", "sim.proposal_quality=0.5",
               "--set", "sim.harmful_rate=0.05")  # fmt: skip
    cli(monkeypatch, None, "run", str(EXAMPLE), "--run-dir", str(run_dir), "--provider", "sim",
        "--max-iterations", "8", "--spend-all", *copying)  # fmt: skip
    with sqlite3.connect(run_dir / "state.db") as db:
        split = json.loads(db.execute("select split_json from runs").fetchone()[0])
        asked = db.execute("select count(*) from calls where role = 'proposer'").fetchone()[0]
        made = db.execute("select candidates_json from iterations").fetchall()
    proposals = sum(len(json.loads(row[0])) for row in made)
    evals = [e for e in load_evals(run_dir / "inputs").evals if e.id in split["train"]]
    values = copied.train_values(evals, run_dir / "inputs")
    for skill in sorted(run_dir.glob("v*/skill")):
        assert copied.copied(run_dir / "v0" / "skill", skill, values) == [], skill
    assert asked > proposals  # the world copied, and its copies went back to the proposer


def test_an_expectations_sentence_or_a_checks_id_is_restated_a_kind_of_work_is_not(tmp_path):
    """Winners read "Make sure that S2: the Team price is kept." and "Make sure that S3: The
    report profiles the columns.": a run of 7 of a train expectation's words, or a check's id,
    new in the candidate, is the eval restated."""
    parent = tmp_path / "parent"
    shutil.copytree(EXAMPLE, parent, ignore=shutil.ignore_patterns("evals"))

    def child_with(line: str) -> Path:
        child = tmp_path / f"child-{abs(hash(line))}"
        shutil.copytree(parent, child, dirs_exist_ok=True)
        (child / "SKILL.md").write_text((parent / "SKILL.md").read_text() + f"\n{line}\n")
        return child

    said = copied.restated(
        parent,
        child_with("- Make sure that the `## Columns` table has a `missing` count per column."),
        WORDING,
    )
    assert said == ["The `## Columns` table has a `missing` count per column"]
    assert copied.restated(parent, child_with("- Follow S3: profile the columns."), WORDING) == [
        "S3:"
    ]
    general = "- End every report with a `## Notes` section that lists gaps and odd values."
    assert copied.restated(parent, child_with(general), WORDING) == []
    assert copied.restated(parent, parent, WORDING) == []


async def test_a_restated_expectation_goes_back_once_then_is_refused(tmp_path):
    restating = "- Make sure that the `## Columns` table has a `missing` count per column."
    client = Proposer(restating, "- Make sure that the report has a `## Summary` section S1: yes.")
    result = await ask(client, tmp_path)
    assert isinstance(result, Rejected) and client.calls == 2
    assert "restates the evals' own wording" in client.asked[1]
    assert result.reasons == ["restates eval wording"]
    client = Proposer(restating, "- Count the missing values of each column in its table row.")
    assert isinstance(await ask(client, tmp_path / "again"), Candidate)


def test_a_sentence_moved_from_skill_md_to_a_reference_is_not_restated(tmp_path):
    """The parent's wording is the parent's, in whichever of its files it now stands; and a
    rubric dimension's id ("Q1") is a skill's own word, never a check restated."""
    parent = tmp_path / "parent"
    shutil.copytree(EXAMPLE, parent, ignore=shutil.ignore_patterns("evals"))
    sentence = "- Make sure that the `## Columns` table has a `missing` count per column."
    (parent / "SKILL.md").write_text((parent / "SKILL.md").read_text() + f"\n{sentence}\n")
    child = tmp_path / "child"
    shutil.copytree(parent, child)
    (child / "SKILL.md").write_text((parent / "SKILL.md").read_text().replace(sentence, ""))
    (child / "references" / "columns.md").write_text(f"# Columns\n\n{sentence}\n")
    assert copied.restated(parent, child, WORDING) == []
    quarter = tmp_path / "quarter"
    shutil.copytree(parent, quarter)
    (quarter / "SKILL.md").write_text((parent / "SKILL.md").read_text() + "\n- Q1: Jan-Mar.\n")
    assert copied.restated(parent, quarter, WORDING) == []
