"""Skill folders: front matter rules, snapshots and their content hash, files, diffs, descriptions."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from optimizer.errors import BadInput
from optimizer.inputs.skill import (
    check_skill,
    content_hash,
    files_of,
    load_skill,
    snapshot,
    unified_diff,
)
from optimizer.inputs.skillmd import check_skill_md, parse_skill_md, set_description

FIXTURES = Path(__file__).parents[1] / "fixtures" / "skills"


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    dest = tmp_path / "src" / "minimal"
    shutil.copytree(FIXTURES / "minimal", dest)
    return dest


def doc(front: str, body: str = "Do the thing.\n") -> str:
    return f"---\n{front}\n---\n\n{body}"


# --- SKILL.md ---------------------------------------------------------------------------------


def test_parse_skill_md_gives_fields_and_body() -> None:
    parsed = parse_skill_md(
        doc("name: pdf-tools\ndescription: Fill PDF forms.\nlicense: MIT"), "x/SKILL.md"
    )
    assert parsed.name == "pdf-tools"
    assert parsed.description == "Fill PDF forms."
    assert parsed.front_matter == {
        "name": "pdf-tools",
        "description": "Fill PDF forms.",
        "license": "MIT",
    }
    assert parsed.body == "\nDo the thing.\n"


def test_parse_tolerates_bom_and_crlf() -> None:
    text = "\ufeff---\r\nname: a1\r\ndescription: d\r\n---\r\nbody\r\n"
    parsed = parse_skill_md(text)
    assert (parsed.name, parsed.body) == ("a1", "body\n")
    assert check_skill_md(text) == []


@pytest.mark.parametrize(
    "front",
    [
        pytest.param("name: " + "a" * 64 + "\ndescription: d", id="name-64"),
        pytest.param("name: pdf2-tools-3\ndescription: d", id="digits-and-hyphens"),
        pytest.param("name: x\ndescription: " + "d" * 1024, id="description-1024"),
        pytest.param(
            "name: x\ndescription: d\ncompatibility: " + "c" * 500, id="compatibility-500"
        ),
        pytest.param(
            "name: x\ndescription: d\nallowed-tools: [Read, Bash]", id="allowed-tools-list"
        ),
        pytest.param(
            "name: x\ndescription: d\nmetadata:\n  author: me\n  version: '1'", id="metadata"
        ),
        pytest.param("name: x\ndescription: 'Use it when: you must'", id="quoted-colon"),
    ],
)
def test_front_matter_accepted(front: str) -> None:
    assert check_skill_md(doc(front)) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            doc("name: My_Skill\ndescription: d"), "e.g. 'my-skill'", id="underscore-upper"
        ),
        pytest.param(doc("name: skill-\ndescription: d"), "not kebab-case", id="trailing-hyphen"),
        pytest.param(doc("name: 12\ndescription: d"), "'name' must be text", id="name-not-text"),
        pytest.param(
            doc("name: x\ndescription: ''"),
            "'description' is missing or empty",
            id="empty-description",
        ),
        pytest.param(
            doc("name: x\ndescription: [a, b]"), "'description' must be text", id="description-list"
        ),
        pytest.param(
            doc("name: x\ndescription: d\nmetadata: flat"),
            "'metadata' must be a mapping",
            id="metadata-flat",
        ),
        pytest.param(
            doc("name: x\ndescription: d\ncompatibility: ''"),
            "'compatibility' must be non-empty",
            id="compat-empty",
        ),
        pytest.param(
            doc("name: x\ndescription: d\nallowed-tools: 3"), "'allowed-tools'", id="tools-number"
        ),
        pytest.param(
            doc("name: x\ndescription: d\nlicence: MIT"),
            "did you mean 'license'?",
            id="licence-typo",
        ),
        pytest.param(doc("- a\n- b"), "must be a YAML mapping", id="front-matter-list"),
        pytest.param(
            doc("name: x\ndescription: Use it when: you must"), "at line 3", id="unquoted-colon"
        ),
        pytest.param(
            doc("name: x\ndescription: d", body="  \n\n"), "no instructions", id="blank-body"
        ),
    ],
)
def test_front_matter_problems(text: str, expected: str) -> None:
    problems = check_skill_md(text, "skills/x/SKILL.md")
    assert any(expected in p for p in problems), problems
    assert all(p.startswith("skills/x/SKILL.md: ") for p in problems)


def test_parse_skill_md_raises_on_unreadable_front_matter() -> None:
    with pytest.raises(BadInput, match="no YAML front matter"):
        parse_skill_md("just text\n", "SKILL.md")


def test_load_skill(skill: Path) -> None:
    loaded = load_skill(skill)
    assert loaded.name == "minimal" and loaded.description.startswith("A tiny skill")
    assert loaded.hash == content_hash(skill) and len(loaded.hash) == 16


def test_load_skill_lists_every_problem(skill: Path) -> None:
    (skill / "SKILL.md").write_text(doc("name: Bad--Name\ndescription: <b>\nextra: 1", body=""))
    with pytest.raises(BadInput) as info:
        load_skill(skill)
    assert len(info.value.problems) == 4  # name, description, extra key, body


def test_check_skill_suggests_renaming_lowercase_skill_md(skill: Path) -> None:
    (skill / "SKILL.md").rename(skill / "skill.md")
    assert any("rename 'skill.md' to SKILL.md" in p for p in check_skill(skill))


# --- hash and snapshot ------------------------------------------------------------------------


def test_hash_is_stable_across_copies(skill: Path, tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere" / "other-name"
    shutil.copytree(skill, copy)
    assert content_hash(copy) == content_hash(skill)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            lambda s: (s / "SKILL.md").write_text((s / "SKILL.md").read_text() + "\nMore.\n"),
            id="edit",
        ),
        pytest.param(
            lambda s: (s / "references").mkdir() or (s / "references" / "a.md").write_text("a"),
            id="add",
        ),
        pytest.param(
            lambda s: (s / "scripts" / "hello.py").rename(s / "scripts" / "hi.py"), id="rename"
        ),
        pytest.param(lambda s: (s / "scripts" / "hello.py").unlink(), id="delete"),
    ],
)
def test_hash_changes_with_content(skill: Path, change) -> None:
    before = content_hash(skill)
    change(skill)
    assert content_hash(skill) != before


@pytest.mark.parametrize(
    "litter",
    [
        "scripts/__pycache__/hello.cpython-311.pyc",
        "scripts/old.pyc",
        ".DS_Store",
        "scripts/.DS_Store",
        "node_modules/left-pad/index.js",
        ".git/HEAD",
        "runs/minimal-20260101-000000/state.db",
        "minimal-workspace/iteration-1/x.json",
        "evals/evals.json",  # evals are not skill content: a proposal's identity ignores them
        "evals/files/new.csv",
    ],
)
def test_ignored_files_do_not_change_the_hash(skill: Path, litter: str) -> None:
    before = content_hash(skill)
    path = skill / litter
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"changed\x00")
    assert content_hash(skill) == before


def test_nested_runs_folder_is_content(skill: Path) -> None:
    before = content_hash(skill)
    (skill / "references" / "runs").mkdir(parents=True)
    (skill / "references" / "runs" / "how.md").write_text("how to run")
    assert content_hash(skill) != before


def test_snapshot_copies_evals_but_not_litter(skill: Path, tmp_path: Path) -> None:
    (skill / "scripts" / "__pycache__").mkdir()
    (skill / "scripts" / "__pycache__" / "x.pyc").write_bytes(b"\x00")
    (skill / "runs").mkdir()
    (skill / "runs" / "log.txt").write_text("x")
    dest = tmp_path / "run" / "v0" / "skill"
    digest = snapshot(skill, dest)
    assert digest == content_hash(skill) == content_hash(dest)
    assert (dest / "evals" / "files" / "input.csv").read_text() == "a,b\n1,2\n"
    assert not (dest / "scripts" / "__pycache__").exists() and not (dest / "runs").exists()
    assert sorted(files_of(dest)) == [
        "SKILL.md",
        "evals/evals.json",
        "evals/files/input.csv",
        "scripts/hello.py",
    ]
    assert [p.name for p in dest.parent.iterdir()] == ["skill"]  # no temporary folder left behind


def test_snapshot_never_rewrites_a_version(skill: Path, tmp_path: Path) -> None:
    dest = tmp_path / "v0"
    snapshot(skill, dest)
    (skill / "SKILL.md").write_text((skill / "SKILL.md").read_text() + "changed\n")
    with pytest.raises(FileExistsError):
        snapshot(skill, dest)
    assert "changed" not in (dest / "SKILL.md").read_text()


def test_snapshot_refuses_a_link_outside_and_writes_nothing(skill: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (skill / "scripts" / "leak.txt").symlink_to(outside)
    dest = tmp_path / "run" / "v0"
    with pytest.raises(BadInput) as info:
        snapshot(skill, dest)
    assert (
        "scripts/leak.txt: a symbolic link that points outside the skill folder"
        in info.value.problems[0]
    )
    assert not (tmp_path / "run").exists()
    with pytest.raises(BadInput):
        content_hash(skill)


def test_snapshot_refuses_a_relative_link_escape(skill: Path) -> None:
    (skill / "evals" / "files" / "up.csv").symlink_to("../../../elsewhere.csv")
    assert any("outside the skill folder" in p for p in check_skill(skill))


def test_link_to_a_file_inside_is_copied_as_a_file(skill: Path, tmp_path: Path) -> None:
    (skill / "scripts" / "alias.py").symlink_to("hello.py")
    dest = tmp_path / "v0"
    snapshot(skill, dest)
    assert not (dest / "scripts" / "alias.py").is_symlink()
    assert (dest / "scripts" / "alias.py").read_text() == 'print("hello")\n'


def test_link_to_a_folder_is_refused(skill: Path, tmp_path: Path) -> None:
    (skill / "more").symlink_to("scripts", target_is_directory=True)
    with pytest.raises(BadInput, match="a symbolic link to a folder"):
        snapshot(skill, tmp_path / "v0")


# --- files and diff ---------------------------------------------------------------------------


def test_files_of_gives_text_or_bytes(skill: Path) -> None:
    (skill / "assets").mkdir()
    (skill / "assets" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff")
    files = files_of(skill)
    assert (
        isinstance(files["SKILL.md"], str) and files["assets/logo.png"] == b"\x89PNG\r\n\x1a\n\xff"
    )
    assert list(files) == sorted(files)
    assert not any(k.startswith("evals/") for k in files_of(skill, include_evals=False))


def test_unified_diff_applies_with_git(skill: Path, tmp_path: Path) -> None:
    before = tmp_path / "a"
    shutil.copytree(skill, before)
    md = skill / "SKILL.md"
    md.write_text(md.read_text().replace("Write `hello`", "Write `hello, world`"))
    (skill / "scripts" / "hello.py").unlink()
    (skill / "references").mkdir()
    (skill / "references" / "style.md").write_text("no trailing newline")
    diff = unified_diff(before, skill)
    assert "--- a/SKILL.md\n+++ b/SKILL.md\n" in diff
    assert "-- Write `hello` to" in diff and "+- Write `hello, world` to" in diff
    assert "--- /dev/null\n+++ b/references/style.md" in diff
    assert "--- a/scripts/hello.py\n+++ /dev/null" in diff
    assert "\\ No newline at end of file" in diff
    patch = tmp_path / "change.diff"
    patch.write_text(diff)
    subprocess.run(["git", "apply", str(patch)], cwd=before, check=True, capture_output=True)
    assert files_of(before) == files_of(skill)


def test_unified_diff_of_equal_folders_is_empty_and_binary_is_named(
    skill: Path, tmp_path: Path
) -> None:
    other = tmp_path / "b"
    shutil.copytree(skill, other)
    assert unified_diff(skill, other) == ""
    (other / "logo.png").write_bytes(b"\x00\x01")
    assert "Binary files a/logo.png and b/logo.png differ" in unified_diff(skill, other)


# --- set_description --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "front",
    [
        pytest.param("name: x\ndescription: Old text.\nlicense: MIT", id="plain"),
        pytest.param(
            "name: x\ndescription: >\n  Old text that\n  folds over lines.\n\nlicense: MIT",
            id="folded",
        ),
        pytest.param('name: x\ndescription: "Old: quoted"\nlicense: MIT', id="quoted"),
        pytest.param("name: x\nlicense: MIT", id="absent"),
    ],
)
@pytest.mark.parametrize(
    "new", ["New text.", "Use it when: the user asks, or 'quotes' and \"doubles\"."]
)
def test_set_description_keeps_the_rest(front: str, new: str) -> None:
    text = doc(front, body="# Body\n\n- keep `me`\n")
    out = set_description(text, new)
    parsed = parse_skill_md(out)
    assert parsed.description == new
    assert parsed.name == "x" and parsed.front_matter["license"] == "MIT"
    assert parsed.body == "\n# Body\n\n- keep `me`\n"
    assert check_skill_md(out) == []
