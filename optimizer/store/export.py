"""`optimizer export`: a version's skill folder out of a run, with the evals it was measured on."""

from __future__ import annotations

import shutil
from pathlib import Path

from optimizer.errors import BadInput
from optimizer.store import adoptions
from optimizer.store.db import Store
from optimizer.store.files import Workspace


def export_version(run_dir: Path, version: str | None, to: Path, *, force: bool) -> str:
    """A version's skill folder, with the evals the run used (its inputs/ copy) back under
    evals/: the versions themselves hold none, so that no agent reads the expectations."""
    ws = Workspace(run_dir)
    if not ws.state_db.exists():
        raise BadInput(f"{run_dir}: not a run folder (no state.db).")
    store = Store(ws.state_db)
    try:
        have = adoptions.adopted(store)
        certified = any(a.certified for a in adoptions.all_of(store))
        if version is None:  # the adopted version; the search's best while nothing is adopted
            version = have if certified else (store.run_row() or {}).get("current_best") or "v0"
    finally:
        store.close()
    # A step is a move of the search, not a claim (docs/design.md §16): said where it is handed over.
    note = (
        ""
        if version == have
        else f"; {version} is a step of the search, not adopted: `optimizer adopt {run_dir} "
        f"{version}` certifies it against {have} on fresh runs"
    )
    source = ws.skill(version)
    if not source.is_dir():
        raise BadInput(
            f"{run_dir}: has no version '{version}'; `optimizer lineage {run_dir}` lists them."
        )
    if to.exists() and any(to.iterdir()):
        if not force:
            raise BadInput(
                f"{to}: is not empty; choose an empty folder or pass --force to replace it."
            )
        shutil.rmtree(to)
    shutil.copytree(source, to, dirs_exist_ok=True)
    evals_used = ws.root / "inputs" / "evals"
    if not evals_used.is_dir():
        return f"exported {version} to {to} (the run kept no evals to copy){note}"
    shutil.copytree(evals_used, to / "evals", dirs_exist_ok=True)
    return f"exported {version} to {to}, with the run's evals in {to / 'evals'}{note}"
