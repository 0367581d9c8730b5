"""What growing the evals buys a run: the power to find +0.10 with the run's train evals, and with
the evals its skill folder holds now (accepted since, or waiting as candidates). Never changes a
run's split: a running run keeps the evals it copied at its start."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from optimizer.decide import power
from optimizer.errors import BadInput
from optimizer.inputs.validate import train_counts
from optimizer.schemas import JsonObject
from optimizer.store.runs import Run


class PowerOutlook(TypedDict):
    """The power to find the effect with the run's train evals, and with those the skill folder
    holds now (next_*: None while they are the same)."""

    train: int
    power: float
    effect: float
    next_train: int | None
    next_power: float | None
    new_evals: int
    line: str


def for_run(run: Run, run_settings: JsonObject) -> PowerOutlook | None:
    """The power line of a run (body target only: trigger queries have their own split). Reads the
    skill folder the run was started from, when it is still there; its problems only shorten the line."""
    if (run.target or "body") != "body":
        return None
    train = len(run.split.get("train") or [])
    if not train:
        return None
    settings: Mapping[str, Any] = run_settings  # as the run recorded them, read leniently
    selection = settings.get("selection") or {}
    scope, few = str(selection.get("scope", "auto")), int(selection.get("few_evals", 10))
    out: PowerOutlook = {
        "train": train,
        "power": round(power.power_at(train, scope=scope, few_evals=few), 3),
        "effect": power.effect(),
        "next_train": None,
        "next_power": None,
        "new_evals": 0,
        "line": power.line(train, what="train evals in this run", scope=scope, few_evals=few),
    }
    if not run.skill_dir:
        return out
    source = Path(run.skill_dir)
    loop, evals = settings.get("loop") or {}, settings.get("evals") or {}
    try:
        now, later = train_counts(
            source,
            None,
            test_fraction=float(evals.get("test_fraction", 0.25)),
            seed=int(loop.get("seed", 0)),
        )
    except (BadInput, OSError, ValueError):
        return out
    if later == train:
        return out
    out |= {
        "next_train": later,
        "next_power": round(power.power_at(later, scope=scope, few_evals=few), 3),
        "new_evals": later - train,
        "line": (
            f"{power.line(train, later, what='train evals in this run', scope=scope, few_evals=few)} on the next run, "
            f"with the evals {source} holds now"
            + (" and its pending candidates" if later != now else "")
            + f" (`optimizer run {source} --from <this run>`)"
        ),
    }
    return out


def resume_note(ws_root: Path, run: Run, settings: JsonObject) -> str | None:
    """Said on resume when the skill folder's evals grew since the run began: the run goes on
    with the split it started with."""
    info = for_run(run, settings)
    if not info or not info["next_train"]:
        return None
    source = run.skill_dir
    return (
        f"note: {source}/evals now gives {info['next_train']} train evals, this run keeps its "
        f"{info['train']} (a running run's split never changes); start the next run with "
        f"`optimizer run {source} --from {ws_root}` to use them "
        f"(power to find +{info['effect']:.2f}: {info['power']:.0%} now, {info['next_power']:.0%} then)."
    )
