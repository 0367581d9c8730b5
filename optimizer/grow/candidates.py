"""evals/candidates.json: drafted evals waiting for review, and what accepting one does to evals.json
(append in the file's own dialect, validate, place by hash). Never write evals.json unvalidated."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optimizer.config import Settings
from optimizer.errors import BadInput
from optimizer.inputs import placement
from optimizer.inputs.evals import EVALS_FILE, load_evals
from optimizer.schemas import (
    Candidate,
    CandidateEval,
    CandidatesFile,
    Json,
    JsonObject,
    detect_evals_dialect,
)
from optimizer.store.db import now
from optimizer.store.files import write_json, write_text


def path_of(skill_dir: Path) -> Path:
    return Path(skill_dir) / "evals" / placement.CANDIDATES_FILE


def candidate_id(*parts: str) -> str:
    """A stable id from what the candidate is about, so that mining twice adds nothing twice."""
    return "c-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def load(skill_dir: Path, skill_name: str) -> CandidatesFile:
    return placement.read_candidates(path_of(skill_dir)) or CandidatesFile(skill_name=skill_name)


def save(skill_dir: Path, data: CandidatesFile) -> Path:
    target = path_of(skill_dir)
    write_json(target, CandidatesFile.model_validate(data.model_dump(mode="json")))
    return target


def merge(current: CandidatesFile, found: list[Candidate]) -> tuple[CandidatesFile, int]:
    """Add the candidates not already in the file (by id), in the order drafted (sessions by file
    path, then by time in the file; suggestions in the aggregate's order); a reviewed one is never
    reopened."""
    known = {c.id for c in current.candidates}
    new: list[Candidate] = []
    for c in found:
        if c.id not in known:
            known.add(c.id)
            new.append(c)
    return current.model_copy(update={"candidates": [*current.candidates, *new]}), len(new)


def pending(data: CandidatesFile) -> list[Candidate]:
    return [c for c in data.candidates if c.status == "pending"]


def _find(data: CandidatesFile, cid: str) -> Candidate:
    for c in data.candidates:
        if c.id == cid:
            return c
    raise BadInput(
        f"candidates.json has no candidate '{cid}'; `optimizer evals review` lists them."
    )


def _replace(data: CandidatesFile, cand: Candidate) -> CandidatesFile:
    return data.model_copy(
        update={"candidates": [cand if c.id == cand.id else c for c in data.candidates]}
    )


def edit(skill_dir: Path, skill_name: str, cid: str, changes: JsonObject) -> Candidate:
    """The user's edit of a pending candidate's eval (prompt, expected_output, expectations, ...)."""
    data = load(skill_dir, skill_name)
    cand = _find(data, cid)
    if cand.status != "pending":
        raise BadInput(
            f"candidate {cid} is already {cand.status}; only a pending one can be edited."
        )
    merged = {**cand.eval.model_dump(), **changes}
    try:
        new_eval = CandidateEval.model_validate(merged)
    except ValueError as exc:
        raise BadInput(
            f"candidate {cid}: the edit is not a valid eval ({str(exc).splitlines()[0]})."
        ) from None
    cand = cand.model_copy(update={"eval": new_eval})
    save(skill_dir, _replace(data, cand))
    return cand


def reject(skill_dir: Path, skill_name: str, cid: str) -> Candidate:
    data = load(skill_dir, skill_name)
    cand = _find(data, cid).model_copy(update={"status": "rejected", "decided_at": now()})
    save(skill_dir, _replace(data, cand))
    return cand


@dataclass(frozen=True)
class Accepted:
    candidate: Candidate
    change: (
        str  # what evals.json gained or lost, in one line: "eval 5: expectation 2 rewritten: ..."
    )


def accept(skill_dir: Path, skill_name: str, cid: str, settings: Settings) -> Accepted:
    """Apply one pending candidate to evals.json (validated as a whole before it replaces the file),
    then mark it accepted with the id and split it got."""
    skill_dir = Path(skill_dir)
    data = load(skill_dir, skill_name)
    cand = _find(data, cid)
    if cand.status != "pending":
        raise BadInput(f"candidate {cid} is already {cand.status}; nothing to accept.")
    if cand.kind != "drop" and not any(e.strip() for e in cand.eval.expectations):
        raise BadInput(
            f"candidate {cid} has no expectation yet; write one a wrong answer would fail "
            f"(`optimizer evals review {skill_dir}`, then [e]dit) and accept it then."
        )
    source = skill_dir / EVALS_FILE
    load_evals(
        skill_dir
    )  # a missing or broken evals.json is the user's to fix first, in one sentence
    raw = json.loads(source.read_text(encoding="utf-8-sig"))
    # An id once given is never given again, not even after its eval was dropped: runs, feedback
    # and reports name evals by id.
    used = {i for c in data.candidates for i in (c.eval_id, c.target_eval_id) if i is not None}
    grown, eval_id, change = _applied(raw, cand, max(used, default=0))
    text = json.dumps(grown, indent=2, ensure_ascii=False) + "\n"
    _check(skill_dir, source, text)
    side = None
    if cand.kind == "new_eval":
        side = placement.side(
            cand.eval.prompt, test_fraction=settings.evals.test_fraction, seed=settings.loop.seed
        )
        change += f" ({side})"
    cand = cand.model_copy(
        update={"status": "accepted", "decided_at": now(), "eval_id": eval_id, "split": side}
    )
    # candidates.json first: should the second write fail, the eval is not in evals.json and the
    # candidate says accepted with an id no eval has, which placement ignores; never the reverse
    # (an added eval whose record is missing would join the seeded split and move the others).
    save(skill_dir, _replace(data, cand))
    write_text(source, text)
    return Accepted(cand, change)


def _check(skill_dir: Path, source: Path, text: str) -> None:
    """Load the would-be file with the same checks as `validate`, from a temp file beside it."""
    trial = source.with_name(f".{source.name}.candidate")
    write_text(trial, text, durable=False)
    try:
        load_evals(skill_dir, trial)
    except BadInput as exc:
        raise BadInput(*(p.replace(str(trial), str(source)) for p in exc.problems)) from None
    finally:
        trial.unlink(missing_ok=True)


def _applied(
    raw: dict[str, Any], cand: Candidate, used: int
) -> tuple[dict[str, Json], int | None, str]:
    evals = [e for e in raw.get("evals", []) if isinstance(e, dict)]
    if cand.kind == "new_eval":
        eval_id = max([used, *(e["id"] for e in evals if isinstance(e.get("id"), int))]) + 1
        entry = in_dialect(detect_evals_dialect(raw), eval_id, cand.eval)
        return {**raw, "evals": [*raw["evals"], entry]}, eval_id, f"added as eval {eval_id}"
    target = next((e for e in evals if e.get("id") == cand.target_eval_id), None)
    if target is None:
        raise BadInput(
            f"candidate {cand.id}: evals.json has no eval {cand.target_eval_id} any more; "
            "reject the candidate."
        )
    if cand.kind == "drop":
        kept = [e for e in raw["evals"] if e is not target]
        return {**raw, "evals": kept}, cand.target_eval_id, f"eval {cand.target_eval_id} dropped"
    new_text = cand.eval.expectations[0]
    if cand.kind == "add_check":
        entry = _added(target, new_text)
        grown = [entry if e is target else e for e in raw["evals"]]
        where = f"eval {cand.target_eval_id}: expectation {len(_texts(entry))} added"
        return {**raw, "evals": grown}, cand.target_eval_id, f"{where}: '{new_text}'"
    if cand.replaces not in _texts(target):
        raise BadInput(
            f"candidate {cand.id}: eval {cand.target_eval_id} has no expectation "
            f"{cand.replaces!r} any more; reject the candidate."
        )
    # The same words in another eval are the same vague check: rewritten there too, and said so.
    hits = [e for e in evals if cand.replaces in _texts(e)]
    places = [(e.get("id"), _texts(e).index(cand.replaces) + 1) for e in hits]
    grown = [
        _rewritten(e, cand.replaces or "", new_text) if any(e is h for h in hits) else e
        for e in raw["evals"]
    ]
    where = (
        f"eval {places[0][0]}: expectation {places[0][1]}"
        if len(places) == 1
        else "; ".join(f"eval {i}: expectation {n}" for i, n in places)
    )
    change = f"{where} rewritten: '{cand.replaces}' → '{new_text}'"
    return {**raw, "evals": grown}, cand.target_eval_id, change


def _texts(entry: dict[str, Any]) -> list[str]:
    if "assertions" in entry:
        return [str(a.get("text")) for a in entry["assertions"] if isinstance(a, dict)]
    return [str(t) for t in entry.get("expectations") or []]


def _added(entry: dict[str, Any], new_text: str) -> dict[str, Json]:
    if "assertions" in entry:
        taken = {str(a.get("id")) for a in entry["assertions"] if isinstance(a, dict)}
        new_id = next(
            f"A{i}" for i in range(len(taken) + 1, len(taken) + 1000) if f"A{i}" not in taken
        )
        return {**entry, "assertions": [*entry["assertions"], {"id": new_id, "text": new_text}]}
    return {**entry, "expectations": [*(entry.get("expectations") or []), new_text]}


def _rewritten(entry: dict[str, Any], old: str, new_text: str) -> dict[str, Json]:
    if "assertions" in entry:
        items = entry["assertions"]
        hit = next(a for a in items if isinstance(a, dict) and a.get("text") == old)
        return {**entry, "assertions": [{**a, "text": new_text} if a is hit else a for a in items]}
    items = list(entry.get("expectations") or [])
    items[items.index(old)] = new_text
    return {**entry, "expectations": items}


def in_dialect(dialect: str, eval_id: int, ev: CandidateEval) -> dict[str, Json]:
    """The eval as the file's dialect writes one: seed 002 strings, seed 001 {id, text}, seed 004
    with a name."""
    entry: dict[str, Json] = {"id": eval_id}
    if dialect == "extended":
        entry["name"] = ev.name or f"eval-{eval_id}"
    entry |= {"prompt": ev.prompt, "expected_output": ev.expected_output, "files": list(ev.files)}
    if dialect == "assertions":
        entry["assertions"] = [{"id": f"A{i}", "text": t} for i, t in enumerate(ev.expectations, 1)]
    else:
        entry["expectations"] = list(ev.expectations)
    return entry
