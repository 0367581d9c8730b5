"""The candidates as the review page shows them, and its accept / edit / reject, on the skill folder a
run was started from. Never touches the run folder: a running run's evals and split stay as they were."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from optimizer.config import Settings
from optimizer.decide import power
from optimizer.errors import BadInput
from optimizer.grow import candidates
from optimizer.inputs.skill import load_skill
from optimizer.inputs.validate import train_counts
from optimizer.schemas import JsonObject

EDITABLE = ("name", "prompt", "expected_output", "files", "expectations")


class Listing(TypedDict, total=False):
    """The review page's data: the candidates and the power line, or why there are none."""

    available: bool
    why: str
    skill_dir: str
    file: str
    candidates: list[JsonObject]  # schemas.Candidate, as JSON
    power: str


def _settings(run_settings: JsonObject) -> Settings:
    tree: Mapping[str, Any] = run_settings  # as the run recorded them, read leniently
    loop, evals = tree.get("loop") or {}, tree.get("evals") or {}
    return Settings.model_validate(
        {
            "loop": {"seed": loop.get("seed", 0)},
            "evals": {"test_fraction": evals.get("test_fraction", 0.25)},
        }
    )


def listing(skill_dir: Path | None, run_settings: JsonObject) -> Listing:
    """Every candidate (pending first, then decided, each in file order) and the power line."""
    if skill_dir is None or not skill_dir.is_dir():
        return {
            "available": False,
            "why": f"the run's skill folder {skill_dir} is not there any more",
        }
    name = load_skill(skill_dir).name
    data = candidates.load(skill_dir, name)
    settings = _settings(run_settings)
    now, later = train_counts(
        skill_dir, None, test_fraction=settings.evals.test_fraction, seed=settings.loop.seed
    )
    ordered = [*candidates.pending(data), *(c for c in data.candidates if c.status != "pending")]
    return {
        "available": True,
        "skill_dir": str(skill_dir),
        "file": str(candidates.path_of(skill_dir)),
        "candidates": [c.model_dump(mode="json") for c in ordered],
        "power": power.line(
            now, later, scope=settings.selection.scope, few_evals=settings.selection.few_evals
        )
        + (" once the pending candidates are accepted" if later != now else ""),
    }


def act(skill_dir: Path | None, run_settings: JsonObject, action: str, body: JsonObject) -> Listing:
    """accept (with the page's edits applied first), edit, or reject one candidate; the new listing."""
    if skill_dir is None or not skill_dir.is_dir():
        raise BadInput(
            f"the run's skill folder {skill_dir} is not there any more; nothing to change."
        )
    cid = body.get("id")
    if not isinstance(cid, str):
        raise ValueError("send {id: text, eval: {...}}")
    name = load_skill(skill_dir).name
    edits = body.get("eval") or {}
    if not isinstance(edits, dict) or set(edits) - set(EDITABLE):
        raise ValueError(f"eval may change only {', '.join(EDITABLE)}")
    if action in ("accept", "edit") and edits:
        current = next(
            (c for c in candidates.load(skill_dir, name).candidates if c.id == cid), None
        )
        if (
            current is not None
            and current.status == "pending"
            and any(getattr(current.eval, k) != v for k, v in edits.items())
        ):
            candidates.edit(skill_dir, name, cid, edits)
    if action == "accept":
        candidates.accept(skill_dir, name, cid, _settings(run_settings))
    elif action == "reject":
        candidates.reject(skill_dir, name, cid)
    elif action != "edit":
        raise ValueError(f"unknown action {action!r}")
    return listing(skill_dir, run_settings)
