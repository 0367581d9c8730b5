"""`optimizer evals mine / accept / reject` on hand-made session files in the CLI's format: the task
becomes the prompt, small inputs are copied, corrections become expectations, secrets go nowhere,
and accepting grows evals.json in its own dialect without moving an existing eval's split."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sessionfiles import Session

from optimizer.config import Settings
from optimizer.decide import power
from optimizer.inputs import placement
from optimizer.inputs.evals import load_evals, split
from optimizer.schemas import CandidatesFile, EvalsFileRaw

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "fixtures" / "csv-report"
SECRETS = (
    "sk-ant-api03-PlantedSecretKey0123456789abcdef",
    "ghp_PLANTEDplantedPLANTEDplanted012345",
    "AKIAPLANTEDSECRET123",
    "hunter2-planted-pw",
)


@pytest.fixture
def world(tmp_path: Path):
    """A copy of the example skill, and a project folder the user worked in, with a data file."""
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "orders.csv").write_text(
        f"id,amount,note\n1,10,ok\n2,12,token={SECRETS[1]}\n3,9,fine\n", encoding="utf-8"
    )
    (project / "big.csv").write_text("x\n" + "1\n" * 400_000, encoding="utf-8")
    return skill, project, tmp_path / "projects"


def used_session(
    project: Path, skill_dir: Path, *, start: str = "2026-11-20T09:00:00.000Z"
) -> Session:
    s = Session(project, start=start)
    s.user(
        f"Profile data/orders.csv into outputs/report.md please; the API key is {SECRETS[0]} "
        f"and password={SECRETS[3]}"
    )
    s.skill("csv-report", skill_dir)
    s.tool("Read", {"file_path": str(project / "data" / "orders.csv")}, "id,amount")
    s.tool(
        "Bash", {"command": "python missing.py"}, f"No such file; env had {SECRETS[2]}", error=True
    )
    s.tool("Write", {"file_path": str(project / "outputs" / "report.md"), "content": "# Report"})
    s.say("Done: I wrote outputs/report.md.")
    s.user("No, the amounts should be rounded to two decimals, and add a Notes section")
    return s


def test_mine_drafts_a_candidate_from_a_session(world, cli, log_capture) -> None:
    skill, project, projects = world
    before = (skill / "evals" / "evals.json").read_bytes()
    used_session(project, skill / "..").write(projects)  # the skill's folder as the CLI names it
    Session(project, start="2026-11-21T09:00:00.000Z").user("What is 2+2?").say("4").write(projects)
    result = cli("evals", "mine", skill, "--from", projects, "--since", "3650d")
    assert result.exit_code == 0, result.output
    assert "1 use(s) of the skill in 1 session(s)" in result.output
    data = CandidatesFile.model_validate_json((skill / "evals" / "candidates.json").read_text())
    [cand] = data.candidates
    # The prompt is the user's task, its file pointed at the copy, its secrets masked.
    assert cand.eval.prompt.startswith(
        "Profile evals/files/orders.csv into outputs/report.md please"
    )
    assert cand.eval.files == ["evals/files/orders.csv"]
    copied = (skill / "evals" / "files" / "orders.csv").read_text()
    assert copied.startswith("id,amount,note\n1,10,ok\n") and "[redacted]" in copied
    assert any("rounded to two decimals" in e for e in cand.eval.expectations)
    assert "The run finishes without tool errors" in cand.eval.expectations
    assert cand.signals.corrections and cand.signals.outputs == ["outputs/report.md"]
    assert cand.origin.source == "session" and cand.origin.file.endswith(".jsonl")
    assert cand.origin.time.startswith("2026-11-20") and cand.status == "pending"
    # evals.json is never written by mining; no secret is anywhere we wrote or said.
    assert (skill / "evals" / "evals.json").read_bytes() == before
    written = "".join(
        p.read_text(errors="replace") for p in (skill / "evals").rglob("*") if p.is_file()
    )
    said = result.output + json.dumps(log_capture, default=str)
    for secret in SECRETS:
        assert secret not in written and secret not in said
    assert [e["event"] for e in log_capture] == ["evals.mined"]


def test_mining_twice_adds_nothing_and_reviewed_candidates_stay_reviewed(world, cli) -> None:
    skill, project, projects = world
    used_session(project, skill).write(projects)
    assert cli("evals", "mine", skill, "--from", projects, "--since", "3650d").exit_code == 0
    cid = json.loads((skill / "evals" / "candidates.json").read_text())["candidates"][0]["id"]
    assert cli("evals", "reject", skill, cid).exit_code == 0
    again = cli("evals", "mine", skill, "--from", projects, "--since", "3650d")
    assert "0 new candidate(s), 0 waiting" in again.output
    [cand] = json.loads((skill / "evals" / "candidates.json").read_text())["candidates"]
    assert cand["status"] == "rejected"


def test_only_sessions_that_used_this_skill_and_are_recent_enough(world, cli) -> None:
    skill, project, projects = world
    used_session(project, skill, start="2020-01-01T09:00:00.000Z").write(projects)  # too old
    other = Session(project, start="2026-11-22T09:00:00.000Z").user(
        "Write a memo about data/orders.csv"
    )
    other.tool("Skill", {"skill": "memo-writer"}, "Launching skill: memo-writer").write(projects)
    slash = Session(project, start="2026-11-23T09:00:00.000Z")
    slash.user(
        "<command-message>csv-report is running…</command-message>\n<command-name>/csv-report"
        "</command-name>\n<command-args>summarise big.csv for me</command-args>"
    )
    slash.tool("Read", {"file_path": str(project / "big.csv")}).write(projects)
    result = cli("evals", "mine", skill, "--from", projects, "--since", "2026-11-01")
    assert result.exit_code == 0, result.output
    [cand] = json.loads((skill / "evals" / "candidates.json").read_text())["candidates"]
    # The slash command's arguments are the task; a large input is named, not copied.
    assert cand["eval"]["prompt"] == "summarise big.csv for me" and cand["eval"]["files"] == []
    assert len(cand["files_named"]) == 1 and "big.csv" in cand["files_named"][0]
    assert not (skill / "evals" / "files" / "big.csv").exists()


@pytest.mark.parametrize("dialect", ["expectations", "assertions", "extended"])
def test_accepting_appends_in_the_files_dialect_and_keeps_the_split(tmp_path, cli, dialect) -> None:
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    raw = json.loads((skill / "evals" / "evals.json").read_text())
    evals = []
    for e in raw["evals"]:
        texts = e["expectations"]
        if dialect == "extended":
            evals.append(e)
        elif dialect == "assertions":
            evals.append(
                {
                    "id": e["id"],
                    "prompt": e["prompt"],
                    "files": e["files"],
                    "assertions": [{"id": f"A{i}", "text": t} for i, t in enumerate(texts, 1)],
                }
            )
        else:
            evals.append(
                {"id": e["id"], "prompt": e["prompt"], "files": e["files"], "expectations": texts}
            )
    grown = {"skill_name": "csv-report", "evals": evals}
    if dialect == "extended":
        grown["eval_config"] = raw["eval_config"]
    (skill / "evals" / "evals.json").write_text(json.dumps(grown))
    settings = Settings()
    old = split(
        load_evals(skill), test_fraction=settings.evals.test_fraction, seed=settings.loop.seed
    )
    projects = tmp_path / "projects"
    for day in range(10, 22):  # twelve sessions, twelve different tasks
        project = tmp_path / f"p{day}"
        project.mkdir()
        s = Session(project, start=f"2026-11-{day}T09:00:00.000Z")
        s.user(f"Report on the numbers of week {day} in a short markdown file").skill(
            "csv-report", skill
        )
        s.say("Done.").user(f"keep it under {day * 10} words")
        s.write(projects)
    assert cli("evals", "mine", skill, "--from", projects, "--since", "3650d").exit_code == 0
    result = cli("evals", "accept", skill, "--all")
    assert result.exit_code == 0, result.output
    data = json.loads((skill / "evals" / "evals.json").read_text())
    EvalsFileRaw.model_validate(data)
    assert [e["id"] for e in data["evals"]] == list(range(1, 18))
    added = data["evals"][5:]
    assert all(("assertions" in e) == (dialect == "assertions") for e in added)
    assert all(("name" in e) == (dialect == "extended") for e in added)
    assert cli("validate", skill).exit_code == 0
    new = split(
        load_evals(skill), test_fraction=settings.evals.test_fraction, seed=settings.loop.seed
    )
    assert [i for i in new.train if i <= 5] == old.train and [
        i for i in new.test if i <= 5
    ] == old.test
    # The sealed test grows too, and each added eval sits where its own hash says.
    assert [i for i in new.test if i > 5]
    for e in added:
        side = placement.side(
            e["prompt"], test_fraction=settings.evals.test_fraction, seed=settings.loop.seed
        )
        assert (e["id"] in new.test) == (side == "test")
    accepted = json.loads((skill / "evals" / "candidates.json").read_text())["candidates"]
    assert {c["status"] for c in accepted} == {"accepted"} and {
        c["eval_id"] for c in accepted
    } == set(range(6, 18))


def test_the_placement_of_an_eval_depends_on_its_prompt_only() -> None:
    prompts = [f"task number {i}" for i in range(400)]
    sides = [placement.side(p, test_fraction=0.25, seed=0) for p in prompts]
    assert sides == [placement.side(p, test_fraction=0.25, seed=0) for p in reversed(prompts)][::-1]
    assert 0.18 < sides.count("test") / len(sides) < 0.32
    assert placement.side("a  b\n c", test_fraction=0.25, seed=0) == placement.side(
        "a b c", test_fraction=0.25, seed=0
    )


def test_bad_input_is_one_sentence_and_writes_nothing(world, cli) -> None:
    skill, project, projects = world
    missing = cli("evals", "mine", skill, "--from", projects / "nowhere")
    assert (
        missing.exit_code == 2 and "--from" in missing.output and "Traceback" not in missing.output
    )
    since = cli("evals", "mine", skill, "--from", project, "--since", "last tuesday")
    assert since.exit_code == 2 and "--since 'last tuesday'" in since.output
    assert not (skill / "evals" / "candidates.json").exists()
    unknown = cli("evals", "accept", skill, "c-000000000000")
    assert unknown.exit_code == 2 and "no candidate 'c-000000000000'" in unknown.output
    (skill / "evals" / "candidates.json").write_text("{not json")
    broken = cli("validate", skill)
    assert broken.exit_code == 2 and "candidates.json: not a valid candidates file" in broken.output


def test_an_accept_that_would_break_evals_json_changes_nothing(world, cli) -> None:
    skill, project, projects = world
    used_session(project, skill).write(projects)
    assert cli("evals", "mine", skill, "--from", projects, "--since", "3650d").exit_code == 0
    path = skill / "evals" / "candidates.json"
    data = json.loads(path.read_text())
    data["candidates"][0]["eval"]["files"] = ["evals/files/gone.csv"]
    path.write_text(json.dumps(data))
    before = (skill / "evals" / "evals.json").read_bytes()
    result = cli("evals", "accept", skill, "--all")
    assert result.exit_code == 2 and "gone.csv' does not exist" in result.output
    assert (skill / "evals" / "evals.json").read_bytes() == before
    assert json.loads(path.read_text())["candidates"][0]["status"] == "pending"


def test_review_in_the_terminal_accepts_rejects_and_skips(world, monkeypatch) -> None:
    from typer.testing import CliRunner

    from optimizer.cli import app

    skill, project, projects = world
    for day in (20, 21, 22):
        s = Session(project, start=f"2026-11-{day}T09:00:00.000Z")
        s.user(f"Summarise the orders of day {day}").skill("csv-report", skill).say("Done.")
        s.user("keep it under 80 words").write(projects)
    runner = CliRunner()
    assert (
        runner.invoke(
            app, ["evals", "mine", str(skill), "--from", str(projects), "--since", "3650d"]
        ).exit_code
        == 0
    )
    first = json.loads((skill / "evals" / "candidates.json").read_text())["candidates"][0]["eval"][
        "prompt"
    ]
    # An edit opens $EDITOR; here the "editor" rewrites the prompt.
    monkeypatch.setattr("click.edit", lambda text, **_: text.replace(first, first + ", in euros"))
    done = runner.invoke(app, ["evals", "review", str(skill)], input="e\ny\nr\ns\n")
    assert done.exit_code == 0, done.output
    assert "accepted: added as eval 6 (" in done.output and "rejected" in done.output
    states = [
        c["status"]
        for c in json.loads((skill / "evals" / "candidates.json").read_text())["candidates"]
    ]
    assert states == ["accepted", "rejected", "pending"]
    assert (
        json.loads((skill / "evals" / "evals.json").read_text())["evals"][-1]["prompt"]
        == first + ", in euros"
    )


def test_hidden_files_are_named_never_copied(world, cli) -> None:
    skill, project, projects = world
    (project / ".env").write_text("DATABASE_URL=postgres://u:pw@h/db\n")
    s = (
        Session(project)
        .user("Profile data/orders.csv using the settings in .env")
        .skill("csv-report", skill)
    )
    s.tool("Read", {"file_path": str(project / ".env")}).write(projects)
    assert cli("evals", "mine", skill, "--from", projects, "--since", "3650d").exit_code == 0
    [cand] = json.loads((skill / "evals" / "candidates.json").read_text())["candidates"]
    assert cand["eval"]["files"] == ["evals/files/orders.csv"]
    assert [n for n in cand["files_named"] if ".env" in n and "hidden file" in n]
    assert not (skill / "evals" / "files" / ".env").exists()


def test_validate_says_what_the_pending_candidates_would_buy(world, cli) -> None:
    skill, project, projects = world
    plain = cli("validate", skill).output
    expected = f"with 4 train evals a +0.10 gain is found {power.power_at(4):.0%} of the time"
    assert "power" in plain and expected in plain
    for day in range(10, 16):
        s = Session(project, start=f"2026-11-{day}T09:00:00.000Z")
        s.user(f"Profile the readings of day {day}").skill("csv-report", skill).write(projects)
    assert cli("evals", "mine", skill, "--from", projects, "--since", "3650d").exit_code == 0
    grown = cli("validate", skill).output
    later = [line for line in grown.splitlines() if line.startswith("power")][0]
    assert "with 4 train evals" in later and "once the pending candidates" in later
    n = int(later.split("; with ")[1].split(",")[0])
    assert 4 < n <= 10  # the six candidates that its hash puts in train


def test_accepting_into_a_broken_evals_json_is_bad_input(world, cli) -> None:
    skill, project, projects = world
    used_session(project, skill).write(projects)
    assert cli("evals", "mine", skill, "--from", projects, "--since", "3650d").exit_code == 0
    (skill / "evals" / "evals.json").write_text('{"skill_name": "csv-report", "evals": [')
    result = cli("evals", "accept", skill, "--all")
    assert result.exit_code == 2 and "evals.json: not valid JSON" in result.output
    assert "Traceback" not in result.output
    assert (
        json.loads((skill / "evals" / "candidates.json").read_text())["candidates"][0]["status"]
        == "pending"
    )


def test_with_a_provider_only_new_drafts_are_sent_and_only_redacted(
    world, monkeypatch, tmp_path
) -> None:
    from inprocess import Recording
    from inprocess import cli as run_cli

    skill, project, projects = world
    monkeypatch.chdir(tmp_path)
    used_session(project, skill).write(projects)
    sim = Recording(seed=0)
    args = (
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
    run_cli(monkeypatch, sim, *args)
    sent = [body for _, _, body in sim.requests if "submit_eval_drafts" in body]
    assert len(sent) == 1 and "rounded to two decimals" in sent[0]
    assert not any(secret in body for secret in SECRETS for _, _, body in sim.requests)
    Session(project, start="2026-11-24T09:00:00.000Z").user("Chart data/orders.csv").skill(
        "csv-report", skill
    ).write(projects)
    run_cli(monkeypatch, sim, *args)
    second = [body for _, _, body in sim.requests if "submit_eval_drafts" in body][1:]
    assert len(second) == 1 and "Chart evals/files/orders.csv" in second[0]
    assert "rounded to two decimals" not in second[0]  # the first draft is not sent again


def test_a_follow_up_that_asks_for_a_change_becomes_a_check_with_its_number(world, cli) -> None:
    skill, project, projects = world
    s = Session(project).user("Summarise data/orders.csv for the team").skill("csv-report", skill)
    s.say("Here is the summary: ...").user("keep it under 80 words").write(projects)
    assert cli("evals", "mine", skill, "--from", projects, "--since", "3650d").exit_code == 0
    [cand] = CandidatesFile.model_validate_json(
        (skill / "evals" / "candidates.json").read_text()
    ).candidates
    assert cand.signals.corrections == ["keep it under 80 words"]
    assert cand.eval.expectations == ["The answer is at most 80 words"]


def test_an_expectation_no_output_could_fail_is_never_written(world, cli) -> None:
    skill, project, projects = world
    Session(project).user("Summarise the orders of today").skill("csv-report", skill).write(
        projects
    )
    assert cli("evals", "mine", skill, "--from", projects, "--since", "3650d").exit_code == 0
    [cand] = CandidatesFile.model_validate_json(
        (skill / "evals" / "candidates.json").read_text()
    ).candidates
    # Nothing in the session says what a wrong answer looks like: no check is made up.
    assert cand.eval.expectations == []
    before = (skill / "evals" / "evals.json").read_bytes()
    shown = cli("evals", "accept", skill, "--all")
    assert shown.exit_code == 0 and f"{cand.id}: left pending, it has no expectation yet" in (
        shown.output
    )
    named = cli("evals", "accept", skill, cand.id)
    assert named.exit_code == 2 and "has no expectation yet" in named.output
    assert "Traceback" not in named.output
    assert (skill / "evals" / "evals.json").read_bytes() == before


def test_a_follow_up_that_invokes_the_skill_again_is_still_a_correction(world, cli) -> None:
    skill, project, projects = world
    s = Session(project).user("Summarise data/orders.csv for the team").skill("csv-report", skill)
    s.say("Here is the summary: ...").user("keep it under 80 words")
    s.skill("csv-report", skill).say("Shorter now.").write(projects)
    result = cli("evals", "mine", skill, "--from", projects, "--since", "3650d")
    assert "1 use(s) of the skill in 1 session(s)" in result.output
    [cand] = CandidatesFile.model_validate_json(
        (skill / "evals" / "candidates.json").read_text()
    ).candidates
    assert cand.eval.prompt.startswith("Summarise evals/files/orders.csv")
    assert cand.eval.expectations == ["The answer is at most 80 words"]


def test_a_change_typed_before_the_skill_ran_is_part_of_its_task(world, cli) -> None:
    skill, project, projects = world
    s = Session(project).user("Summarise data/orders.csv for the team")
    s.say("Which columns matter most?").user("keep it under 10 lines")
    s.skill("csv-report", skill).say("Here is the summary: ...").write(projects)
    assert cli("evals", "mine", skill, "--from", projects, "--since", "3650d").exit_code == 0
    [cand] = CandidatesFile.model_validate_json(
        (skill / "evals" / "candidates.json").read_text()
    ).candidates
    assert cand.eval.prompt == (
        "Summarise evals/files/orders.csv for the team\n\nkeep it under 10 lines"
    )
    assert cand.eval.expectations == ["The answer is at most 10 lines"]


JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


@pytest.mark.parametrize("provider", [(), ("--provider", "sim")])
def test_no_expectation_is_built_around_a_masked_value(
    world, cli, monkeypatch, tmp_path, provider
) -> None:
    skill, project, projects = world
    monkeypatch.chdir(tmp_path)
    s = Session(project).user("Summarise data/orders.csv for the team").skill("csv-report", skill)
    s.say("Here is the summary: ...")
    s.user(f"no, use a JWT for the upload: Authorization: Bearer {JWT}")
    s.user("keep it under 10 lines").write(projects)
    mined = cli("evals", "mine", skill, "--from", projects, "--since", "3650d", *provider)
    assert mined.exit_code == 0, mined.output
    [cand] = CandidatesFile.model_validate_json(
        (skill / "evals" / "candidates.json").read_text()
    ).candidates
    assert "[redacted]" in cand.signals.corrections[0] and JWT[:20] not in cand.model_dump_json()
    assert not [e for e in cand.eval.expectations if "[redacted]" in e]
    assert "The answer is at most 10 lines" in cand.eval.expectations
    if not provider:
        assert "The answer uses a JWT for the upload" in cand.eval.expectations


def test_a_limit_the_user_stated_stays_when_the_drafting_model_leaves_it_out(
    world, monkeypatch
) -> None:
    import asyncio

    from optimizer.grow import draft, drafting, mine

    skill, project, projects = world
    s = Session(project).user("Summarise data/orders.csv for the team").skill("csv-report", skill)
    s.say("Here is the summary: ...").user("keep it under 10 lines").write(projects)
    [use] = mine.followed_up(mine.sessions.mine(projects, "csv-report", None))
    heuristic = draft.candidate(skill, use)
    said = drafting.DraftAnswer(
        drafts=[
            drafting.Drafted(
                id=heuristic.id,
                expected_output="A short summary.",
                expectations=["The answer names the largest order", "Authorization: [redacted]"],
            )
        ]
    )

    async def answered(*_args, **_kwargs):
        return said

    monkeypatch.setattr(drafting, "ask_once", answered)
    [got] = asyncio.run(drafting._ask(None, Settings(), "csv-report", "", [heuristic]))
    assert got.eval.expectations == [
        "The answer names the largest order",
        "The answer is at most 10 lines",
    ]
