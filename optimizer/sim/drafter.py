"""The simulated eval drafter (`optimizer evals mine --provider sim`): turns each draft's corrections
and outputs into checks, as the prompt asks; and the simulated rewriter (`evals suggest
--provider sim`): a vague expectation said as the concrete values its task names. Never invents
what the request does not say."""

from __future__ import annotations

import re

from optimizer.sim.text import asked_tool, first_user_text
from optimizer.tags import parse_tags

TOOL = "submit_eval_drafts"
REWRITE_TOOL = "submit_expectation_rewrites"
# What a task names that an output either states or not: a quoted or code value, a number with its
# word, a version, a capitalised name inside a sentence.
_VALUE = re.compile(
    r"`[^`]+`|\"[^\"]+\"|(?<=[a-z,;:] )[A-Z][\w-]*(?: [A-Z][\w-]*)*(?: \d+\b)?"
    r"|\bv?\d+(?:[.:]\d+)*[A-Za-z]*(?: [a-z]{3,}s\b)?"
)
_VERB = re.compile(r"\s+(?:is|are|was|were|has|have|reads|sounds|looks|feels)\b")
_LIMIT = re.compile(
    r"\b(?P<how>under|below|less than|fewer than|at most|no more than|within|at least|more than|"
    r"over)\s+(?P<n>\d+)\s+(?P<unit>words?|lines?|sentences?|bullets?|paragraphs?|characters?)\b",
    re.IGNORECASE,
)


def handles(body: dict) -> bool:
    return asked_tool(body) in (TOOL, REWRITE_TOOL)


def _items(section: str, name: str) -> list[str]:
    found = parse_tags(section, name)
    text = found[0][1] if found else ""
    return [line[2:].strip() for line in text.splitlines() if line.startswith("- ")]


def _check(correction: str) -> str:
    """A correction as a model would write its check: with its number when it states a limit."""
    found = _LIMIT.search(correction)
    if found is None:
        return f"The output already reflects this correction: {correction}"
    bound = "at least" if found["how"].lower() in ("at least", "more than", "over") else "at most"
    return f"The answer is {bound} {found['n']} {found['unit'].lower()}"


def answer(body: dict) -> dict:
    drafts = []
    for attrs, section in parse_tags(first_user_text(body), "draft"):
        outputs = _items(section, "outputs")
        checks = [_check(c) for c in _items(section, "corrections")]
        checks += [f"`{o}` exists and is not empty" for o in outputs]
        checks = checks or _items(section, "heuristic_expectations")
        if not checks:
            continue  # nothing a wrong answer would fail: left out, as the prompt asks
        said = f"writes {', '.join(outputs)}" if outputs else "answers the task"
        drafts.append(
            {
                "id": attrs.get("id", ""),
                "expected_output": f"A result that {said}.",
                "expectations": checks[:8],
            }
        )
    return {"drafts": drafts}


def _section(section: str, name: str) -> str:
    found = parse_tags(section, name)
    return found[0][1].strip() if found else ""


def rewrites(body: dict) -> dict:
    """Each expectation as its subject naming up to three values of its task; none without."""
    out = []
    for attrs, section in parse_tags(first_user_text(body), "expectation"):
        text, task = _section(section, "text"), _section(section, "eval_prompt")
        values = [v.strip() for v in _VALUE.findall(task) if v.strip() not in text][:3]
        verb = _VERB.search(text)
        if not values or verb is None:
            continue
        named = values[0] if len(values) == 1 else f"{', '.join(values[:-1])} and {values[-1]}"
        subject = text[: verb.start()]
        said = "name" if subject.endswith("s") and not subject.endswith("ss") else "names"
        out.append({"id": attrs.get("id", ""), "expectation": f"{subject} {said} {named}"})
    return {"rewrites": out}


def reply(body: dict, uid: str) -> tuple[list, str]:
    rewriting = asked_tool(body) == REWRITE_TOOL
    block = {
        "type": "tool_use",
        "id": f"toolu_sim_{uid[:16]}_0",
        "name": REWRITE_TOOL if rewriting else TOOL,
        "input": rewrites(body) if rewriting else answer(body),
    }
    return [block], "tool_use"
