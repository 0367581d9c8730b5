"""`optimizer export`: a version's skill folder leaves the run with the evals the run used, so
that the folder can be validated, benchmarked or run again as it is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from inprocess import EXAMPLE, cli


@pytest.mark.slow
def test_export_copies_the_skill_and_the_evals_the_run_used(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    shutil.rmtree(skill / "evals" / "files")  # the input files live next to the evals it names
    chosen = tmp_path / "elsewhere" / "evals.json"  # --evals: not the skill's own evals/evals.json
    chosen.parent.mkdir()
    evals = json.loads((EXAMPLE / "evals" / "evals.json").read_text())
    evals["evals"] = [{**e, "files": []} for e in evals["evals"]]
    chosen.write_text(json.dumps(evals))
    cli(
        monkeypatch,
        None,
        "run",
        str(skill),
        "--evals",
        str(chosen),
        "--provider",
        "sim",
        "--max-iterations",
        "0",
        "--run-dir",
        "runs/r",
    )

    out = cli(monkeypatch, None, "export", "runs/r", "--version", "v0", "--to", "out")
    assert out.strip() == "exported v0 to out, with the run's evals in out/evals"
    exported = tmp_path / "out"
    assert (exported / "SKILL.md").read_text() == (skill / "SKILL.md").read_text()
    assert json.loads((exported / "evals" / "evals.json").read_text()) == evals
    assert (exported / "evals" / "trigger_evals.json").read_text() == (
        EXAMPLE / "evals" / "trigger_evals.json"
    ).read_text()
    assert not (
        tmp_path / "runs" / "r" / "v0" / "skill" / "evals"
    ).exists()  # still none inside the run
    validated = cli(monkeypatch, None, "validate", "out")
    assert "evals" in validated


def test_export_refuses_a_version_given_twice_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    (run).mkdir()
    (run / "state.db").write_bytes(b"")
    out = cli(monkeypatch, None, "export", str(run), "v1", "--version", "v2", "--to", "out", code=2)
    assert (
        out.strip()
        == "error: export: the version is given twice (v1 and --version v2); give it once."
    )
    assert not Path("out").exists()
