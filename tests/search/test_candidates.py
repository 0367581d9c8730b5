"""One bad candidate is a rejection with its reason, never a crash of the run or of its resume;
near-misses a careful editor would forgive (line endings, a final newline) are applied."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
from inprocess import EXAMPLE, Recording, cli

from optimizer.inputs import skill as skills
from optimizer.schemas import ProposalAnswer, reason_of
from optimizer.search.edits import apply_edits, replace_once
from optimizer.search.proposal import Rejected

SKILL_MD = EXAMPLE / "SKILL.md"


@pytest.mark.parametrize(
    ("text", "old", "new", "expected"),
    [
        ("a\nb\nc", "b\n", "B\n", "a\nB\nc"),
        ("a\nb", "b\n", "b\nc\n", "a\nb\nc\n"),  # the file lacks the final newline the anchor has
        ("a\r\nb\r\nc\r\n", "b\n", "B\n", "a\r\nB\r\nc\r\n"),  # CRLF file, LF anchor
        ("a  \n", "a  \n", "z\n", "z\n"),
    ],
)
def test_safe_near_misses_are_applied(text, old, new, expected):
    assert replace_once(text, old, new) == (expected, None)


@pytest.mark.parametrize(
    ("old", "says", "reason"),
    [
        ("", "'old' is empty", "old text empty"),
        ("- x", "occurs 2 times", "old text not unique"),
        (
            "- Always end with a summray",
            "line 3: '- Always end with a summary'",
            "old text not found",
        ),
    ],
)
def test_unsafe_replaces_are_refused_with_what_to_fix(old, says, reason):
    text = "# T\n- x\n- Always end with a summary\n- x\n"
    out, problem = replace_once(text, old, "new")
    assert out == text and says in problem and reason_of(problem) == reason


def answer(*edits: dict, summary: str = "a change") -> ProposalAnswer:
    return ProposalAnswer(summary=summary, rationale="because", edits=list(edits))


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            {"path": "evals/evals.json", "action": "write", "content": "{}"},
            "outside the skill folder",
        ),
        ({"path": "../outside.md", "action": "write", "content": "x"}, "outside the skill folder"),
        ({"path": "/etc/passwd", "action": "write", "content": "x"}, "outside the skill folder"),
        ({"path": "SKILL.md", "action": "write", "content": "no front matter\n"}, "SKILL.md rules"),
        (
            {
                "path": "SKILL.md",
                "action": "replace",
                "old": "name: csv-report",
                "new": "name: other",
            },
            "name changed",
        ),
        ({"path": "SKILL.md", "action": "delete"}, "SKILL.md deleted"),
        ({"path": "missing.md", "action": "replace", "old": "a", "new": "b"}, "file edit failed"),
    ],
)
def test_bad_edits_are_problems_with_a_counted_reason(tmp_path, edit, reason):
    parent = tmp_path / "parent"
    skills.snapshot(EXAMPLE, parent)
    problems = apply_edits(parent, tmp_path / "dest", answer(edit), target="body")
    assert problems and reason in Rejected(problems).reasons, problems
    assert not (tmp_path / "outside.md").exists()


def test_size_limits_bound_what_a_proposal_writes_and_the_skills_large_files_are_carried(tmp_path):
    """A skill that ships a 124 KB PDF had every proposal refused as "too large": the limits bound
    the files a proposal writes; a large or binary file it does not touch goes on as it is, and
    `validate` says so."""
    from optimizer.config import Settings
    from optimizer.inputs import validate as validation

    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    (skill / "themes.pdf").write_bytes(b"%PDF-1.4\n\0" + bytes(range(256)) * 484)  # 124 KB
    (skill / "references" / "big.md").write_text("a line of the manual\n" * 6_000)  # 126,000
    parent = tmp_path / "parent"
    skills.snapshot(skill, parent)
    grown = (parent / "SKILL.md").read_text() + "\nMore.\n"
    edit = {"path": "SKILL.md", "action": "write", "content": grown}
    assert apply_edits(parent, tmp_path / "dest", answer(edit), target="body") == []
    assert (tmp_path / "dest" / "themes.pdf").read_bytes() == (skill / "themes.pdf").read_bytes()
    large = {"path": "notes.md", "action": "write", "content": "x" * 100_001}
    problems = apply_edits(parent, tmp_path / "dest", answer(large), target="body")
    assert problems == ["'notes.md' is 100,001 characters; keep each file under 100,000."]
    said = validation.render(validation.run(skill, None, Settings()))
    assert (
        "as is: references/big.md, 126 KB (over the 100,000 characters a proposal writes)" in said
    )
    assert "themes.pdf, 124 KB (binary)" in said


RUN = (
    "--provider",
    "sim",
    "--max-iterations",
    "1",
    "--set",
    "loop.proposals_per_iteration=1",
    "--set",
    "evals.runs_per_eval=1",
    # The guarded rule: a child that changes nothing (a heading's plural) does not step on noise,
    # so the resumed iteration starts from the same parent and meets the same proposal again.
    "--set",
    "selection.step=guarded",
)


def outcomes(run_dir) -> list[dict]:
    """The first candidate's outcome of each iteration, in iteration order."""
    conn = sqlite3.connect(run_dir / "state.db")
    try:
        rows = conn.execute("select candidates_json from iterations order by number").fetchall()
    finally:
        conn.close()
    return [json.loads(c)["0"] for (c,) in rows]


