"""What the simulated agent writes: the content its switched-on behaviours produce (sim/latent.py),
never a sentence of the skill. The draws come in a fixed order, so a sample index is a
reproducible run."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from optimizer.sim.latent import (
    HABITS,
    Habit,
    World,
    attention,
    base_rate,
    capability,
    clauses,
    habits,
    read_instruction,
)
from optimizer.sim.text import bullet_text, facts, snippets, strip_snippets, words

INTRO = "This answer covers"  # the line a task-bound expectation is judged on


@dataclass
class Plan:
    on: list[Habit]
    items: list[str]


def subject(task: str) -> str:
    """The task's subject in a few of its own words, for the sentences sections hold."""
    found = [w for w in words(task) if not any(c.isdigit() for c in w)][:3]
    return " ".join(found) or "the request"


def plan(instructions: list[str], rng: random.Random, world: World) -> Plan:
    """Which behaviours this run switches on: each instruction is followed with its attention
    times its clarity; a negation that fires turns its behaviours off; any habit is also done
    untold at its base rate; a habit that is on comes out right at its capability."""
    wanted: dict[str, bool] = {}
    banned: set[str] = set()
    items: list[str] = []
    dropped: set[str] = set()
    for i, line in enumerate(instructions):
        fired = rng.random() < attention(world, i, len(instructions))
        for ask in (read_instruction(world, c) for c in clauses(bullet_text(line))):
            for habit, clarity in ask.habits:
                hit = rng.random() < clarity
                if ask.negative and fired and hit:
                    banned.add(habit.key)
                elif not ask.negative:
                    wanted[habit.key] = wanted.get(habit.key, False) or (fired and hit)
            if fired:
                (dropped.update if ask.negative else items.extend)(ask.items)
    on = []
    for habit in habits(world):
        # A skipped instruction leaves the agent where it was: it still does the habit untold at
        # its base rate, so naming a habit vaguely never makes it rarer.
        untold = rng.random() < base_rate(world, habit)
        told = wanted.get(habit.key, False) or untold
        right = rng.random() < capability(world, habit)
        if told and right and habit.key not in banned:
            on.append(habit)
    kept = [i for i in dict.fromkeys(items) if i not in dropped]
    return Plan(on, kept)


def compose_output(task: str, instructions: list[str], rng: random.Random, world: World) -> str:
    """The answer file: a title, a line on what it covers, the items it was told to give, and
    one section per habit that is on. The task's own values come with the figures habit."""
    chosen = [w for w in words(task) if rng.random() < 0.5]
    done = plan(instructions, rng, world)
    topic = subject(task)
    title = " ".join(task.replace("`", "").split()[:6]) or "Answer"
    lines = [f"# {title}", "", f"{INTRO} {', '.join(chosen) or 'the request'}.", ""]
    for item in done.items:
        lines += _item(item, topic)
    for habit in done.on:
        text = habit.text.format(topic=topic)
        lines += ["", habit.heading, text[:1].upper() + text[1:]]
        if habit is HABITS[0]:
            values = snippets(task) + facts(strip_snippets(task))
            lines += [f"- {v}" for v in values]
    return "\n".join(lines) + "\n"


def _item(item: str, topic: str) -> list[str]:
    """A named token rendered as content: a heading with its paragraph, a table with its rule, a
    label with its value, or a value on its own line."""
    if re.match(r"#+\s", item):
        return ["", item, f"What the inputs show on {topic} under this heading."]
    if item.startswith("|"):
        cells = item.count("|") - 1
        return ["", item, "|" + "---|" * max(1, cells)]
    if item.endswith(":"):
        return [f"{item} taken from the inputs"]
    return [f"- {item}, as found for {topic}"]
