"""The answer's text shaped as the simulated agent's plan asks (sim/compose.py): lists numbered,
the counts a skill or a task set kept (words, bullets, questions), named items and the task's
values written with what they are."""

from __future__ import annotations

import re

from optimizer.sim import inputs
from optimizer.sim.meaning import Count, measure

LIST_MARK = re.compile(r"^[ \t]*(?:[-*•]|\d+[.)])[ \t]+", re.M)  # a list entry's mark
MAX_ASKED = 50  # questions one answer writes, whatever a count asks


def numbered(text: str) -> str:
    """Every list numbered, each from 1."""
    lines, k = text.split("\n"), 0
    for i, line in enumerate(lines):
        mark = LIST_MARK.match(line)
        k = k + 1 if mark else 0
        if mark:
            lines[i] = f"{k}. {line[mark.end() :]}"
    return "\n".join(lines)


def carried(value: str, source: str) -> str:
    """A value with the words that say what it is, as the source states it ("revenue was $2.4M"):
    a figure copied without its label is no figure of anything."""
    at = source.find(value)
    if at < 0:
        return value
    before = re.split(r"[.;:,!?\n]|\band\b|\bwhile\b", source[:at])[-1].split()[-6:]
    return " ".join(before + [value]).strip()


def keep_counts(head: list[str], body: list[list[str]], asked: list[Count], topic: str) -> str:
    """The answer as written, then cut to the tightest word limit asked (second sentences first,
    then whole blocks from the end) and given the number of bullets asked."""
    text = "\n".join(head + [ln for block in body for ln in block]) + "\n"
    limits = [c.limit for c in asked if c.unit == "words" and c.op in ("<=", "<", "==")]
    if limits and measure(text, "words") > min(limits):
        body = [[_first_sentence(ln) for ln in block] for block in body]
        while body and measure("\n".join(head + sum(body, [])), "words") > min(limits):
            body.pop()
        text = "\n".join(head + sum(body, [])) + "\n"
    wanted = [c for c in asked if c.unit == "bullets"]
    if wanted:
        text = _bullets(text, wanted[0], topic)
    questions = [c for c in asked if c.unit == "questions"]
    if questions:
        text = _questions(text, questions, topic)
    return text


def _questions(text: str, wanted: list[Count], topic: str) -> str:
    """At least the questions asked (the fewest a range allows): missing ones are asked on the
    task's subject, as list entries."""
    low = max((c.n + (c.op == ">") for c in wanted if c.op in (">=", ">", "==")), default=0)
    lines = text.rstrip("\n").split("\n")
    k = 0
    while measure("\n".join(lines), "questions") < low and k < MAX_ASKED:
        k += 1
        lines.append(f"- What should {topic} settle first, point {k}?")
    return "\n".join(lines) + "\n"


def _first_sentence(line: str) -> str:
    return re.split(r"(?<=[.!?])\s+", line, maxsplit=1)[0]


def _bullets(text: str, want: Count, topic: str) -> str:
    """Exactly, at most or at least the bullets asked: extra bullets become plain lines, missing
    ones are points on the task's subject."""
    lines = text.rstrip("\n").split("\n")
    marks = [i for i, ln in enumerate(lines) if re.match(r"\s*(?:[-*]|\d+\.)\s+", ln)]
    have, target = len(marks), want.limit if want.op in ("<=", "<") else want.n
    if want.op in ("<=", "<", "==") and have > target:
        for i in marks[target:]:
            lines[i] = re.sub(r"^\s*(?:[-*]|\d+\.)\s+", "", lines[i])
    if want.op in (">=", ">", "==") and have < (want.n + (want.op == ">")):
        missing = want.n + (want.op == ">") - have
        lines += [f"- On {topic}, point {k + 1} of the {want.n} asked." for k in range(missing)]
    return "\n".join(lines) + "\n"


def item(item: str, topic: str, read: str = "") -> list[str]:
    """A named token rendered as content: a heading with its paragraph, a table with its rule, a
    label with its value, or a value on its own line."""
    if re.match(r"#+\s", item):
        return ["", item, f"What the inputs show on {topic} under this heading."]
    if item.startswith("|"):
        cells = item.count("|") - 1
        return ["", item, "|" + "---|" * max(1, cells)]
    if item.endswith(":"):
        return [f"{item} {inputs.label_value(item, read)}"]
    return [f"- {item}, as found for {topic}"]
