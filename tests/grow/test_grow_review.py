"""Candidate evals on the review page, in a real headless Chromium: the user edits, accepts and rejects
them beside the run; evals.json grows, `validate` passes, and the next run uses the new evals."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from inprocess import cli as run_cli
from sessionfiles import Session

from optimizer.report import server
from optimizer.schemas import EvalsFileRaw

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "fixtures" / "csv-report"
CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SECRET = "sk-ant-api03-ReviewPagePlantedSecret0123456789"


def skill_with_candidates(tmp_path: Path, cli) -> Path:
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    projects = tmp_path / "projects"
    for day, task in (
        (20, "Profile the stock levels for purchasing, short please"),
        (21, f"Write a markdown summary of the returns data; my key is {SECRET}"),
        (22, "Give me a one-page overview of the survey answers"),
    ):
        project = tmp_path / f"p{day}"
        project.mkdir()
        s = (
            Session(project, start=f"2026-11-{day}T09:00:00.000Z")
            .user(task)
            .skill("csv-report", skill)
        )
        s.say("Done.").user("Wrong: put the row count first").write(projects)
    assert cli("evals", "mine", skill, "--from", projects, "--since", "3650d").exit_code == 0
    return skill


def point_run_at(run_dir: Path, skill: Path) -> None:
    """The simulated run was started from the example; its review must write to our copy."""
    with sqlite3.connect(run_dir / "state.db") as db:
        db.execute("update runs set skill_dir = ?", [str(skill)])


@pytest.mark.slow
def test_the_review_api_accepts_edits_and_rejects(simulated, tmp_path, cli) -> None:
    skill = skill_with_candidates(tmp_path, cli)
    point_run_at(simulated, skill)
    srv, _ = server.serve_in_thread(simulated)
    try:
        listing = srv.candidates()
        assert listing["available"] and len(listing["candidates"]) == 3
        first, second, _ = (c["id"] for c in listing["candidates"])
        after = srv.candidates(
            "accept",
            {
                "id": first,
                "eval": {
                    "prompt": "Profile evals/files/inventory.csv",
                    "files": ["evals/files/inventory.csv"],
                },
            },
        )
        srv.candidates("reject", {"id": second})
        with pytest.raises(ValueError):
            srv.candidates("accept", {"id": first, "eval": {"status": "accepted"}})
    finally:
        srv.shutdown()
        srv.server_close()
    states = {c["id"]: c["status"] for c in after["candidates"]}
    assert states[first] == "accepted"
    data = json.loads((skill / "evals" / "evals.json").read_text())
    assert (
        data["evals"][-1]["prompt"] == "Profile evals/files/inventory.csv"
        and data["evals"][-1]["id"] == 6
    )
    # The run folder itself is untouched: its inputs and split are those it started with.
    assert (
        len(json.loads((simulated / "inputs" / "evals" / "evals.json").read_text())["evals"]) == 5
    )


browser_only = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
)


@pytest.mark.slow
@browser_only
def test_accepting_candidates_in_chromium_grows_the_evals_the_next_run_uses(
    simulated, tmp_path, cli, monkeypatch
) -> None:
    playwright_api = pytest.importorskip("playwright.sync_api")
    expect = playwright_api.expect
    skill = skill_with_candidates(tmp_path, cli)
    point_run_at(simulated, skill)
    srv, port = server.serve_in_thread(simulated)
    problems: list[str] = []
    try:
        with playwright_api.sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            tab = chromium.new_page()
            tab.on("pageerror", lambda e: problems.append(str(e)))
            tab.set_default_timeout(15_000)
            tab.goto(f"http://127.0.0.1:{port}/#/evals")
            expect(tab.locator("body[data-ready]")).to_have_count(1)
            cards = tab.locator('.candidate[data-status="pending"]')
            expect(cards).to_have_count(3)
            assert SECRET not in tab.content()
            expect(cards.nth(0)).not_to_contain_text("null")  # no missing value printed as text
            expect(tab.locator("#power")).to_contain_text("gain is found")
            # Edit the first card's prompt, then accept it; accept the second as drafted.
            first = cards.nth(0)
            first.locator("textarea.cand-prompt").fill("Profile the stock levels in a short report")
            first.locator('button[data-action="accept"]').click()
            expect(tab.locator('.candidate[data-status="accepted"]')).to_have_count(1)
            tab.locator('.candidate[data-status="pending"]').nth(0).locator(
                'button[data-action="accept"]'
            ).click()
            expect(tab.locator('.candidate[data-status="accepted"]')).to_have_count(2)
            tab.locator('.candidate[data-status="pending"] button[data-action="reject"]').click()
            expect(tab.locator('.candidate[data-status="rejected"]')).to_have_count(1)
            expect(tab.locator("#candidates-power")).not_to_contain_text("pending")
            chromium.close()
    finally:
        srv.shutdown()
        srv.server_close()
    assert problems == []
    data = json.loads((skill / "evals" / "evals.json").read_text())
    EvalsFileRaw.model_validate(data)  # the skill-creator format (seed 004 here) reads it
    assert [e["id"] for e in data["evals"]] == [1, 2, 3, 4, 5, 6, 7]
    assert data["evals"][5]["prompt"] == "Profile the stock levels in a short report"
    assert cli("validate", skill).exit_code == 0
    assert cli("check-artifact", skill / "evals" / "evals.json", "--kind", "evals").exit_code == 0

    # The next run holds the grown evals: its inputs, its split and its requests.
    run_dir = tmp_path / "next"
    from inprocess import Recording

    from optimizer.sim import Simulator

    sim = Recording()
    run_cli(
        monkeypatch,
        sim,
        "run",
        str(skill),
        "--run-dir",
        str(run_dir),
        "--provider",
        "sim",
        "--max-iterations",
        "0",
        "--set",
        "evals.runs_per_eval=1",
        "--set",
        "evals.baseline_comparison=false",
    )
    with sqlite3.connect(run_dir / "state.db") as db:
        split = json.loads(db.execute("select split_json from runs").fetchone()[0])
    assert sorted(split["train"] + split["test"]) == [1, 2, 3, 4, 5, 6, 7]
    assert any("Profile the stock levels in a short report" in body for _, _, body in sim.requests)
    assert isinstance(sim, Simulator)


def test_status_and_resume_say_what_the_new_evals_buy_without_changing_the_run(
    simulated, tmp_path, cli
) -> None:
    skill = skill_with_candidates(tmp_path, cli)
    point_run_at(simulated, skill)
    with sqlite3.connect(simulated / "state.db") as db:
        split_before = db.execute("select split_json from runs").fetchone()[0]
    info = json.loads(cli("status", simulated, "--json").output)
    # 4 train evals in the run; 3 pending candidates could make it up to 7 on the next run.
    assert info["power"]["train"] == 4 and info["power"]["next_train"] > 4
    assert "pending candidates" in info["power"]["line"]
    assert cli("evals", "accept", skill, "--all").exit_code == 0
    shown = cli("status", simulated).output
    assert "power" in shown and "on the next run" in shown and "pending" not in shown
    resumed = cli("resume", simulated)
    assert resumed.exit_code == 0, resumed.output
    assert (
        "a running run's split never changes" in resumed.output
        and f"--from {simulated}" in resumed.output
    )
    with sqlite3.connect(simulated / "state.db") as db:
        assert db.execute("select split_json from runs").fetchone()[0] == split_before
    assert (
        len(json.loads((simulated / "inputs" / "evals" / "evals.json").read_text())["evals"]) == 5
    )


def test_the_report_carries_the_power_line(simulated, tmp_path, cli) -> None:
    from optimizer.report import html

    skill = skill_with_candidates(tmp_path, cli)
    point_run_at(simulated, skill)
    data = html.build(simulated)
    assert data["power"]["train"] == 4 and data["power"]["next_train"] >= 4
    assert "gain is found" in data["power"]["line"]
    page = html.write_report(simulated, None).read_text()
    assert "gain is found" in page and 'id: "power"' in page
