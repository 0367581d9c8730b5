"""`optimizer export`: a version's skill folder out of a run, with the evals it was measured on."""

from __future__ import annotations

import shutil
from pathlib import Path

from optimizer import words
from optimizer.decide import adopt as rule
from optimizer.errors import BadInput
from optimizer.schemas import Adoption
from optimizer.store import adoptions, ledger, readonly, runs
from optimizer.store.files import Workspace
from optimizer.store.lock import running_pid


def export_version(run_dir: Path, version: str | None, to: Path, *, force: bool) -> str:
    """A version's skill folder, with the evals the run used (its inputs/ copy) back under
    evals/: the versions themselves hold none, so that no agent reads the expectations."""
    ws = Workspace(run_dir)
    if not ws.state_db.exists():
        raise BadInput(words.not_a_run(run_dir))
    # Read-only, as every view reads: an export never migrates or writes the run's state.db.
    with readonly.View(ws.state_db, live=running_pid(ws) is not None) as db:
        tried = adoptions.read(db, ledger.by_scope(db))
        best = (runs.row(db) or runs.Run()).best
    have = rule.base_of(tried)
    if version is None:  # the adopted version: what the user has, not a step of the search
        version, note = have, ": " + _why_adopted(run_dir, tried, have, best)
    elif version == have:
        note = ": the adopted version"
    else:  # a step is a move of the search, not a claim (docs/design.md §16): said on hand-over
        note = (
            f", as named; it is a step of the search, not adopted: `optimizer adopt {run_dir} "
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


def _why_adopted(run_dir: Path, tried: list[Adoption], have: str, best: str) -> str:
    """Why the adopted version is the one handed over, in the words `adopt` used."""
    last = tried[-1] if tried else None
    if last is not None and last.certified and last.version == have:
        return f"the adopted version (certified against {last.base} on fresh runs)"
    if last is not None and last.status != "running" and not last.certified:
        return (
            f"the adopted version ({last.version} was not certified; `optimizer export {run_dir} "
            f"{last.version}` exports it all the same)"
        )
    if best != have:
        return (
            f"the adopted version (the search's best, {best}, is a step, not adopted: `optimizer "
            f"adopt {run_dir}` certifies it, `optimizer export {run_dir} {best}` exports it as it is)"
        )
    return "the adopted version"
