"""Layer-1 structural checks: every type passing and failing, globs, harness files, the boundary of
outputs/, transcripts, custom scripts in the sandbox, and the evidence a reader sees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tiers
from pydantic import TypeAdapter

from optimizer import schemas as s
from optimizer.errors import BadInput, InfraFailure
from optimizer.grade.outputs import matching
from optimizer.grade.structural import CheckTimedOut, check_run
from optimizer.grade.tool_errors import transcript_errors
from optimizer.inputs.evals import Eval, load_evals
from optimizer.sandbox import SandboxPolicy, bwrap_available

_EXP = TypeAdapter(s.StructuralExpectation)


def exp(**fields) -> object:
    fields.setdefault("id", "S1")
    fields.setdefault("description", f"check {fields['type']}")
    return _EXP.validate_python(fields)


def run(
    tmp_path: Path, files: dict[str, str | bytes], transcript: list[dict] | None = None
) -> Path:
    run_dir = tmp_path / "run-1"
    (run_dir / "outputs").mkdir(parents=True)
    for rel, content in files.items():
        path = run_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    if transcript is not None:
        (run_dir / "transcript.jsonl").write_text("".join(json.dumps(x) + "\n" for x in transcript))
    return run_dir


def check(run_dir: Path, *exps, **kw) -> s.Structural:
    ev = Eval(id=1, name="e", prompt="p", structural=list(exps))
    result = check_run(
        ev, run_dir, SandboxPolicy(mode="none", timeout_s=10), configuration="with_skill", **kw
    )
    # every result validates as what the caller writes
    s.Structural.model_validate(result.model_dump(mode="json"))
    return result


def one(run_dir: Path, **fields) -> s.StructuralResult:
    return check(run_dir, exp(**fields)).expectations[0]


REPORT = "# Report\n\nRows: 12\nmean 8.5\n\n## Columns\n| a | b |\n"


# --- file_exists and globs ---------------------------------------------------------------------


def test_file_exists_pass_and_fail(tmp_path):
    r = run(tmp_path, {"outputs/report.md": REPORT})
    ok = one(r, type="file_exists", pattern="report.md")
    assert ok.passed and ok.evidence == "Found: report.md"
    bad = one(r, type="file_exists", pattern="*.csv")
    assert not bad.passed
    assert "No file under outputs/ matches '*.csv'" in bad.evidence and "report.md" in bad.evidence


def test_basename_pattern_matches_at_any_depth(tmp_path):
    r = run(tmp_path, {"outputs/sub/deep/report.md": REPORT})
    assert one(r, type="file_exists", pattern="report.md").passed
    assert one(r, type="file_exists", pattern="*.md").evidence == "Found: sub/deep/report.md"


def test_path_patterns_and_double_star(tmp_path):
    r = run(tmp_path, {"outputs/a.md": "x", "outputs/sub/b.md": "x", "outputs/sub/deep/c.md": "x"})
    assert matching(r, "**/*.md") == ["a.md", "sub/b.md", "sub/deep/c.md"]
    assert matching(r, "sub/*.md") == ["sub/b.md"]  # one * stays in one folder
    assert matching(r, "sub/**/*.md") == ["sub/b.md", "sub/deep/c.md"]
    assert matching(r, "outputs/sub/b.md") == ["sub/b.md"]  # a leading outputs/ is accepted
    assert matching(r, "./a.md") == ["a.md"]
    assert matching(r, "sub/[bc].md") == ["sub/b.md"]


def test_harness_files_are_skipped(tmp_path):
    r = run(tmp_path, {"outputs/metrics.json": "{}", "outputs/user_notes.md": "Error: none"})
    assert not one(r, type="file_exists", pattern="*.json").passed
    assert not one(r, type="file_exists", pattern="user_notes.md").passed
    assert one(r, type="file_count", pattern="*", count=0).passed


def test_nothing_outside_outputs_is_matched(tmp_path):
    r = run(tmp_path, {"outputs/report.md": "inside", "secret.md": "outside"})
    (tmp_path / "elsewhere.md").write_text("outside")
    (r / "outputs" / "link.md").symlink_to(tmp_path / "elsewhere.md")
    assert matching(r, "*.md") == ["report.md"]
    assert matching(r, "../secret.md") == []
    assert matching(r, "/secret.md") == []
    assert not one(r, type="file_contains", pattern="*.md", match="outside").passed


# --- file_contains ------------------------------------------------------------------------------


def test_file_contains_match_with_line_evidence(tmp_path):
    r = run(tmp_path, {"outputs/report.md": REPORT})
    res = one(r, type="file_contains", pattern="report.md", match="mean 8.5")
    assert res.passed
    assert res.evidence == "Found 'mean 8.5' in report.md line 4: 'mean 8.5'"
    miss = one(r, type="file_contains", pattern="report.md", match="median")
    assert not miss.passed and miss.evidence == "'median' not found in report.md"


def test_file_contains_match_any(tmp_path):
    r = run(tmp_path, {"outputs/report.md": REPORT})
    assert one(
        r, type="file_contains", pattern="*.md", match_any=["## Column profile", "## Columns"]
    ).passed
    res = one(r, type="file_contains", pattern="*.md", match_any=["## Notes", "## Gaps"])
    assert not res.passed and "any of '## Notes', '## Gaps'" in res.evidence


def test_file_contains_missing_file_fails(tmp_path):
    r = run(tmp_path, {})
    res = one(r, type="file_contains", pattern="report.md", match="x")
    assert not res.passed and "outputs/ holds: nothing" in res.evidence


def test_regex_anchors_are_per_line(tmp_path):
    r = run(tmp_path, {"outputs/report.md": "intro\n## Columns\ntext ## Summary\n"})
    assert one(r, type="file_contains", pattern="report.md", match_regex=r"^## Columns$").passed
    # ^ anchors at a line start, so a heading mid-line does not count
    assert not one(r, type="file_contains", pattern="report.md", match_regex=r"^## Summary").passed
    res = one(r, type="file_contains", pattern="report.md", match_regex=r"^\w+$")
    assert res.passed and "line 1" in res.evidence


def test_regex_dot_does_not_cross_lines_unless_asked(tmp_path):
    r = run(tmp_path, {"outputs/r.md": "alpha\nbeta\n"})
    assert not one(r, type="file_contains", pattern="r.md", match_regex=r"alpha.beta").passed
    assert one(r, type="file_contains", pattern="r.md", match_regex=r"(?s)alpha.beta").passed
    assert one(r, type="file_contains", pattern="r.md", match_regex=r"alpha\nbeta").passed


def test_invalid_regex_fails_the_check_without_crashing(tmp_path):
    r = run(tmp_path, {"outputs/r.md": "x"})
    bad = s.FileContains.model_construct(
        id="S9",
        type="file_contains",
        description="bad",
        pattern="r.md",
        match=None,
        match_any=None,
        match_regex="(",
        critical=True,
    )
    result = check(r, bad)
    assert not result.expectations[0].passed
    assert "invalid match_regex" in result.expectations[0].evidence
    assert result.gate_passed is False


def test_invalid_regex_is_refused_when_the_evals_load(tmp_path):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "evals.json").write_text(
        json.dumps(
            {
                "skill_name": "x",
                "evals": [
                    {
                        "id": 1,
                        "prompt": "p",
                        "structural_expectations": [
                            {
                                "id": "S1",
                                "type": "file_contains",
                                "pattern": "a.md",
                                "match_regex": "(",
                            }
                        ],
                    }
                ],
            }
        )
    )
    with pytest.raises(BadInput, match="match_regex"):
        load_evals(tmp_path)


def test_binary_files_are_not_searched(tmp_path):
    r = run(tmp_path, {"outputs/data.bin": b"\x00\x01needle\x00"})
    assert not one(r, type="file_contains", pattern="*", match="needle").passed


# --- file_not_contains and except_context ------------------------------------------------------


def test_file_not_contains_pass_and_fail(tmp_path):
    r = run(tmp_path, {"outputs/report.md": "a\nb\nvalue NaN here\n"})
    res = one(r, type="file_not_contains", pattern="report.md", match="NaN")
    assert not res.passed and res.evidence == "Found 'NaN' in report.md line 3: 'value NaN here'"
    assert one(r, type="file_not_contains", pattern="report.md", match="TODO").passed


def test_except_context_same_line_and_within_two_lines(tmp_path):
    text = "line1\nwe count NaN values\nline3\nline4\nNaN\nline6\n"
    r = run(tmp_path, {"outputs/r.md": text})
    # line 2 is exempt (same line); line 5 is 3 lines from line 2: not exempt
    res = one(
        r, type="file_not_contains", pattern="r.md", match="NaN", except_context=["NaN values"]
    )
    assert not res.passed and "line 5" in res.evidence
    # context two lines below the match exempts it
    r2 = run(tmp_path / "b", {"outputs/r.md": "x\nNaN\ny\nNA or NaN policy\n"})
    res2 = one(r2, type="file_not_contains", pattern="r.md", match="NaN", except_context=["policy"])
    assert res2.passed and "2 match(es) exempt" in res2.evidence
    # three lines away is too far
    r3 = run(tmp_path / "c", {"outputs/r.md": "NaN\na\nb\nc policy\n"})
    assert not one(
        r3, type="file_not_contains", pattern="r.md", match="NaN", except_context=["policy"]
    ).passed


def test_except_context_with_regex_and_match_any(tmp_path):
    r = run(tmp_path, {"outputs/t.ts": "const onSubmit = vi.fn()\nconst repo = vi.fn()\n"})
    res = one(
        r,
        type="file_not_contains",
        pattern="*.ts",
        match_regex=r"vi\.fn\(\)",
        except_context=["onSubmit"],
    )
    # line 2 is within two lines of "onSubmit" on line 1: exempt too
    assert res.passed
    r2 = run(tmp_path / "b", {"outputs/t.ts": "onSubmit\n\n\n\nmock()\n"})
    assert not one(
        r2,
        type="file_not_contains",
        pattern="*.ts",
        match_any=["spy()", "mock()"],
        except_context=["onSubmit"],
    ).passed


def test_file_not_contains_without_files_passes(tmp_path):
    res = one(run(tmp_path, {}), type="file_not_contains", pattern="*.md", match="x")
    assert res.passed and "No file matches" in res.evidence


# --- file_count ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "count", "passed"),
    [
        ("==", 2, True),
        ("==", 3, False),
        (">=", 2, True),
        (">=", 3, False),
        ("<=", 2, True),
        ("<=", 1, False),
        (">", 1, True),
        (">", 2, False),
        ("<", 3, True),
        ("<", 2, False),
    ],
)
def test_file_count_operators(tmp_path, operator, count, passed):
    r = run(tmp_path, {"outputs/a.csv": "x", "outputs/sub/b.csv": "y", "outputs/c.md": "z"})
    res = one(r, type="file_count", pattern="*.csv", count=count, operator=operator)
    assert res.passed is passed
    assert res.evidence.startswith("2 file(s) match '*.csv' (a.csv, sub/b.csv)")


# --- no_errors ----------------------------------------------------------------------------------


def _tool_turns(result: str, *, is_error: bool = False, name: str = "bash") -> list[dict]:
    return [
        {"type": "eval_prompt", "text": "Fix the Error: in the file", "files": []},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": name, "input": {"command": "ls"}}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": result,
                    "is_error": is_error,
                }
            ],
        },
    ]


def test_no_errors_passes_a_clean_transcript(tmp_path):
    r = run(tmp_path, {}, _tool_turns("report.md written; 0 errors found"))
    res = one(r, type="no_errors")
    assert res.passed, res.evidence


@pytest.mark.parametrize(
    "output",
    [
        'Traceback (most recent call last):\n  File "x.py"\nValueError: bad',
        "Error: cannot open file",
        "bash: csvkit: command not found",
        "cat: /etc/shadow: Permission denied",
        "cat: data.csv: No such file or directory",
    ],
)
def test_no_errors_finds_each_pattern(tmp_path, output):
    r = run(tmp_path, {}, _tool_turns(output))
    res = one(r, type="no_errors")
    assert not res.passed and "transcript.jsonl line 3" in res.evidence


def test_no_errors_flags_is_error_results(tmp_path):
    r = run(tmp_path, {}, _tool_turns("something failed", is_error=True))
    res = one(r, type="no_errors")
    assert not res.passed and "is_error" in res.evidence


def test_no_errors_ignores_files_the_agent_read(tmp_path):
    # a skill or input that mentions "Error:" is not an error of the run
    r = run(
        tmp_path, {}, _tool_turns("Error: handling guide\nPermission denied means...", name="Read")
    )
    assert one(r, type="no_errors").passed
    assert transcript_errors(r) == []


def test_no_errors_falls_back_to_transcript_md(tmp_path):
    r = run(tmp_path, {"transcript.md": "# Transcript\n\nok\nError: boom\n"})
    res = one(r, type="no_errors")
    assert not res.passed and "transcript.md line 4" in res.evidence
    assert not one(run(tmp_path / "b", {}), type="no_errors").passed  # no transcript at all


# --- custom_script ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["none", "bwrap"])
def test_custom_script_pass_fail_and_outputs_dir(tmp_path, mode):
    if mode == "bwrap" and not bwrap_available():
        tiers.skip("bubblewrap", "bubblewrap is not usable on this machine")
    r = run(tmp_path, {"outputs/report.md": REPORT})
    ev = Eval(
        id=1,
        name="e",
        prompt="p",
        structural=[
            exp(
                type="custom_script",
                script='grep -q "## Columns" "$OUTPUTS_DIR/report.md" && echo fine',
            ),
            exp(
                id="S2",
                type="custom_script",
                script='echo "$OUTPUTS_DIR"; test -f "$OUTPUTS_DIR/nope.md"',
            ),
        ],
    )
    ok, bad = check_run(
        ev, r, SandboxPolicy(mode=mode, timeout_s=20), configuration="with_skill"
    ).expectations
    assert ok.passed and "exit 0" in ok.evidence and "fine" in ok.evidence
    assert not bad.passed and "exit 1" in bad.evidence and "/workspace/outputs" in bad.evidence


def test_custom_script_cannot_change_the_run(tmp_path):
    r = run(tmp_path, {"outputs/report.md": REPORT})
    assert one(
        r, type="custom_script", script='rm "$OUTPUTS_DIR/report.md"; echo x > "$OUTPUTS_DIR/new"'
    ).passed
    assert (r / "outputs" / "report.md").read_text() == REPORT
    assert not (r / "outputs" / "new").exists()


@pytest.mark.slow
def test_a_custom_script_that_hangs_is_unscored_naming_the_check_and_its_limit(tmp_path):
    """Not a failed expectation (it was one before): a check that hangs says nothing of the skill."""
    r = run(tmp_path, {})
    ev = Eval(id=1, name="e", prompt="p", structural=[exp(type="custom_script", script="sleep 5")])
    with pytest.raises(CheckTimedOut) as caught:
        check_run(ev, r, SandboxPolicy(mode="none", timeout_s=0.5), configuration="with_skill")
    assert caught.value.check == "S1" and caught.value.limit_s == 0.5
    assert "custom_script check 'S1' passed its time limit of 0.5 s" in str(caught.value)
    assert isinstance(caught.value, InfraFailure)


# --- the whole result ---------------------------------------------------------------------------


def test_gate_summary_and_text(tmp_path):
    r = run(tmp_path, {"outputs/report.md": REPORT})
    result = check(
        r,
        exp(
            id="S1",
            type="file_exists",
            pattern="report.md",
            critical=True,
            description="Report written",
        ),
        exp(id="S2", type="file_contains", pattern="report.md", match="## Notes", critical=False),
    )
    assert [e.text for e in result.expectations] == ["Report written", "check file_contains"]
    assert result.summary.model_dump() == {"passed": 1, "failed": 1, "total": 2, "pass_rate": 0.5}
    assert result.gate_passed is True  # only a critical failure closes the gate
    closed = check(r, exp(id="S3", type="file_exists", pattern="x.md", critical=True))
    assert closed.gate_passed is False


def test_run_error_fails_everything(tmp_path):
    r = run(tmp_path, {"outputs/report.md": REPORT})
    result = check(
        r,
        exp(type="file_exists", pattern="report.md"),
        exp(id="S2", type="no_errors"),
        run_error="the run passed its wall-clock limit",
    )
    assert result.summary.passed == 0
    assert {e.evidence for e in result.expectations} == {
        "run failed: the run passed its wall-clock limit"
    }
