"""The simulated analyzer: why a version won, read from the two skills' words and the failures the
gradings show, and what to fix next, in sentences a person would write. Never reads the world's
hidden causes (which habit an instruction switches on), as a real analyzer cannot."""

from __future__ import annotations

import random
from typing import Any

from optimizer.sim.instruction import instruction_for
from optimizer.sim.judges import Section, failures, parse_files, plain_lines
from optimizer.sim.latent import topic_of
from optimizer.sim.meaning import concept, plain_words
from optimizer.sim.text import bullet_text, bullets, snippets, split_front_matter
from optimizer.words import plural


def _skill_bullets(raw: str | None) -> list[str]:
    files = parse_files(raw)
    main = next((f for f in files if f["path"].endswith("SKILL.md")), files[0] if files else None)
    if main is None:
        return []
    return [bullet_text(b) for b in bullets(split_front_matter(main["content"])[1])]


def _effect(line: str) -> str:
    """What an instruction asks the agent to put in its answer, read from its words alone."""
    items = snippets(line)
    if items:
        return f"it makes the agent give {', '.join(f'`{i}`' for i in items[:3])}"
    said = sorted(topic_of(line))[:4]
    if said:
        return f"it asks the agent for {', '.join(_as_written(line, said))}"
    return "it asks for nothing the graders check"


def _as_written(line: str, read: list[str]) -> list[str]:
    """The line's own words for the concepts the world read in it ("advanced", not "advanc"):
    an analyzer quotes the skill, never the reader's stems."""
    written: dict[str, str] = {}
    for word in plain_words(line):
        written.setdefault(concept(word), word.lower())
    return [written.get(c, c) for c in read]


def _suggestion(text: str, count: int, rank: int, rng: random.Random, knobs: Any) -> dict:
    """The fix for one failure, from its words as the gradings show them (never its hidden
    cause): at the proposer's rate of being right, an instruction that asks for what the
    expectation checks, without one eval's values; else the failure restated."""
    fix = instruction_for(text) if rng.random() < knobs.proposal_quality else None
    edit = (
        f'Add an instruction: "{fix[2:]}"'
        if fix is not None
        else f"Add an explicit instruction: {text}"
    )
    return {
        "priority": "high" if rank == 0 or count >= 2 else "medium",
        "category": "instructions",
        "suggestion": edit,
        "expected_impact": f"Runs that failed this expectation ({plural(count, 'time')}) would "
        "meet it.",
    }


def analyze(get: Section, rng: random.Random, knobs: Any) -> dict:
    winner, loser = _skill_bullets(get("winner_skill")), _skill_bullets(get("loser_skill"))
    only_winner = [b for b in winner if b not in loser]
    only_loser = [b for b in loser if b not in winner]
    failed = sorted(failures(get("failed_expectations")), key=lambda f: -f[1])
    suggestions = [
        _suggestion(text, count, k, rng, knobs) for k, (text, count, _) in enumerate(failed[:3])
    ]
    repeated = plain_lines(get("repeated_work") or "")
    if repeated:
        suggestions.append(
            {
                "priority": "medium",
                "category": "tools",
                "suggestion": f"Bundle the step every run repeats as a script in scripts/: {repeated[0]}",
                "expected_impact": "Fewer turns and tokens per run; the step is done the same way each time.",
            }
        )
    if len(winner) > 10:
        suggestions.append(
            {
                "priority": "low",
                "category": "structure",
                "suggestion": "Merge or drop instructions: long lists are followed less reliably.",
                "expected_impact": "Each remaining instruction is followed more often.",
            }
        )
    if not suggestions:
        suggestions.append(
            {
                "priority": "low",
                "category": "examples",
                "suggestion": "Add a short example of a complete answer.",
                "expected_impact": "Small: the current version already meets its expectations.",
            }
        )
    comparisons = (get("comparisons") or "").strip()
    return {
        "comparison_summary": {
            "winner": "A",
            "winner_skill": "winner_skill",
            "loser_skill": "loser_skill",
            # The tally sentence, as a reader would sum it up; never the tagged entries below it.
            "comparator_reasoning": comparisons.split("\n", 1)[0].split("<", 1)[0].strip()[:300]
            or "No comparator reasoning given.",
        },
        "winner_strengths": [f'It adds "{b}": {_effect(b)}.' for b in only_winner[:3]]
        or ["Same instructions, luckier runs"],
        "loser_weaknesses": [f'It has "{b}": {_effect(b)}.' for b in only_loser[:2]]
        + [f'Its runs still fail "{t}".' for t, _, _ in failed[:2]]
        or ["No clear weakness"],
        "instruction_following": {
            "winner": {"score": 8 if winner else 5, "issues": []},
            "loser": {
                "score": 6 if loser else 4,
                "issues": [f"Missed: {t}" for t, _, _ in failed[:3]],
            },
        },
        "improvement_suggestions": suggestions,
        "transcript_insights": {
            "winner_execution_pattern": f"Read skill -> followed {len(winner)} instruction(s) -> wrote the output",
            "loser_execution_pattern": f"Read skill -> followed {len(loser)} instruction(s) -> wrote the output",
        },
    }
