"""`optimizer evals suggest --provider`: a model rewrites the expectations no output could fail
("The update is helpful") into checks a wrong answer fails, from the eval's own task. Only
redacted text is sent; a failed call, or a rewrite that still cannot fail, leaves the expectation
to the user."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog
from pydantic import BaseModel, ConfigDict, Field

from optimizer.config import Settings
from optimizer.grow import checks
from optimizer.grow.drafting import ask_once, bullet_lines
from optimizer.inputs import redact
from optimizer.inputs.skill import load_skill
from optimizer.tags import data, tag

log = structlog.get_logger()
ROLE = "expectation_rewriter"
TOOL = "submit_expectation_rewrites"


@dataclass(frozen=True)
class Ask:
    """One expectation to rewrite, with what its eval asks and what the run said about it."""

    id: str
    text: str
    prompt: str
    expected_output: str
    others: list[str]
    reasons: list[str]


@dataclass(frozen=True)
class Rewriter:
    label: str  # who drafted the rewrites, as candidates.json's drafted_by says it
    call: Callable[[Path, list[Ask]], dict[str, str]]


class Rewritten(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    expectation: str = Field(min_length=1)


class RewriteAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rewrites: list[Rewritten]


def request_text(name: str, description: str, asks: list[Ask]) -> str:
    """The user message: redacted once more here, so no caller can send an unredacted text."""
    entries = [
        tag(
            "expectation",
            "\n".join(
                [
                    data("text", a.text),
                    data("eval_prompt", a.prompt),
                    data("expected_output", a.expected_output or "(none)"),
                    data("other_expectations", bullet_lines(a.others)),
                    data("what_the_run_said", bullet_lines(a.reasons)),
                ]
            ),
            id=a.id,
        )
        for a in asks
    ]
    text = "\n\n".join(
        [
            tag("skill", f"name: {name}\ndescription: {description}"),
            tag("expectations", "\n\n".join(entries)),
        ]
    )
    return redact.text(text)


def rewriter(settings: Settings) -> Rewriter:
    """One model call for all the expectations of a run, through the ledger (and log) of
    runs/evals-suggest/<skill>/: never inside the skill folder, whose evals/ a run copies."""

    def call(skill_dir: Path, asks: list[Ask]) -> dict[str, str]:
        from optimizer.model.session import open_session

        skill = load_skill(skill_dir)
        folder = Path("runs") / "evals-suggest" / skill.name
        with open_session(settings, folder, console=False) as session:
            return asyncio.run(_ask(session.client, settings, skill.name, skill.description, asks))

    return Rewriter(f"model {settings.models.analyzer}", call)


async def _ask(
    client, settings: Settings, name: str, description: str, asks: list[Ask]
) -> dict[str, str]:
    text = request_text(name, description, asks)
    answer = await ask_once(
        client, settings, ROLE, TOOL, RewriteAnswer, text, "evals.rewriting_failed"
    )
    if answer is None:
        return {}
    wanted = {a.id: a.text for a in asks}
    # A rewrite that still cannot fail, or that only repeats the text, is no rewrite.
    return {
        r.id: redact.text(r.expectation.strip())
        for r in answer.rewrites
        if r.id in wanted
        and checks.checkable(r.expectation)
        and r.expectation.strip() != wanted[r.id]
    }
