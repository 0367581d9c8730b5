"""What the simulated agent writes: the content its switched-on behaviours produce (sim/latent.py),
never a sentence of the skill. The draws come in a fixed order, so a sample index is a
reproducible run."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from optimizer.sim import inputs, shaping
from optimizer.sim.latent import (
    FOLLOW_MAX,
    HABITS,
    SPECIFIC_CAP,
    TASK_FOLLOW,
    Ask,
    Habit,
    World,
    attention,
    base_rate,
    capability,
    clauses,
    focus,
    habits,
    read_instruction,
)
from optimizer.sim.meaning import Count, concept, concepts, counts, identifiers, plain_words
from optimizer.sim.reading import asked_forms, denied_forms, is_sentence
from optimizer.sim.text import bullet_text, facts, snippets, strip_snippets, words

EXAMPLE = "\0example\0"  # marks a line of a fenced example: its shape, not an instruction
EXAMPLE_FENCES = ("", "md", "markdown", "text", "txt")
MAX_REFERENCES = 2  # of the skill's own files one task reads
EXAMPLE_FOLLOW = 0.8  # a followed example's shape is imitated this often
INTRO = "This answer covers"  # the line a specific expectation met untold is judged on
DONE = "as the task needs"  # ends a line that does what an instruction asked in its own words


@dataclass
class Plan:
    on: list[Habit]
    items: list[str]
    done: list[str] = field(default_factory=list)  # lines doing what specific instructions ask
    counts: list[Count] = field(default_factory=list)
    plain: set[str] = field(default_factory=set)  # forms ruled out: "no bullet points"
    shaped: set[str] = field(default_factory=set)  # forms asked for: "number the findings"


def instruction_lines(body: str) -> list[str]:
    """What the agent reads as instructions: every bullet, and every sentence of prose, outside
    code fences, headings and tables. Prose is read as much as bullets: an instruction costs
    attention however it is laid out. A fenced example is read as an example: its headings and
    its table's header are the shape the agent imitates (`EXAMPLE` lines)."""
    found: list[str] = []
    fence: str | None = None
    paragraph: list[str] = []
    for line in body.split("\n") + [""]:
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else stripped[3:].strip().lower()
            continue
        if fence is not None:
            if fence in EXAMPLE_FENCES and re.match(r"#{2,6}\s+\S|\|.*\|", stripped):
                found.append(f"{EXAMPLE}{stripped}")
            continue
        is_bullet = re.match(r"\s*(?:[-*]|\d+\.)\s+\S", line) is not None
        if not stripped or stripped.startswith(("#", "|", "<", "---")) or is_bullet:
            if paragraph:
                text = " ".join(paragraph)
                found += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`])", text) if s.strip()]
                paragraph = []
            if is_bullet:
                found.append(line)
            continue
        paragraph.append(stripped)
    return found


# A file of the skill's own, quoted or bare ("Our policy is in policy.md"); never SKILL.md itself
# or an output the skill names.
_REFERENCE = re.compile(r"(?<![\w/.-])`?((?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:md|txt))`?(?![\w])")
# A line that names a file for some tasks only: "For the Harbour Fog theme, see `themes/…`".
_CONDITION = re.compile(r"\b(?:for|when|whenever|if|only|unless)\b", re.I)


def references(body: str, task: str) -> list[str]:
    """The skill's own files the agent reads for this task (progressive disclosure): a file the
    skill names without a condition ("Our policy is in policy.md", "follow `style.md`") is read
    for every task; one named for some tasks only is read when its name, or the line that names
    it, speaks to the task ("Harbour Fog" in the task and in `themes/harbour-fog.md`); at most
    MAX_REFERENCES, in the skill's order."""
    wanted = concepts(task)
    found: list[str] = []
    for line in body.split("\n"):
        for m in _REFERENCE.finditer(line):
            path = m.group(1)
            if path.upper() == "SKILL.MD" or path.startswith("outputs/") or path in found:
                continue
            stem = concepts(re.sub(r"[/_.-]", " ", path.rsplit(".", 1)[0]))
            named = stem and len(stem & wanted) * 2 >= len(stem)
            always = _CONDITION.search(line[: m.start()]) is None
            if always or named or len(concepts(line) & wanted) >= 2:
                found.append(path)
    return found[:MAX_REFERENCES]


def subject(task: str) -> str:
    """The task's subject in a few of its own words, for the sentences sections hold."""
    found = [w for w in words(task) if not any(c.isdigit() for c in w)][:3]
    return " ".join(found) or "the request"


def plan(instructions: list[str], rng: random.Random, world: World, task: str = "") -> Plan:
    """Which behaviours this run switches on. Each line is followed with its attention, which
    every further line lowers; each behaviour it asks for is taken from the first line that asks
    for it, so asking ten times is asking once, and a line that is no sentence (a list of words)
    asks for nothing. A negation that fires turns its behaviours off; a hard limit (a count) is
    kept wherever it stands; a fenced example's headings are imitated. Any habit is also done
    untold at its base rate, and comes out right at its capability, less what the other sections
    take of the agent's focus."""
    # One rng drawn in this order (lines, task, habits): a sample index replays the same run.
    reading = _Reading()
    for i, line in enumerate(instructions):
        fired = rng.random() < attention(world, i, len(instructions))
        if line.startswith(EXAMPLE):  # a fenced example's heading or table header: its shape
            shape = line[len(EXAMPLE) :]
            if reading.first(("item", shape)) and fired and rng.random() < EXAMPLE_FOLLOW:
                reading.items.append(shape if shape.startswith("|") else _heading(shape))
            continue
        for clause in clauses(bullet_text(line)):
            if is_sentence(clause):  # a list of words asks for nothing
                _read_clause(reading, clause, fired, rng, world, task)
    _keep_task_limits(reading, task, rng)
    return _switch_on(reading, rng, world)


@dataclass
class _Reading:
    """What the skill's lines asked for so far, as `plan` reads them in order."""

    wanted: dict[str, bool] = field(default_factory=dict)  # habit: asked for, and followed
    banned: set[str] = field(default_factory=set)  # habits a followed negation turned off
    items: list[str] = field(default_factory=list)
    dropped: set[str] = field(default_factory=set)  # items a followed negation struck
    done: list[str] = field(default_factory=list)  # lines doing what specific instructions ask
    asked: list[Count] = field(default_factory=list)
    seen: set[object] = field(default_factory=set)  # what a line asked for already
    specifics: list[frozenset[str]] = field(default_factory=list)  # behaviours asked, any line
    plain: set[str] = field(default_factory=set)
    shaped: set[str] = field(default_factory=set)

    def first(self, key: object) -> bool:
        """Whether no earlier line asked for this; only the first asking counts."""
        new = key not in self.seen
        self.seen.add(key)
        return new


def _read_clause(
    reading: _Reading, clause: str, fired: bool, rng: random.Random, world: World, task: str
) -> None:
    """One sentence of a line: the habits it asks for or forbids and the hard limits it sets,
    whether its line fired or not; the items and specific behaviour it asks for, only if it did."""
    ask = read_instruction(world, clause)
    for habit, clarity in ask.habits:
        if not reading.first(("habit", habit.key, ask.negative)):
            continue
        hit = rng.random() < clarity
        if ask.negative and fired and hit:
            reading.banned.add(habit.key)
        elif not ask.negative:
            reading.wanted[habit.key] = fired and hit
    _keep_clause_limits(reading, ask, clause, rng)
    if fired:
        _follow(reading, ask, clause, rng, task)
        return
    # Not followed, yet asked: a later line that repeats it adds nothing (ten times is once).
    reading.seen.update(("item", item, ask.negative) for item in ask.items)
    if ask.specific:
        reading.specifics.append(ask.specific)


def _keep_clause_limits(reading: _Reading, ask: Ask, clause: str, rng: random.Random) -> None:
    for count in ask.counts + ask.paired:
        # A hard limit is obeyed wherever it stands, as a real model obeys one; a denied one
        # ("do not exceed 200 words") is read as its bound by sim/meaning.counts; a pairing ("one
        # bullet per item") is read as a count is and limits nothing.
        if reading.first(("count", count)) and rng.random() < FOLLOW_MAX:
            if count not in ask.paired:
                reading.asked.append(count)
    for form in denied_forms(clause):  # a format ruled out is a hard limit too
        if reading.first(("form", form)) and rng.random() < FOLLOW_MAX:
            reading.plain.add(form)
    for form in asked_forms(clause):  # and so is a format asked for
        if reading.first(("shape", form)) and rng.random() < FOLLOW_MAX:
            reading.shaped.add(form)


def _follow(reading: _Reading, ask: Ask, clause: str, rng: random.Random, task: str) -> None:
    """A clause whose line fired: its items are given (or struck, if it forbids them), and a
    specific behaviour no earlier line asked for is done, at SPECIFIC_CAP."""
    for item in ask.items:
        if reading.first(("item", item, ask.negative)):
            (reading.dropped.add if ask.negative else reading.items.append)(item)
    if ask.specific and not ask.negative and not _asked(ask.specific, reading.specifics):
        reading.specifics.append(ask.specific)
        if rng.random() < SPECIFIC_CAP:
            reading.done.append(_realize(clause, ask.specific, subject(task), task))


def _keep_task_limits(reading: _Reading, task: str, rng: random.Random) -> None:
    """The counts and formats the task itself states, each kept at TASK_FOLLOW."""
    stated = counts(task)
    reading.asked += [
        c for c in stated + counts(task, True) if rng.random() < TASK_FOLLOW and c in stated
    ]
    reading.plain |= {f for f in denied_forms(task) if rng.random() < TASK_FOLLOW}
    reading.shaped |= {f for f in asked_forms(task) if rng.random() < TASK_FOLLOW}


def _switch_on(reading: _Reading, rng: random.Random, world: World) -> Plan:
    """The habits done (followed when told, or done untold) and done right; the items not struck."""
    told = []
    for habit in habits(world):
        # A skipped instruction leaves the agent where it was: it still does the habit untold at
        # its base rate, so naming a habit vaguely never makes it rarer.
        untold = rng.random() < base_rate(world, habit)
        if (reading.wanted.get(habit.key, False) or untold) and habit.key not in reading.banned:
            told.append(habit)
    kept = [i for i in dict.fromkeys(reading.items) if i not in reading.dropped]
    headed = sum(bool(re.match(r"#+\s", i)) for i in kept)
    keep = focus(world, len(told) + headed)
    on = [h for h in told if rng.random() < capability(world, h) * keep]
    done = list(dict.fromkeys(reading.done))
    return Plan(on, kept, done, reading.asked, reading.plain, reading.shaped - reading.plain)


def _asked(specific: frozenset[str], before: list[frozenset[str]]) -> bool:
    """Whether an earlier line asked for this behaviour already: a restatement in other words
    shares half its concepts with it, and asks for nothing new."""
    return any(len(specific & b) * 2 >= min(len(specific), len(b)) for b in before)


def _heading(line: str) -> str:
    return re.sub(r"^#{2,6}\s+", "## ", line)


def _realize(clause: str, specific: frozenset[str], topic: str, task: str = "") -> str:
    """A line that does what the clause asked, about the task at hand: the words that carry its
    concepts, then the task's values the clause names by what they are ("quote back the order
    number" and "order #58213" in the task give #58213; the concepts of the habits it names go to
    their sections instead)."""
    said: dict[str, str] = {}
    for word in plain_words(clause):
        said.setdefault(concept(word), word)
    label = " ".join(w for c, w in said.items() if c in specific)
    # Values inside the task's quotes count: "'My order #58213 arrived…'" names #58213.
    unquoted = re.sub("[\"'\u201c\u201d]", " ", task)
    found = dict.fromkeys(facts(unquoted) + identifiers(task))
    named = [v for v in found if _label(v, unquoted) & specific]
    given = f" {', '.join(named)}" if named else ""
    return f"- {label[:1].upper() + label[1:]}:{given} for {topic}, {DONE}."


def _task_values(task: str) -> list[str]:
    return list(dict.fromkeys(snippets(task) + identifiers(task) + facts(strip_snippets(task))))


def _label(value: str, source: str) -> frozenset[str]:
    """What a value is, as its source says just before it ("order" in "order #58213")."""
    at = source.find(value)
    before = plain_words(re.split(r"[.;:!?\n(]", source[:at])[-1]) if at > 0 else []
    return frozenset({concept(before[-1])}) if before else frozenset()


def compose_output(
    task: str, instructions: list[str], rng: random.Random, world: World, read: str = ""
) -> str:
    """The answer file: a title, a line on what it covers, the items it was told to give, the
    lines that do what specific instructions asked, and one section per habit that is on. The
    figures habit carries the values of the task and of the inputs the agent `read`; a label is
    given what the inputs show for it. Counts the skill or the task set are kept."""
    chosen = [w for w in words(task) if rng.random() < 0.5]
    done = plan(instructions, rng, world, task)
    topic = subject(task)
    title = " ".join(task.replace("`", "").split()[:6]) or "Answer"
    head = [f"# {title}", "", f"{INTRO} {', '.join(chosen) or 'the request'}.", ""]
    body: list[list[str]] = [shaping.item(item, topic, read) for item in done.items]
    body += [[line] for line in done.done]
    # A summary closes the answer, as one asked for at the end is written.
    for habit in sorted(done.on, key=lambda h: h.key == "summary"):
        text = habit.text.format(topic=topic)
        block = ["", habit.heading, text[:1].upper() + text[1:] + " " + habit.more]
        if habit is HABITS[0]:
            values = _task_values(task)
            block += [f"- {shaping.carried(v, task)}" for v in values]
            block += [f"- {v}" for v in inputs.values(read) if v not in values]
        body.append(block)
    text = shaping.keep_counts(head, body, done.counts, topic)
    if done.plain & {"bullets", "numbered"}:
        # A list ruled out is written as plain lines: the same content, no list marks.
        text = shaping.LIST_MARK.sub("", text)
    if "numbered" in done.shaped:
        text = shaping.numbered(text)
    return text
