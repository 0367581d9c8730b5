"""`optimizer init SKILL_DIR`: an evals.json skeleton with one example of each expectation kind and
a guide beside it; `validate` and `run` both refuse it, naming its placeholders, until they are
replaced, and init never overwrites anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest
from inprocess import cli

from optimizer.inputs import skeleton
from optimizer.schemas import StructuralType

SKILL_MD = (
    "---\nname: notes-digest\ndescription: Turn meeting notes into a digest of decisions and "
    "action items. Use it when asked to summarise meeting notes.\n---\n\n# Notes digest\n\n"
    "Write `outputs/result.md`.\n"
)


@pytest.fixture
def skill(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no config.toml of the repository, and a run would write here
    folder = tmp_path / "notes-digest"
    folder.mkdir()
    (folder / "SKILL.md").write_text(SKILL_MD)
    return folder


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_init_writes_a_skeleton_that_validate_refuses_naming_its_placeholders(skill, monkeypatch):
    said = cli(monkeypatch, None, "init", str(skill))
    evals_json = skill / "evals" / "evals.json"
    assert f"wrote {evals_json} and {skill / 'evals' / 'README.md'}" in said
    data = json.loads(evals_json.read_text())
    assert data["skill_name"] == "notes-digest" and "eval_config" not in data
    first, second = data["evals"]
    assert set(first) == {"id", "prompt", "expected_output", "files", "expectations"}  # seed 002
    kinds = [c["type"] for c in second["structural_expectations"]]
    assert sorted(kinds) == sorted(get_args(StructuralType))  # one of each structural check
    assert second["quality_rubric"]["dimensions"][0]["scoring"].keys() == {"1", "3", "5"}
    guide = (skill / "evals" / "README.md").read_text()
    assert all(f"`{kind}`" in guide for kind in kinds)

    # The rule of `run`: a placeholder left is bad input, one sentence with the file, the count
    # and the fix, and no "OK".
    before = files(skill.parent)
    shown = cli(monkeypatch, None, "validate", str(skill), code=2)
    assert shown.splitlines() == [
        f"error: {evals_json}: {len(skeleton.PLACEHOLDERS)} fields still hold the placeholder "
        "text `optimizer init` wrote (the first: evals[0].prompt); replace each with your own "
        "task or check (evals/README.md says how), then validate again."
    ]
    assert files(skill.parent) == before


def test_init_never_overwrites(skill, monkeypatch):
    (skill / "evals").mkdir()
    (skill / "evals" / "README.md").write_text("my own notes\n")
    cli(monkeypatch, None, "init", str(skill))
    assert (skill / "evals" / "README.md").read_text() == "my own notes\n"  # kept, not replaced
    before = files(skill.parent)
    said = cli(monkeypatch, None, "init", str(skill), code=2)
    lines = said.strip().splitlines()
    assert len(lines) == 1 and "evals.json: already exists" in lines[0] and "Traceback" not in said
    assert files(skill.parent) == before


def test_init_refuses_a_folder_that_is_not_a_skill_and_writes_nothing(skill, monkeypatch):
    (skill / "SKILL.md").write_text("no front matter\n")
    before = files(skill.parent)
    said = cli(monkeypatch, None, "init", str(skill), code=2)
    assert said.startswith(f"error: {skill / 'SKILL.md'}: no YAML front matter")
    assert files(skill.parent) == before


def test_run_refuses_placeholders_until_every_one_is_replaced(skill, monkeypatch):
    cli(monkeypatch, None, "init", str(skill))
    said = cli(monkeypatch, None, "run", str(skill), "--provider", "sim", "--dry-run", code=2)
    assert (
        "(the first: evals[0].prompt)" in said and "replace them before a run spends money" in said
    )
    assert not (skill.parent / "runs").exists()

    path = skill / "evals" / "evals.json"
    text = path.read_text()
    for n, placeholder in enumerate(sorted(skeleton.PLACEHOLDERS)):
        text = text.replace(json.dumps(placeholder), json.dumps(f"Written by the author ({n})."))
    path.write_text(text)
    assert skeleton.untouched(json.loads(text)) == []
    shown = cli(monkeypatch, None, "validate", str(skill))
    assert shown.startswith("OK: the skill and its evals are valid.")
    assert "placeholder text" not in shown
    assert "warning: small suite: train has 2 evals" in shown
    assert "estimate" in cli(monkeypatch, None, "run", str(skill), "--provider", "sim", "--dry-run")
