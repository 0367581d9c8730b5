"""`optimizer evals mine --provider`: a model rewrites the heuristic drafts' expected outputs and
expectations. Only redacted drafts are sent; a failed call keeps the heuristic drafts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from optimizer.config import Settings
from optimizer.grow import checks
from optimizer.inputs import redact
from optimizer.inputs.skill import load_skill
from optimizer.model.prompts import load_prompt
from optimizer.schemas import Candidate
from optimizer.tags import data, tag

log = structlog.get_logger()
ROLE = "eval_drafter"
TOOL = "submit_eval_drafts"


def bullet_lines(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) or "(none)"


class Drafted(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    expected_output: str = Field(min_length=1)
    expectations: list[str] = Field(min_length=1, max_length=8)


class DraftAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    drafts: list[Drafted]


def request_text(name: str, description: str, drafts: list[Candidate]) -> str:
    """The user message: redacted once more here, so no caller can send an unredacted draft."""
    entries = []
    for c in sorted(drafts, key=lambda c: c.id):
        parts = [
            data("prompt", c.eval.prompt),
            data("files", bullet_lines(c.eval.files)),
            data("outputs", bullet_lines(c.signals.outputs)),
            data("corrections", bullet_lines(c.signals.corrections)),
            data("follow_ups", bullet_lines(c.signals.follow_ups)),
            data("errors", bullet_lines(c.signals.errors)),
            data("heuristic_expectations", bullet_lines(c.eval.expectations)),
        ]
        entries.append(tag("draft", "\n".join(parts), id=c.id))
    text = "\n\n".join(
        [
            tag("skill", f"name: {name}\ndescription: {description}"),
            tag("drafts", "\n\n".join(entries)),
        ]
    )
    return redact.text(text)


def refiner(settings: Settings, skill_dir: Path) -> Callable[[list[Candidate]], list[Candidate]]:
    """A callable for grow.mine: one model call for all drafts, through the ledger (and log) of
    runs/evals-mine/<skill>/, as `execute` keeps runs/execute/: never inside the skill folder,
    whose evals/ a run copies."""
    skill = load_skill(skill_dir)

    def refine(drafts: list[Candidate]) -> list[Candidate]:
        from optimizer.model.session import open_session

        with open_session(
            settings, Path("runs") / "evals-mine" / skill.name, console=False
        ) as session:
            return asyncio.run(
                _ask(session.client, settings, skill.name, skill.description, drafts)
            )

    return refine


async def ask_once(
    client,
    settings: Settings,
    role: str,
    tool: str,
    schema: type[BaseModel],
    text: str,
    failed: str,
) -> Any:
    """One structured answer of a grow role (its prompt file is named for it), or None when the
    call or its answer failed: the failure is logged with its secrets masked, and the caller keeps
    what it had (`failed`: the log event that says so). The client is closed either way."""
    from optimizer.model.errors import ModelCallFailed
    from optimizer.model.structured import StructuredAnswerError

    try:
        return await client.structured(
            role,
            system=load_prompt(role).render(),
            messages=[{"role": "user", "content": text}],
            schema=schema,
            tool_name=tool,
            model=settings.models.analyzer,
        )
    except (StructuredAnswerError, ModelCallFailed) as exc:
        log.warning(failed, error=redact.text(str(exc))[:300])
        return None
    finally:
        await client.aclose()


async def _ask(
    client, settings: Settings, name: str, description: str, drafts: list[Candidate]
) -> list[Candidate]:
    text = request_text(name, description, drafts)
    answer = await ask_once(
        client, settings, ROLE, TOOL, DraftAnswer, text, "evals.drafting_failed"
    )
    if answer is None:
        return drafts
    by_id = {d.id: d for d in answer.drafts}
    out = []
    for c in drafts:
        got = by_id.get(c.id)
        if got is None:
            out.append(c)
            continue
        # A check that cannot fail, or is built around a masked value, is dropped (or cut to what
        # it says before the value); with none left the heuristic checks stay. A limit the user
        # stated that the model left out is kept: the user's own correction.
        said = [checks.unmasked(redact.text(e)) for e in got.expectations]
        kept = [e for e in said if e is not None and checks.checkable(e)]
        if kept:
            kept += [
                e
                for e in c.eval.expectations
                if checks.limit(e) and not any(checks.same_limit(e, k) for k in kept)
            ]
        new_eval = c.eval.model_copy(
            update={
                "expected_output": redact.text(got.expected_output),
                "expectations": kept or c.eval.expectations,
            }
        )
        out.append(
            c.model_copy(
                update={"eval": new_eval, "drafted_by": f"model {settings.models.analyzer}"}
            )
        )
    return out
