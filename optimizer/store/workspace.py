"""A run folder's life before the loop: created in an order a kill can undo (run.toml first,
state.db's run row last), recognised as started, cleaned of what a killed writer left, and the
version it starts from snapshotted without its evals (docs/design.md §5)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from optimizer import config, words
from optimizer.errors import BadInput
from optimizer.inputs import evals
from optimizer.inputs import skill as skills
from optimizer.inputs import triggers as trigger
from optimizer.store import readonly, registry, runs, runtoml
from optimizer.store.db import Store, now
from optimizer.store.files import Workspace, write_text


def started(ws: Workspace) -> bool:
    """The run began: state.db holds its row, which `create` commits last, after every other
    part; or state.db is damaged, or the loop already wrote history.json (only --fresh may
    replace those)."""
    if not ws.state_db.exists():
        return False
    count = readonly.count_runs(ws.state_db)
    return count is None or count > 0 or ws.history.exists()


def remove_partial(ws: Workspace) -> None:
    """What `create` had written (run.toml first) when its process died before the run's row."""
    for name in ("state.db", "state.db-wal", "state.db-shm", "run.toml"):
        (ws.root / name).unlink(missing_ok=True)
    for folder in [ws.root / "inputs", ws.version("v0"), *ws.root.glob(".inputs.tmp-*")]:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class RunInputs:
    """What a run is created from, checked: the skill folder and the skill read from it, the evals
    (or trigger evals) and their file when not the skill's own, and the target it optimizes."""

    skill_dir: Path
    skill: skills.Skill
    evalset: evals.EvalSet | trigger.TriggerSet
    evals_path: Path | None
    target: str


def create(
    ws: Workspace,
    settings: config.Settings,
    sources: Mapping[str, str],
    inputs: RunInputs,
    *,
    from_run: Path | None = None,
    base_best: Path | None = None,
) -> None:
    """The run folder, its inputs and v0, and state.db's run row, committed last. v0 is the skill,
    or `base_best`, the best version of the run `from_run` it starts from."""
    skill_dir, evalset, target = inputs.skill_dir, inputs.evalset, inputs.target
    ws.root.mkdir(parents=True, exist_ok=True)
    # run.toml first: it marks a folder whose creation began, so a killed `run` can start over.
    write_text(ws.run_toml, runtoml.to_toml(settings, sources))
    _copy_inputs(ws, skill_dir, inputs.evals_path, target)
    v0_source = base_best or skill_dir
    snapshot_version(v0_source, ws.skill("v0"))
    split_json = _split_json(evalset, settings)
    start = _Start(inputs.skill, skill_dir, target, evalset.hash, split_json, settings, from_run)
    _commit_rows(ws, start)
    registry.record(ws.root)


@dataclass(frozen=True)
class _Start:
    """What state.db's first rows say of how the run starts: its skill, target, evals and
    settings, and the run whose best version it starts from, if any."""

    skill: skills.Skill
    skill_dir: Path
    target: str
    eval_set_hash: str
    split_json: str
    settings: config.Settings
    from_run: Path | None


def _copy_inputs(ws: Workspace, skill_dir: Path, evals_path: Path | None, target: str) -> None:
    """inputs/: a snapshot of the skill folder, and the evals file named for the target."""
    # The eval inputs are the user's files as they were at the start; the agent never sees evals/.
    inputs = ws.root / "inputs"
    skills.snapshot(skill_dir, inputs)
    if evals_path is not None:
        (inputs / "evals").mkdir(exist_ok=True)
        name = "trigger_evals.json" if target == "description" else "evals.json"
        shutil.copyfile(evals_path, inputs / "evals" / name)


def _split_json(evalset: evals.EvalSet | trigger.TriggerSet, settings: config.Settings) -> str:
    """The run's split of its evals, as state.db's run row holds it."""
    if isinstance(evalset, trigger.TriggerSet):  # --target description: train / validation /
        # sealed test, with the queries themselves
        return trigger.split_json(evalset, trigger.split(evalset, seed=settings.loop.seed))
    split = evals.split(
        evalset, test_fraction=settings.evals.test_fraction, seed=settings.loop.seed
    )
    return json.dumps({"train": split.train, "test": split.test, "note": split.note})


def _commit_rows(ws: Workspace, start: _Start) -> None:
    """state.db's run row and v0's row, in one transaction: the last step of `create`."""
    store = Store(ws.state_db)
    try:
        with store.atomic():
            store.table("runs").insert(_run_row(ws, start))
            store.table("versions").insert(_v0_row(ws, start.from_run))
    finally:
        store.close()


def _run_row(ws: Workspace, start: _Start) -> dict[str, str | None]:
    """The run's row as it is created, v0 its best version."""
    return {
        "id": ws.root.name,
        "skill_name": start.skill.name,
        # Absolute: the runs of a skill folder are found by it (store/registry.py).
        "skill_dir": str(start.skill_dir.resolve()),
        "target": start.target,
        "started_at": now(),
        "eval_set_hash": start.eval_set_hash,
        "split_json": start.split_json,
        "settings_json": start.settings.model_dump_json(),
        "status": "created",
        "from_run": str(start.from_run) if start.from_run else None,
        "current_best": "v0",
        "activity": "created",
    }


def _v0_row(ws: Workspace, from_run: Path | None) -> dict[str, str | int | None]:
    """v0's row: the original skill, or the best version of the run it starts from."""
    return {
        "label": "v0",
        "hash": skills.content_hash(ws.skill("v0")),
        "parent": None,
        "iteration": 0,
        "created_at": now(),
        "status": "created",
        "summary": f"best version of {from_run}" if from_run else "the original skill",
    }


def remove_stale_temp_files(ws: Workspace) -> None:
    """An atomic write cut short by a kill leaves its temp file (files.write_bytes); with the lock
    held no writer of the run is alive, so each one left is stale. The review server writes
    feedback.json without the lock, and inputs/ holds the user's own files: both are left alone."""
    for path in ws.root.rglob(".*.tmp"):
        rel = path.relative_to(ws.root).parts
        if path.is_file() and rel[0] != "inputs" and not path.name.startswith(".feedback.json."):
            path.unlink(missing_ok=True)


def snapshot_version(src: Path, dest: Path) -> str:
    """A version's skill folder without evals/: the agent must not read the expectations."""
    digest = skills.snapshot(src, dest)
    shutil.rmtree(dest / "evals", ignore_errors=True)
    return digest


def best_of(run_dir: Path) -> Path:
    ws = Workspace(run_dir)
    if not ws.state_db.exists():
        raise BadInput(words.not_a_run(f"--from {run_dir}", fix="name a finished run."))
    store = Store(ws.state_db)
    try:
        best = (runs.row(store) or runs.Run()).best
    finally:
        store.close()
    return ws.skill(best)
