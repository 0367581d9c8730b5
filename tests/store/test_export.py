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

    out = cli(monkeypatch, None, "export", "runs/r", "v0", "--to", "out")
    assert out.strip() == (
        "exported v0 to out, with the run's evals in out/evals: the adopted version"
    )
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


def test_the_old_version_flag_is_refused_in_one_sentence_and_writes_nothing(tmp_path, monkeypatch):
    """`--version` on export read as the program's `optimizer --version`: the version is named
    after the run folder, and the old spelling says so."""
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    (run).mkdir()
    (run / "state.db").write_bytes(b"")
    out = cli(monkeypatch, None, "export", str(run), "--version", "v2", "--to", "out", code=2)
    assert out.strip() == (
        "error: export: --version is the program's own version; name the version after the run "
        f"folder instead: `optimizer export {run} v2 --out out`."  # --to is --out's old spelling
    )
    assert not Path("out").exists()


def _adoption(store, number: int, version: str, base: str, status: str) -> None:
    store.table("adoptions").insert(
        {
            "number": number,
            "version": version,
            "base": base,
            "scope": "tasks",
            "status": status,
            "evals_json": "[1, 2, 3]",
            "estimate_usd": 1.0,
            "decision_json": None,
            "next_step": "",
            "started_at": "2026-11-21T07:00:00Z",
            "finished_at": "2026-11-21T07:10:00Z",
        }
    )


def test_export_gives_the_adopted_version_unless_one_is_named_and_says_why(tmp_path, monkeypatch):
    """`adopt` said "not certified … v0 stays adopted" and `export` then handed over the search's
    best: export gives the version the user has, and names why."""
    from fixtures.workspace_builder import build_workspace

    from optimizer.store import runs
    from optimizer.store.db import Store

    monkeypatch.chdir(tmp_path)
    built = build_workspace(tmp_path / "run", versions=4, pending=False, seed=3)
    store = Store(built.root / "state.db")
    best = (runs.row(store) or runs.Run()).best
    assert best != "v0"
    _adoption(store, 1, best, "v0", "not certified")
    store.close()
    said = cli(monkeypatch, None, "export", str(built.root), "--out", "a")
    assert said.startswith("exported v0 to a") and f"({best} was not certified" in said
    assert Path("a/SKILL.md").read_text() == (built.root / "v0/skill/SKILL.md").read_text()
    named = cli(monkeypatch, None, "export", str(built.root), best, "--out", "b")
    assert named.startswith(f"exported {best} to b") and "as named" in named
    store = Store(built.root / "state.db")
    _adoption(store, 2, best, "v0", "certified")
    store.close()
    said = cli(monkeypatch, None, "export", str(built.root), "--out", "c")
    assert said.startswith(f"exported {best} to c") and "the adopted version (certified" in said


def test_export_reads_the_run_read_only(tmp_path, monkeypatch):
    """Export is a view: it never opens the run's state.db for writing (which migrates it), so no
    byte of it changes and no -wal or -shm file is left beside it."""
    from fixtures.workspace_builder import build_workspace

    from optimizer.store import db as store_db
    from optimizer.store.export import export_version

    built = build_workspace(tmp_path / "run", versions=3, pending=False)
    state = built.root / "state.db"
    before = state.read_bytes()

    def writer(*_a: object, **_k: object) -> None:
        raise AssertionError("export opened state.db for writing")

    monkeypatch.setattr(store_db.Store, "__init__", writer)
    said = export_version(built.root, "v1", tmp_path / "out", force=False)
    assert said.startswith("exported v1 to ")
    assert state.read_bytes() == before
    assert not (built.root / "state.db-wal").exists() and not (built.root / "state.db-shm").exists()
