"""`optimizer evals mine` and `suggest` end to end: find, draft, merge into evals/candidates.json.
Never writes evals.json (only an accepted candidate does) and never sends anything unasked."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import structlog

from optimizer.grow import candidates, checks, draft
from optimizer.inputs import sessions
from optimizer.inputs.skill import load_skill
from optimizer.schemas import Candidate

log = structlog.get_logger()


@dataclass(frozen=True)
class Mined:
    path: Path
    sessions: int
    uses: int
    added: int
    pending: int


def mine(
    skill_dir: Path,
    root: Path,
    since: datetime | None,
    *,
    refine: Callable[[list[Candidate]], list[Candidate]] | None = None,
) -> Mined:
    """Draft a candidate per use of the skill found under root; `refine`, when given, is a
    callable that rewrites the redacted drafts (a model, with --provider)."""
    name = load_skill(skill_dir).name
    uses = followed_up(sessions.mine(root, name, since))
    found = [draft.candidate(skill_dir, u) for u in uses]
    known = {c.id for c in candidates.load(skill_dir, name).candidates}
    fresh = [c for c in found if c.id not in known]
    if refine is not None and fresh:  # only what the file lacks: a reviewed draft is never re-sent
        found = refine(fresh)
    return _store(
        skill_dir,
        name,
        found,
        sessions=len({u.file for u in uses}),
        uses=len(uses),
        event="evals.mined",
    )


def followed_up(uses: list[sessions.Use]) -> list[sessions.Use]:
    """A use whose task only asks the answer before it to change ("keep it under 80 words"), in
    the same session, is that use's correction: the agent invoked the skill again to apply it,
    which the session file records as a use of its own."""
    out: list[sessions.Use] = []
    for use in uses:
        use = _with_its_request(use)
        before = out[-1] if out else None
        if before is not None and before.file == use.file and checks.asks_for_change(use.task):
            out[-1] = replace(before, later=[*before.later, use.task, *use.later])
            continue
        out.append(use)
    return out


def _with_its_request(use: sessions.Use) -> sessions.Use:
    """A task that only asks for a change, typed before the skill ran ("keep it under 10 lines"
    after "Summarise orders.csv"), is the request before it with that change: both are the task."""
    if not checks.asks_for_change(use.task):
        return use
    asked = [m for m in use.earlier if not checks.asks_for_change(m)]
    if not asked:
        return use
    at = max(i for i, m in enumerate(use.earlier) if m == asked[-1])
    task = "\n\n".join([*use.earlier[at:], use.task])
    return replace(use, task=task, earlier=use.earlier[:at])


def _store(
    skill_dir: Path, name: str, found: list[Candidate], *, sessions: int, uses: int, event: str
) -> Mined:
    data, added = candidates.merge(candidates.load(skill_dir, name), found)
    path = candidates.path_of(skill_dir)
    if added or path.exists():  # nothing found: no empty file in the user's skill folder
        candidates.save(skill_dir, data)
    waiting = len(candidates.pending(data))
    # Counts only: the texts stay in candidates.json, which the user reviews.
    log.info(event, sessions=sessions, uses=uses, added=added, pending=waiting)
    return Mined(path=path, sessions=sessions, uses=uses, added=added, pending=waiting)


def store_suggestions(skill_dir: Path, found: list[Candidate]) -> Mined:
    name = load_skill(skill_dir).name
    return _store(skill_dir, name, found, sessions=0, uses=0, event="evals.suggested")
