"""The small parts of growing the evals on their own: the redaction of key shapes, the power table,
and reading session files that are damaged, nested or written by subagents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sessionfiles import Session

from optimizer.decide import power
from optimizer.inputs import redact, sessions

SHAPES = [
    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "glpat-abcdefghijklmnopqrst",
    "xoxb-123456789012-abcdefghijkl",
    "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "sk_live_abcdefghijklmnop1234",
    "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "hf_abcdefghijklmnopqrstuvwxyz0123456",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


@pytest.mark.parametrize("secret", SHAPES)
def test_every_key_shape_is_masked_in_text(secret: str) -> None:
    masked = redact.text(f"use {secret} for the upload")
    assert secret not in masked and "[redacted]" in masked and masked.startswith("use ")


@pytest.mark.parametrize(
    ("given", "kept", "gone"),
    [
        ("password=hunter2xyz and more", "password=", "hunter2xyz"),
        ('{"api_key": "abc123def456"}', '"api_key": "', "abc123def456"),
        ("DB_PASSWORD: s3cretvalue", "DB_PASSWORD: ", "s3cretvalue"),
        ("https://alice:opensesame@example.com/x", "https://alice:", "opensesame"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "", "MIIEow"),
    ],
)
def test_assigned_credentials_lose_their_value_only(given: str, kept: str, gone: str) -> None:
    masked = redact.text(given)
    assert gone not in masked and kept in masked


def test_ordinary_text_is_left_alone() -> None:
    text = "Write outputs/report.md with a token count column; the key finding is sales rose 12%."
    assert redact.text(text) == text and not redact.holds_secret(text)
    assert redact.deep({"a": [text, 3]}) == {"a": [text, 3]}


def test_power_interpolates_between_measured_counts_and_clamps_outside() -> None:
    table = power.table()["scope"]["general"]
    assert (
        power.power_at(3, "general") == table["3"] and power.power_at(10, "general") == table["10"]
    )
    assert (
        power.power_at(1, "general") == table["3"] and power.power_at(500, "general") == table["50"]
    )
    assert table["3"] < power.power_at(4, "general") < table["5"]
    assert power.power_at(4, "general") == pytest.approx((table["3"] + table["5"]) / 2)
    tasks = power.table()["scope"]["tasks"]
    assert power.power_at(7, "tasks") == pytest.approx(
        tasks["5"] + (tasks["8"] - tasks["5"]) * 2 / 3
    )


def test_the_power_line_follows_the_claim_each_count_makes() -> None:
    """Below selection.few_evals a run claims "better on these tasks", from there "in general":
    the advice quotes the power of the claim the run would make at each count."""
    tasks, general = power.table()["scope"]["tasks"], power.table()["scope"]["general"]
    assert power.power_at(3) == tasks["3"] and power.power_at(20) == general["20"]
    assert power.line(3, 20) == (
        f"with 3 train evals a +0.10 gain is found {tasks['3']:.0%} of the "
        f"time (better on these tasks); with 20, {general['20']:.0%} of the "
        f"time (better in general), a stronger claim than with 3 (better on these tasks at 20: "
        f"{tasks['20']:.0%})"
    )
    assert power.power_at(3, few_evals=2) == general["3"]


def test_damaged_lines_sidechains_and_subagent_files_are_no_uses(tmp_path: Path) -> None:
    project = tmp_path / "p"
    s = Session(project).user("Profile the sales file").skill("csv-report", tmp_path / "csv-report")
    path = s.write(tmp_path / "projects")
    with path.open("a") as handle:
        handle.write('{"type": "user", "message": {"content": "cut sho')  # a write cut short
        handle.write(
            "\n"
            + json.dumps(
                {
                    "type": "user",
                    "isSidechain": True,
                    "sessionId": s.id,
                    "message": {"role": "user", "content": "a subagent's prompt"},
                }
            )
            + "\n"
        )
    sub = path.with_suffix("") / "subagents"
    sub.mkdir(parents=True)
    Session(project).user("agent task").skill("csv-report", tmp_path).write(sub)
    found = sessions.mine(tmp_path / "projects", "csv-report", None)
    assert [(u.task, u.later) for u in found] == [("Profile the sales file", [])]


def test_a_malformed_block_is_passed_over_not_a_crash(tmp_path: Path) -> None:
    """A session file is another program's: a Skill call whose input is no object, or a text
    block whose text is no string, is skipped like any damaged line, and the uses around it stay."""
    s = (
        Session(tmp_path)
        .user("Profile the sales file")
        .skill("csv-report", tmp_path / "csv-report")
    )
    s.tool("Skill", "csv-report")  # type: ignore[arg-type]  # an input that is no object
    s.lines.append(
        {**s.lines[-1], "message": {"role": "user", "content": [{"type": "text", "text": 42}]}}
    )
    found = sessions.mine(s.write(tmp_path / "projects").parents[1], "csv-report", None)
    assert [u.task for u in found] == ["Profile the sales file"]


def test_a_second_request_after_the_answer_is_a_second_use(tmp_path: Path) -> None:
    s = (
        Session(tmp_path)
        .user("Report on a.csv")
        .skill("csv-report", tmp_path / "csv-report")
        .say("Done.")
    )
    s.user("Thanks. Now report on b.csv").skill("csv-report", tmp_path / "csv-report").say("Done.")
    s.user("That is wrong: the mean is missing")
    uses = sessions.uses(s.write(tmp_path / "projects"), "csv-report")
    assert [(u.task, u.later) for u in uses] == [
        ("Report on a.csv", []),
        ("Thanks. Now report on b.csv", ["That is wrong: the mean is missing"]),
    ]
