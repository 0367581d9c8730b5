"""Opening a run folder for work (search/runfolder.open_run), the one way `run`, `resume` and `adopt`
do it: its settings from run.toml, a refusal while a daemon holds it, and what a systemic failure
leaves in the run's row (a search marks the run failed, an adoption leaves it as it was)."""

from __future__ import annotations

import os

import pytest
from fixtures.workspace_builder import build_workspace

from optimizer.errors import BadInput, WorkFailed
from optimizer.search import runfolder
from optimizer.store import runs
from optimizer.store.db import Store
from optimizer.store.files import Workspace
from optimizer.store.lock import lock


def _status(ws: Workspace) -> str:
    store = Store(ws.state_db)
    try:
        row = runs.row(store)
        assert row is not None
        return row.status
    finally:
        store.close()


def test_a_folder_without_its_run_toml_is_not_a_run_folder(tmp_path):
    ws = Workspace(tmp_path / "empty")
    ws.root.mkdir()
    with pytest.raises(BadInput, match=r"empty: not a run folder \(no state.db and run.toml\); do"):
        runfolder.require(ws, "do this.")


def test_the_settings_come_from_run_toml_under_the_overrides(tmp_path):
    ws = Workspace(build_workspace(tmp_path / "run").root)
    settings = runfolder.settings_from(ws, ["loop.seed=7"]).settings
    assert settings.budget.usd == 5.0 and settings.loop.seed == 7
    ws.run_toml.write_text("[budget\n", encoding="utf-8")
    with pytest.raises(BadInput, match="not valid TOML .*; restore it or start over."):
        runfolder.settings_from(ws, [], restore="restore it or start over")


def test_it_refuses_in_the_callers_words_while_a_daemon_holds_the_folder(tmp_path):
    ws = Workspace(build_workspace(tmp_path / "run").root)
    settings = runfolder.settings_from(ws, []).settings
    with lock(ws), pytest.raises(BadInput, match=f"^busy {os.getpid()}$"):
        with runfolder.open_run(ws, settings, refuse=lambda pid: f"busy {pid}", search=False):
            pytest.fail("opened beside a live daemon")
    assert _status(ws) == "stopped"


@pytest.mark.parametrize("search, left", [(True, "failed"), (False, "stopped")])
def test_a_systemic_failure_marks_a_search_failed_and_leaves_an_adoption_as_it_was(
    tmp_path, search, left
):
    ws = Workspace(build_workspace(tmp_path / "run").root)
    settings = runfolder.settings_from(ws, []).settings
    with pytest.raises(WorkFailed):
        with runfolder.open_run(ws, settings, refuse=None, search=search) as opened:
            assert opened.client.budget.ceiling_usd == settings.budget.usd
            assert opened.open_target.__module__ == "optimizer.search.body"
            raise WorkFailed("disk full")
    assert _status(ws) == left
