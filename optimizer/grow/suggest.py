"""`optimizer evals suggest RUN_DIR`: a run's eval feedback (eval_feedback_aggregate.json, the
analyst's notes in it) and the evals themselves turned into candidates. Never edits evals.json."""

from __future__ import annotations

import json
import re
from difflib import SequenceMatcher
from pathlib import Path

from pydantic import ValidationError

from optimizer.errors import BadInput
from optimizer.grow.candidates import candidate_id
from optimizer.inputs import redact
from optimizer.inputs.evals import Eval, EvalSet, load_evals
from optimizer.schemas import (
    AggregateSuggestion,
    Candidate,
    CandidateEval,
    CandidateOrigin,
    EvalFeedbackAggregate,
)
from optimizer.store import readonly
from optimizer.store.files import Workspace

_EVAL_NAMED = re.compile(r"\bEval (\d+)\b")
_VAGUE = re.compile(
    r"discriminat|vague|would (also )?pass|passes in every run|too easy|always pass", re.IGNORECASE
)
_NO_CHECK = re.compile(
    r"^(eval \d+:\s*)?(no (assertion|expectation|eval|check)s? (checks?|verif\w*|covers?)\s*"
    r"(whether|that|if)?\s*)?",
    re.IGNORECASE,
)
SAME_TASK = (
    0.9  # prompts this alike (difflib ratio, whitespace folded) with the same files: one task
)


def from_run(run_dir: Path, skill: Path | None) -> tuple[Path, list[Candidate]]:
    """(the skill folder, the suggestions in the aggregate's order, then the duplicates)."""
    ws = Workspace(run_dir)
    skill_dir = skill or _skill_of(ws)
    path = ws.feedback_aggregate
    if not path.is_file():
        raise BadInput(
            f"{path}: missing; the run writes it after its first iteration, so let the "
            f"run go on (`optimizer resume {run_dir}`) and suggest again."
        )
    try:
        aggregate = EvalFeedbackAggregate.model_validate(
            json.loads(path.read_text(encoding="utf-8"))
        )
    except (ValueError, ValidationError) as exc:
        raise BadInput(
            f"{path}: not a valid eval_feedback_aggregate.json "
            f"({str(exc).splitlines()[0]}); `optimizer check-artifact {path}` says more."
        ) from None
    evalset = load_evals(skill_dir)
    origin = CandidateOrigin(source="run", file=str(path), time=_started(ws))
    train = _train_of(ws, evalset)
    found: list[Candidate] = []
    for item in aggregate.suggestions:
        found += _from_suggestion(item, evalset, origin, train)
    found += duplicates(evalset, origin)
    return skill_dir, found


def _skill_of(ws: Workspace) -> Path:
    row = readonly.run_row(ws.state_db) if ws.state_db.is_file() else None
    folder = Path(row["skill_dir"]) if row and row.get("skill_dir") else None
    if folder is None or not folder.is_dir():
        raise BadInput(
            f"{ws.root}: the run does not name a skill folder that still exists; pass "
            "--skill SKILL_DIR."
        )
    return folder


def _train_of(ws: Workspace, evalset: EvalSet) -> list[int]:
    """The run's train evals that the skill folder still holds (all of them without a state.db)."""
    row = readonly.run_row(ws.state_db) if ws.state_db.is_file() else None
    try:
        train = json.loads((row or {}).get("split_json") or "{}").get("train")
    except ValueError:
        train = None
    ids = sorted(evalset.ids)
    return [i for i in ids if i in train] if isinstance(train, list) else ids


def _started(ws: Workspace) -> str:
    row = readonly.run_row(ws.state_db) if ws.state_db.is_file() else None
    return str((row or {}).get("started_at") or "")


def _targets(item: AggregateSuggestion, evalset: EvalSet) -> list[Eval]:
    named = _EVAL_NAMED.search(item.reason)
    carrying = [e for e in evalset.evals if item.assertion in e.expectations]
    if named:
        carrying = [e for e in carrying if e.id == int(named.group(1))]
    return sorted(carrying, key=lambda e: e.id)


def _from_suggestion(
    item: AggregateSuggestion, evalset: EvalSet, origin: CandidateOrigin, train: list[int]
) -> list[Candidate]:
    reason, action = redact.text(item.reason), redact.text(item.action)
    if item.assertion is None:
        # A failure mode no expectation checks; the analyst's own notes without one (errors,
        # a skill that hurts) are about runs, not about a missing check.
        if getattr(item, "source", None) == "analyst" or not train:
            return []
        check = _NO_CHECK.sub("", reason).strip().rstrip(".")
        check = check[:1].upper() + check[1:]
        named = _EVAL_NAMED.search(reason)
        # A check on a train eval where the runs showed it, not a twin of that eval: a twin placed
        # by its own hash could put one task on both sides of the split.
        base = evalset.by_id(
            int(named.group(1)) if named and int(named.group(1)) in train else train[0]
        )
        return [
            Candidate(
                id=candidate_id("run", "add_check", reason),
                kind="add_check",
                origin=origin,
                target_eval_id=base.id,
                eval=CandidateEval(name=base.name, expectations=[check]),
                reason=f"seen {item.frequency} time(s), and no expectation checks it: {reason}",
            )
        ]
    out = []
    for target in _targets(item, evalset):
        assertion = redact.text(item.assertion)
        vague = bool(_VAGUE.search(reason))
        sharper = (
            f"{assertion}, and it must fail on an output that only looks right: {_clip(reason)}"
            if vague
            else f"{assertion} (checked the same way in every run: {_clip(reason)})"
        )
        out.append(
            Candidate(
                id=candidate_id("run", "sharpen", str(target.id), item.assertion, reason),
                kind="sharpen",
                origin=origin,
                target_eval_id=target.id,
                replaces=item.assertion,
                eval=CandidateEval(name=target.name, expectations=[sharper]),
                reason=f"seen {item.frequency} time(s): {reason} {action}".strip(),
            )
        )
    return out


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _folded(text: str) -> str:
    return " ".join(text.lower().split())


def duplicates(evalset: EvalSet, origin: CandidateOrigin) -> list[Candidate]:
    """The later of two evals that ask the same task of the same files: one to drop."""
    out: list[Candidate] = []
    ordered = sorted(evalset.evals, key=lambda e: e.id)
    dropped: set[int] = set()
    for i, first in enumerate(ordered):
        for later in ordered[i + 1 :]:
            if (
                later.id in dropped
                or first.id in dropped
                or sorted(first.files) != sorted(later.files)
            ):
                continue
            ratio = SequenceMatcher(None, _folded(first.prompt), _folded(later.prompt)).ratio()
            if ratio >= SAME_TASK:
                dropped.add(later.id)
                out.append(
                    Candidate(
                        id=candidate_id("run", "drop", str(later.id), later.prompt),
                        kind="drop",
                        origin=origin,
                        target_eval_id=later.id,
                        eval=CandidateEval(name=later.name, prompt=later.prompt),
                        reason=f"asks what eval {first.id} asks ({ratio:.0%} alike, same files); "
                        "a duplicate adds runs, not evidence",
                    )
                )
    return out
