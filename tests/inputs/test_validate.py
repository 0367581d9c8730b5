"""`validate.run`, the one entry of `optimizer validate`: a summary for a good skill; for each bad
input, BadInput with one sentence per problem (file, field, fix) and the folder left untouched."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from optimizer.config import load
from optimizer.errors import BadInput
from optimizer.inputs import validate

FIXTURES = Path(__file__).parents[1] / "fixtures" / "skills"
EXAMPLE = Path(__file__).parents[2] / "tests" / "fixtures" / "csv-report"
SETTINGS = load(None, env={}).settings

GOOD_MD = (FIXTURES / "minimal" / "SKILL.md").read_text()


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    dest = tmp_path / "minimal"
    shutil.copytree(FIXTURES / "minimal", dest)
    return dest


def tree(root: Path) -> dict[str, tuple]:
    """Everything a write could change: paths, link targets, bytes, modification times."""
    seen: dict[str, tuple] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            p = Path(folder) / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            if p.is_symlink():
                seen[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                seen[rel] = ("dir", st.st_mtime_ns)
            else:
                seen[rel] = ("file", p.read_bytes(), st.st_mtime_ns)
    return seen


# --- mutations of a good skill ---------------------------------------------------------------


def md(text: str) -> Callable[[Path], None]:
    def apply(skill: Path) -> None:
        (skill / "SKILL.md").write_text(text)

    return apply


def front(old: str, new: str) -> Callable[[Path], None]:
    assert old in GOOD_MD
    return md(GOOD_MD.replace(old, new))


def evals(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def apply(skill: Path) -> None:
        path = skill / "evals" / "evals.json"
        data = json.loads(path.read_text())
        result = change(data)
        path.write_text(json.dumps(data if result is None else result, indent=2))

    return apply


def eval0(change: Callable[[dict], object]) -> Callable[[Path], None]:
    return evals(lambda d: change(d["evals"][0]) and None)


def structural(k: int, **fields: object) -> Callable[[Path], None]:
    return eval0(lambda e: e["structural_expectations"][k].update(fields))


def raw_evals(data: bytes) -> Callable[[Path], None]:
    def apply(skill: Path) -> None:
        (skill / "evals" / "evals.json").write_bytes(data)

    return apply


def second_eval(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def both(d: dict) -> None:
        twin = json.loads(json.dumps(d["evals"][0]))
        twin["id"] = 2
        change(twin)
        d["evals"].append(twin)

    return evals(both)


def outside_file(skill: Path) -> Path:
    target = skill.parent / "secret.csv"
    target.write_text("x,y\n")
    return target


def input_link_outside(skill: Path) -> None:
    (skill / "evals" / "files" / "link.csv").symlink_to(outside_file(skill))
    eval0(lambda e: e["files"].append("evals/files/link.csv"))(skill)


def skill_link_outside(skill: Path) -> None:
    (skill / "scripts" / "shared.py").symlink_to(outside_file(skill))


def escape_file(skill: Path) -> None:
    outside_file(skill)
    eval0(lambda e: e["files"].append("../secret.csv"))(skill)


EVALS = "evals.json"
MD = "SKILL.md"

CASES = [
    pytest.param(
        md("# Minimal\n\nNo front matter here.\n"), MD, "front matter", id="no-front-matter"
    ),
    pytest.param(
        md("---\nname: minimal\ndescription: [unclosed\n---\nbody\n"), MD, "YAML", id="broken-yaml"
    ),
    pytest.param(
        md("---\nname: minimal\ndescription: x\n"), MD, "never closed", id="front-matter-unclosed"
    ),
    pytest.param(front("name: minimal", "name: Minimal"), MD, "'name'", id="uppercase-name"),
    pytest.param(front("name: minimal", "name: my--skill"), MD, "'name'", id="double-hyphen-name"),
    pytest.param(front("name: minimal", "name: -minimal"), MD, "'name'", id="leading-hyphen-name"),
    pytest.param(
        front("name: minimal", "name: " + "a" * 65), MD, "'name' has 65", id="name-too-long"
    ),
    pytest.param(
        md("---\ndescription: d\n---\nbody\n"), MD, "'name' is missing", id="name-missing"
    ),
    pytest.param(
        front("description: A tiny", "description: " + "x" * 1100 + " A tiny"),
        MD,
        "'description' has",
        id="description-too-long",
    ),
    pytest.param(
        front("A tiny skill", "A <tiny> skill"),
        MD,
        "angle bracket",
        id="description-angle-brackets",
    ),
    pytest.param(
        md("---\nname: minimal\n---\nbody\n"), MD, "'description'", id="description-missing"
    ),
    pytest.param(
        front("license: MIT", "license: MIT\nversion: 2"), MD, "'version'", id="unknown-key"
    ),
    pytest.param(
        front("compatibility: Needs python3 on the PATH.", "compatibility: " + "y" * 501),
        MD,
        "'compatibility' has 501",
        id="compatibility-too-long",
    ),
    pytest.param(md(GOOD_MD.split("# Minimal")[0]), MD, "no instructions", id="empty-body"),
    pytest.param(lambda s: (s / "SKILL.md").unlink(), MD, "missing", id="skill-md-missing"),
    pytest.param(
        evals(lambda d: d.update(evals={"0": {}})), EVALS, "evals is a dict", id="evals-not-a-list"
    ),
    pytest.param(raw_evals(b"[1, 2]"), EVALS, "not an object", id="evals-file-not-object"),
    pytest.param(
        second_eval(lambda e: e.update(id=1)), EVALS, "evals[1].id 1 repeats", id="duplicate-ids"
    ),
    pytest.param(
        eval0(lambda e: e.update(prompt="  ")), EVALS, "evals[0].prompt is empty", id="empty-prompt"
    ),
    pytest.param(
        structural(1, id="S1"),
        EVALS,
        'evals[0] (eval id 1).structural_expectations[1].id "S1" repeats structural_expectations[0].id',
        id="duplicate-structural-ids",
    ),
    pytest.param(
        eval0(
            lambda e: e["quality_rubric"]["dimensions"].append(
                dict(e["quality_rubric"]["dimensions"][0])
            )
        ),
        EVALS,
        'dimensions[1].name "warmth" repeats',
        id="duplicate-rubric-dimensions",
    ),
    pytest.param(
        eval0(
            lambda e: (
                e.pop("expectations")
                and e.update(
                    assertions=[
                        {"id": "A1", "text": "says hello"},
                        {"id": "A1", "text": "is short"},
                    ]
                )
            )
        ),
        EVALS,
        'assertions[1].id "A1" repeats',
        id="duplicate-assertion-ids",
    ),
    pytest.param(
        lambda s: (s / "evals" / "trigger_evals.json").write_text(
            json.dumps(
                [
                    {"query": "say hello", "should_trigger": True},
                    {"query": "Say  hello", "should_trigger": False},
                ]
            )
        ),
        "trigger_evals.json",
        "[1].query repeats [0].query",
        id="trigger-query-repeated",
    ),
    pytest.param(
        escape_file,
        EVALS,
        "evals[0].files[1] '../secret.csv' leads outside",
        id="file-outside-skill",
    ),
    pytest.param(
        eval0(lambda e: e["files"].append("/etc/hostname")),
        EVALS,
        "evals[0].files[1] '/etc/hostname' is an absolute",
        id="absolute-path",
    ),
    pytest.param(
        input_link_outside,
        EVALS,
        "evals[0].files[1] 'evals/files/link.csv' leads outside",
        id="input-symlink-escape",
    ),
    pytest.param(
        eval0(lambda e: e["files"].append("evals/files/nope.csv")),
        EVALS,
        "evals[0].files[1]",
        id="missing-input-file",
    ),
    pytest.param(
        structural(1, match_regex="(["),
        EVALS,
        "structural_expectations[1].match_regex",
        id="bad-regex",
    ),
    pytest.param(
        structural(0, type="file_exist"),
        EVALS,
        "structural_expectations[0].type 'file_exist'",
        id="unknown-structural-type",
    ),
    pytest.param(
        structural(4, operator="!="),
        EVALS,
        "structural_expectations[4].operator",
        id="bad-file-count-operator",
    ),
    pytest.param(
        eval0(lambda e: e["quality_rubric"]["dimensions"][0].update(weight=0)),
        EVALS,
        "quality_rubric.dimensions[0].weight",
        id="rubric-weight-zero",
    ),
    pytest.param(
        eval0(lambda e: e["quality_rubric"]["dimensions"][0].pop("scoring")),
        EVALS,
        "quality_rubric.dimensions[0].scoring lacks anchor",
        id="rubric-without-anchors",
    ),
    pytest.param(
        eval0(lambda e: e["quality_rubric"]["dimensions"][0]["scoring"].pop("3")),
        EVALS,
        "lacks anchor(s) '3'",
        id="rubric-missing-one-anchor",
    ),
    pytest.param(
        structural(5, script=""),
        EVALS,
        "structural_expectations[5].script is empty",
        id="empty-custom-script",
    ),
    pytest.param(
        structural(5, script="   "),
        EVALS,
        "structural_expectations[5].script is blank",
        id="blank-custom-script",
    ),
    pytest.param(eval0(lambda e: e.update(id="x")), EVALS, 'evals[0].id is "x"', id="id-as-string"),
    pytest.param(
        eval0(lambda e: e.update(expectations="abc")),
        EVALS,
        "evals[0].expectations",
        id="expectations-not-a-list",
    ),
    pytest.param(
        eval0(
            lambda e: [
                e.pop(k) for k in ("expectations", "structural_expectations", "quality_rubric")
            ]
        ),
        EVALS,
        "evals[0] has no expectation",
        id="no-expectation-at-all",
    ),
    pytest.param(raw_evals(b""), EVALS, "empty", id="empty-evals-file"),
    pytest.param(
        raw_evals(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), EVALS, "binary", id="binary-evals-file"
    ),
    pytest.param(
        raw_evals(b" " * (5 * 1024 * 1024 + 1)),
        EVALS,
        "over the 5 MB limit",
        id="evals-over-size-limit",
    ),
    pytest.param(
        raw_evals(b'{"skill_name": "minimal", "evals": [}'), EVALS, "not valid JSON", id="not-json"
    ),
    pytest.param(
        lambda s: (s / "evals" / "evals.json").unlink(), EVALS, "missing", id="evals-file-missing"
    ),
    pytest.param(
        evals(lambda d: d.update(skill_name="other")),
        EVALS,
        "skill_name is 'other'",
        id="skill-name-mismatch",
    ),
    pytest.param(
        evals(lambda d: d.update(eval_config={"runs": 3})),
        EVALS,
        "eval_config.runs",
        id="eval-config-unknown-key",
    ),
    pytest.param(
        skill_link_outside,
        "scripts/shared.py",
        "outside the skill folder",
        id="skill-symlink-escape",
    ),
]


@pytest.mark.parametrize(("mutate", "file", "field"), CASES)
def test_bad_input_lists_problems_and_writes_nothing(
    skill: Path, mutate: Callable[[Path], None], file: str, field: str
) -> None:
    mutate(skill)
    before = tree(skill.parent)
    with pytest.raises(BadInput) as info:
        validate.run(skill, None, SETTINGS)
    problems = info.value.problems
    assert info.value.exit_code == 2
    assert any(file in p and field in p for p in problems), problems
    for p in problems:
        assert "\n" not in p and "Traceback" not in p
        assert p.startswith(str(skill)), p  # every sentence names the file it is about
    assert tree(skill.parent) == before


def test_problems_of_skill_md_and_evals_come_out_together(skill: Path) -> None:
    front("name: minimal", "name: Bad_Name")(skill)
    structural(1, match_regex="(")(skill)
    eval0(lambda e: e.update(prompt=""))(skill)
    with pytest.raises(BadInput) as info:
        validate.run(skill, None, SETTINGS)
    text = "\n".join(info.value.problems)
    assert "'name' is 'Bad_Name'" in text and "e.g. 'bad-name'" in text
    assert "match_regex" in text and "evals[0].prompt is empty" in text
    # Named by its id too: an author counts evals by id, not from 0.
    assert "evals.json (eval id 1): evals[0].prompt is empty" in text
    assert "skill_name is 'minimal' but SKILL.md names the skill 'Bad_Name'" in text


def test_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as info:
        validate.run(tmp_path / "nowhere", None, SETTINGS)
    assert info.value.problems == [
        f"{tmp_path / 'nowhere'}: not a folder; pass the skill folder that holds SKILL.md."
    ]


def test_example_skill_validates_and_renders() -> None:
    summary = validate.run(EXAMPLE, None, SETTINGS)
    assert summary.skill_name == "csv-report"
    assert summary.dialect == "extended"
    assert summary.eval_count == 5
    assert summary.critical == 10
    assert summary.structural_by_type["custom_script"] == 1
    assert summary.structural_by_type["no_errors"] == 1
    assert (len(summary.split.train), len(summary.split.test)) == (4, 1)
    assert summary.eval_config == {
        "runs_per_eval": 3,
        "structural_gate": True,
        "baseline_comparison": True,
    }
    text = validate.render(summary)
    for piece in (
        "csv-report",
        "dialect extended",
        "evals        5",
        "10 critical",
        "test 1",
        "runs_per_eval=3",
    ):
        assert piece in text, text


def test_explicit_evals_path_and_summary_counts(tmp_path: Path) -> None:
    skill = FIXTURES / "example-skill"
    summary = validate.run(skill, skill / "evals" / "assertions.json", SETTINGS)
    assert summary.dialect == "assertions"
    assert (
        summary.judged == 2 and summary.structural_by_type == {} and summary.rubric_dimensions == 0
    )
    assert summary.split.test == [] and "fewer than 4 evals" in summary.split.note
    assert "(none; config.toml decides)" in validate.render(summary)


def test_example_v0_leaves_expectations_for_the_loop_to_fix() -> None:
    """The demo needs v0 good but incomplete: some judged expectations name snippets that no
    bullet of SKILL.md gives yet, and every one of them is in at least two evals (so the sealed
    test eval never hides one from the loop)."""
    import re

    bullets = [
        line for line in (EXAMPLE / "SKILL.md").read_text().splitlines() if line.startswith("- ")
    ]
    given = {s for b in bullets for s in re.findall(r"`([^`]+)`", b)}
    data = json.loads((EXAMPLE / "evals" / "evals.json").read_text())
    uncovered: dict[str, int] = {}
    for e in data["evals"]:
        assert "outputs/report.md" in e["prompt"]
        for text in e["expectations"]:
            snippets = re.findall(r"`([^`]+)`", text)
            assert snippets, text
            for s in snippets:
                if not any(s in g for g in given):
                    uncovered[s] = uncovered.get(s, 0) + 1
    assert set(uncovered) == {"## Summary", "missing", "## Notes"}
    assert all(n >= 2 for n in uncovered.values())


def test_example_profile_script_counts_missing_values() -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE / "scripts" / "profile_csv.py"),
            str(EXAMPLE / "evals/files/survey.csv"),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out.startswith("# Profile: survey.csv\n") and "Rows: 10" in out
    assert "| age | integer | 2 | 27 | 61 | 39.88 |" in out
    assert "| satisfaction | integer | 2 | 2 | 5 | 3.75 |" in out  # "NA" counts as missing
    assert "| comment | text | 4 |  |  |  |" in out


def test_small_suites_are_called_small_with_how_many_evals_to_add() -> None:
    summary = validate.run(EXAMPLE, None, SETTINGS)  # 5 evals: 4 train, 1 sealed test
    assert summary.warnings == [
        "small suite: train has 4 evals and the sealed test 1, too few for the intervals and the "
        "sealed test to mean much; add 13 evals (18 in all: 13 train, 5 sealed test) for at least "
        "5 in each split."
    ]
    assert "\nwarning: small suite: train has 4 evals" in validate.render(summary)
    assert validate.small_suite(15, 5, 0.25) is None
    assert validate.small_suite(6, 0, 0.0) is None  # no test asked for: train alone counts
    assert validate.small_suite(4, 0, 0.0) == (
        "small suite: train has 4 evals, too few for the intervals to mean much; add 1 eval (5 in "
        "all) for at least 5."
    )
    no_test = validate.small_suite(3, 0, 0.25)
    assert no_test and "there is no sealed test" in no_test and "add 15 evals" in no_test
    fine_train = validate.small_suite(10, 3, 0.25)
    assert fine_train and fine_train.startswith("small suite: the sealed test has 3 evals")


def test_run_warns_about_a_small_suite_before_it_starts(monkeypatch, tmp_path: Path) -> None:
    from inprocess import cli

    monkeypatch.chdir(tmp_path)
    text = cli(monkeypatch, None, "run", str(EXAMPLE.resolve()), "--provider", "sim", "--dry-run")
    assert "warning: small suite: train has 4 evals and the sealed test 1" in text
    assert not list(tmp_path.iterdir())