def outcome(run_dir) -> dict:
    conn = sqlite3.connect(run_dir / "state.db")
    try:
        return json.loads(conn.execute("select candidates_json from iterations").fetchone()[0])["0"]
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("proposal", "expected"),
    [
        (
            {
                "summary": " ",
                "rationale": "",
                "edits": [
                    {
                        "path": "SKILL.md",
                        "action": "replace",
                        "old": "# CSV report",
                        "new": "# CSV reports",
                    }
                ],
            },
            {"label": "v1", "summary": "edits SKILL.md"},
        ),
        (
            {
                "summary": "x",
                "rationale": "y",
                "edits": [
                    {"path": "SKILL.md", "action": "replace", "old": "", "new": "prepended\n"}
                ],
            },
            {"reasons": ["old text empty"]},
        ),
        (
            {
                "summary": "x",
                "rationale": "y",
                "edits": [{"path": "evals/evals.json", "action": "write", "content": "[]"}],
            },
            {"reasons": ["outside the skill folder"]},
        ),
        (
            {
                "summary": "x",
                "rationale": "y",
                "edits": [
                    {
                        "path": "SKILL.md",
                        "action": "write",
                        "content": "---\nname: csv-report\n---\n",
                    }
                ],
            },
            {"reasons": ["SKILL.md rules"]},
        ),
    ],
    ids=["blank-summary", "empty-old", "edits-evals", "broken-front-matter"],
)
def test_a_bad_candidate_is_recorded_and_the_run_and_its_resume_go_on(
    tmp_path, monkeypatch, proposal, expected
):
    run_dir = tmp_path / "run"
    sim = Recording(proposal=proposal)
    cli(monkeypatch, sim, "run", str(EXAMPLE), "--run-dir", str(run_dir), *RUN)
    first = outcome(run_dir)
    if "summary" in expected:  # a blank summary is no reason to lose the proposal
        expected = dict(expected)
        summary = expected.pop("summary")
        assert (
            json.loads((run_dir / "history.json").read_text())["iterations"][1]["summary"]
            == summary
        )
    assert {k: first.get(k) for k in expected} == expected, first
    cli(monkeypatch, sim, "resume", str(run_dir), "--max-iterations", "2")
    first_again, second = outcomes(run_dir)
    assert first_again == first  # the resume keeps the first iteration's record as it was
    # The same proposal in the resumed iteration meets the same fate: the same rejection, or,
    # for the one that was applied, a duplicate of the version it made.
    if "reasons" in expected:
        assert second.get("reasons") == expected["reasons"], second
    else:
        assert second == {"duplicate": expected["label"]}, second


@pytest.mark.slow
def test_a_failure_of_ours_inside_one_candidate_is_its_rejection(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"

    def broken(*_args, **_kw):
        raise RuntimeError("the diff of an odd file failed")

    monkeypatch.setattr(skills, "unified_diff", broken)
    cli(monkeypatch, Recording(), "run", str(EXAMPLE), "--run-dir", str(run_dir), *RUN)
    got = outcome(run_dir)
    assert got["reasons"] == ["internal error"] and "odd file" in got["rejected"][0]


@pytest.mark.slow
def test_a_skill_without_a_final_newline_takes_the_proposers_edits(tmp_path, monkeypatch):
    """Real skills often end without a newline; the proposer's anchors usually carry one."""
    skill, run_dir = tmp_path / "skill", tmp_path / "run"
    shutil.copytree(EXAMPLE, skill)
    (skill / "SKILL.md").write_text(SKILL_MD.read_text().rstrip("\n"))
    cli(
        monkeypatch,
        Recording(),
        "run",
        str(skill),
        "--run-dir",
        str(run_dir),
        "--provider",
        "sim",
        "--max-iterations",
        "2",
        "--set",
        "evals.runs_per_eval=1",
        # Every proposal is made, whatever wins: the edits, not the decisions, are under test.
        "--set",
        "loop.judge_proposals=all",
    )
    conn = sqlite3.connect(run_dir / "state.db")
    made = [
        o
        for (c,) in conn.execute("select candidates_json from iterations")
        for o in json.loads(c).values()
    ]
    conn.close()
    assert len(made) == 4 and not [o for o in made if "rejected" in o], made


@pytest.mark.slow
def test_rejections_are_counted_by_reason_in_status_lineage_and_the_report(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    bad = {
        "summary": "x",
        "rationale": "y",
        "edits": [{"path": "SKILL.md", "action": "replace", "old": "no such text", "new": "z"}],
    }
    cli(
        monkeypatch,
        Recording(proposal=bad),
        "run",
        str(EXAMPLE),
        "--run-dir",
        str(run_dir),
        "--provider",
        "sim",
        "--max-iterations",
        "2",
        "--set",
        "evals.runs_per_eval=1",
    )
    expected = "4 proposals: 0 versions, 0 duplicates, 4 rejected (old text not found 4)"
    for command in ("status", "lineage"):  # rich wraps long lines: compare the words
        printed = cli(monkeypatch, None, command, str(run_dir))
        assert expected in " ".join(printed.split()), printed
    status = json.loads(cli(monkeypatch, None, "status", str(run_dir), "--json"))
    assert status["proposals"]["reasons"] == {"old text not found": 4}
    # Not only in the JSON log: status and the summary say that nothing could be tried.
    refused = "every proposal was refused (4 of 4), so no version was made; the first: replace in"
    assert any(w.startswith(refused) for w in status["warnings"]), status["warnings"]
    assert refused in (run_dir / "summary.md").read_text()
    cli(monkeypatch, None, "report", str(run_dir), "-o", str(tmp_path / "report.html"))
    assert '"reasons":{"old text not found":4}' in (tmp_path / "report.html").read_text()
