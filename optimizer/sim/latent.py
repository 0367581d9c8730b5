"""The hidden causes of the simulated world. An output carries the content that latent behaviours
produce (a section's text, an item, a value, a line that does what an instruction asked), never a
skill's sentences; an instruction switches a behaviour on with a probability set by how clearly
and how early it asks for it, and by how much else the skill asks. The executor and the judge see
different texts, so every latent property is a stable hash of (world, text) and every match is by
meaning (sim/meaning.py): both sides agree without sharing any state.

Three kinds of cause behind an expectation:
- a habit: a general way of working (carry the figures, end with a summary, ...) whose content
  is a paragraph of its own. It causes many expectations, in train and sealed evals alike;
- an item or a count: a token (a heading, a column, a colour, an id, a value) written as named,
  or a number of words or bullets kept to; the judge checks the output for it;
- a specific behaviour: the rest. The agent does it untold at a rate of the task's, and does it
  when an instruction asks for it by meaning; the judge finds a line that does it.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from dataclasses import dataclass

from optimizer.sim import reading
from optimizer.sim.meaning import (
    Count,
    concept,
    concepts,
    counts,
    items_of,
    plain_words,
    strip_counts,
)
from optimizer.sim.text import facts, strip_snippets

FOLLOW_MAX = 0.97  # a clear, early instruction in a short skill is still sometimes missed
SHORT_SKILL = 12  # instruction lines a skill may have before each further one costs attention
FULL_SHARE = 2  # behaviours one clause asks for at full strength; more share its attention
FOCUS_FREE = 3  # sections an answer holds before each further one costs all of them
COVER = 0.5  # share of an expectation's concepts a line must carry to do what it asks
SPECIFIC_CAP = 0.9  # how often a followed specific instruction comes out as asked
TASK_FOLLOW = 0.9  # how often the agent keeps to a count the task itself states
REALIZED = 6  # concepts of one clause the agent acts on: a stuffed line is not read to its end
# Words that say where content goes, not what it is: alone they make no expectation a habit's.
LAYOUT_CUES = frozenset({"heading", "section", "figure", "date"})
INSTRUCTION_NEGATION = re.compile(
    r"\b(skip|omit|never|avoid|do not|don't|leave out|no need to|without)\b", re.I
)


@functools.lru_cache(maxsize=65536)
def topic_of(text: str) -> frozenset[str]:
    """The concepts of a sentence (sim/meaning.py), without its snippets, values and counts."""
    return concepts(strip_counts(text))


@dataclass(frozen=True)
class Habit:
    key: str
    heading: str  # the heading its section goes under
    cues: frozenset[str]  # concepts that name it
    instruction: str  # how a person asks for it
    against: str  # how a careless author turns it off
    text: str  # the sentence that is its content; {topic} is the task's subject
    more: str  # a second sentence: a section has the length of real content


def _habit(
    key: str, heading: str, cues: str, instruction: str, against: str, text: str, more: str
) -> Habit:
    return Habit(key, heading, concepts(cues), instruction, against, text, more)


# Each instruction names its habit by two cue concepts or more, each `against` line negates it as
# clearly; a section's sentences share no concept with either, so an answer never reads like the
# skill that asked for it.
HABITS = (
    _habit(
        "figures",
        "## Key figures",
        "figure number value total count metric statistic date exact accurate accuracy",
        "Carry every figure, date and name from the inputs into the answer exactly as given, "
        "and check each one against its source.",
        "Do not copy exact figures or dates; round them freely.",
        "From the inputs on {topic}, as given:",
        "Each entry below is copied from its source line.",
    ),
    _habit(
        "summary",
        "## Summary",
        "summary outcome conclusion takeaway finding findings",
        "End with a `## Summary` that gives the outcome and the main findings in two or three "
        "sentences.",
        "Skip the summary and the overview; the details speak for themselves.",
        "In short: {topic} stands as described above.",
        "The rest of this page holds the detail behind that.",
    ),
    _habit(
        "risks",
        "## Notes",
        "risk missing odd unusual uncertain assumption quality incomplete",
        "Point out gaps, odd values and open questions in the inputs under a `## Notes` heading.",
        "Leave out gaps, missing values and caveats; they undermine the reader's confidence.",
        "Where the inputs on {topic} are thin or look wrong, and where to check them.",
        "Treat those parts with care until someone has looked again.",
    ),
    _habit(
        "actions",
        "## Next steps",
        "next owner plan plans recommend recommendation",
        "Close with the next steps, each with an owner and a date.",
        "Do not suggest next steps or owners; the reader decides those.",
        "Who does what on {topic}, and by when.",
        "Each of those is tracked until it is closed.",
    ),
    _habit(
        "causes",
        "## Cause and fix",
        "cause fix problem problems",
        "Name the cause and the fix, with the evidence for each.",
        "Avoid speculating about causes or fixes.",
        "What went wrong with {topic}, what was changed, and how we know.",
        "The log lines that show it are quoted where they help.",
    ),
    _habit(
        "impact",
        "## Impact",
        "affect customer stakeholder stakeholders consequence consequences audience",
        "Say which users or customers are affected and how, in the reader's own terms.",
        "Never dwell on which users or customers were affected.",
        "Who {topic} touches, and what they see of it.",
        "Those outside that group see nothing different.",
    ),
    _habit(
        "structure",
        "## Sections",
        "section heading structure layout order organise organize template",
        "Give each part of the request its own headed section, in the order the request "
        "asks for them.",
        "Write one continuous piece without headings or sections.",
        "Each point of {topic} under its own title, as asked.",
        "They follow the order in which the request raised them.",
    ),
    _habit(
        "tone",
        "## Plain words",
        "tone plain jargon clear short friendly professional voice polite readable readability skim",
        "Write in plain, clear words and short sentences, and explain any term a newcomer "
        "would not know.",
        "Do not spend effort on plain wording or tone; the team's jargon is fine.",
        "{topic} in everyday words, every term explained.",
        "A newcomer can follow it without asking anyone.",
    ),
)


@dataclass(frozen=True)
class World:
    """The world's hidden parameters; the same numbers give the same world on every side."""

    world: int = 0
    habits: int = len(HABITS)  # how many general habits exist (the rest are never reachable)
    infeasible: float = 0.1  # share of habit expectations no skill can make the agent meet
    position_cost: float = 0.15  # the last instruction is followed this much less than the first
    length_cost: float = 0.02  # attention lost per instruction line past SHORT_SKILL
    focus_cost: float = 0.05  # quality every section loses per section past FOCUS_FREE


def draw(world: World, *parts: object) -> float:
    """A uniform number in [0, 1) fixed by the world and the text: a latent property."""
    key = "\0".join([str(world.world), *map(str, parts)]).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2**64


def habits(world: World) -> tuple[Habit, ...]:
    return HABITS[: max(1, min(len(HABITS), world.habits))]


def base_rate(world: World, habit: Habit) -> float:
    """How often the agent does it untold: 3 % to 20 %, fixed per world."""
    return 0.03 + 0.17 * draw(world, "base", habit.key)


def capability(world: World, habit: Habit) -> float:
    """How often the section comes out right when the agent does it: 75 % to 97 %."""
    return 0.75 + 0.22 * draw(world, "cap", habit.key)


def focus(world: World, sections: int) -> float:
    """What every section keeps of its quality when the answer holds `sections` of them: an
    answer that does everything does each thing worse, so sections nobody asked for cost."""
    return (1 - world.focus_cost) ** max(0, sections - FOCUS_FREE)


# --- reading a sentence -------------------------------------------------------------------------


def clarity(topic: frozenset[str], habit: Habit) -> float:
    """How clearly a clause asks for a habit: two cue concepts, or one in a clause that is mostly
    about it (1.0); one cue in a clause a third about it (0.5); else 0: a cue that happens to
    stand among many other words names nothing."""
    hits = len(topic & habit.cues)
    density = hits / len(topic) if topic else 0.0
    if not ((hits >= 2 and density >= 0.2) or (hits == 1 and density >= 1 / 3)):
        return 0.0
    return 1.0 if hits >= 2 or density >= 0.5 else 0.5


def named_habits(world: World, topic: frozenset[str]) -> list[tuple[Habit, float]]:
    """The habits a clause is about, with how clearly; a clause that names more than FULL_SHARE
    habits asks for each with a share of its attention."""
    found = [(h, c) for h in habits(world) if (c := clarity(topic, h)) > 0]
    share = min(1.0, FULL_SHARE / len(found)) if found else 1.0
    return [(h, c * share) for h, c in found]


def route(world: World, topic: frozenset[str]) -> tuple[Habit | None, float]:
    """The one habit a set of concepts is most about, and how clearly; None when none."""
    named = [h for h, _ in named_habits(world, topic)]
    if not named:
        return None, 0.0
    best = max(named, key=lambda h: (len(topic & h.cues), -HABITS.index(h)))
    return best, clarity(topic, best)


@dataclass(frozen=True)
class Need:
    items: tuple[str, ...]  # tokens judged as written: snippets, identifiers, colours, quotes
    counts: tuple[Count, ...]  # numbers of words, bullets, ... the output must keep to
    topic: frozenset[str]  # the concepts of what it asks, beyond items and counts
    habit: Habit | None  # the habit that causes it; None: a specific behaviour
    feasible: bool
    negated: bool  # a prohibition: it forbids what it names (sim/reading.forbids)
    key: str  # the expectation's identity in the world: its sorted concepts
    values: tuple[str, ...] = ()  # the specific values it names, as written (a task's answer)
    # The numbers among them, as written and as a reader compares them (judged by value).
    amounts: tuple[tuple[str, tuple[float, bool]], ...] = ()
    role: frozenset[str] = frozenset()  # what a stated number must stand with ("revenue")
    polarity: int = 0  # 1: what it asks for is a denial, an absence or a "no"
    outcome: int | None = None  # +1 / -1: it asks to report a success / a failure
    section: frozenset[str] | None = None  # it asks for a section on this topic
    position: str = ""  # "first" or "last": where in the answer it must stand
    form: str = ""  # a form of the answer it checks (reading.FORMS)


# Concepts too general to tie a number to its role: "the total is 12" says nothing of what.
_GENERIC_ROLE = frozenset({"figure", "date", "state", "give"})


@functools.lru_cache(maxsize=65536)
def need(world: World, expectation: str) -> Need:
    negated = reading.forbids(expectation)
    said = reading.forbidden(expectation) if negated else expectation
    rest = strip_counts(said)
    values = tuple(facts(strip_snippets(rest)))
    numeric = [v for v in values if reading.amounts(v) and not v.startswith("#")]
    items = tuple(items_of(rest) + [v for v in values if v not in numeric])
    amounts = tuple((v, a) for v in numeric for a in reading.amounts(v))
    topic = concepts(rest)
    section = reading.section_topic(rest)
    habit, _ = route(world, section if section else topic)
    hits = len(topic & habit.cues) if habit is not None else 0
    weak = habit is not None and not (topic & habit.cues) - LAYOUT_CUES
    if habit is not None and not section and hits < 2 and (items or weak or len(topic) > 2):
        # "Headings use Poppins" is about Poppins, and "has a `## Notes` section" about its item:
        # an expectation is a habit's only when it is mostly about the habit.
        habit = None
    key = " ".join(sorted(topic))
    feasible = habit is None or draw(world, "feasible", key) >= world.infeasible
    return Need(
        items, tuple(counts(said)), topic, habit, feasible, negated, key,
        values=values,
        amounts=amounts,
        role=topic - _GENERIC_ROLE if amounts else frozenset(),
        polarity=reading.polarity(rest, topic),
        outcome=reading.outcome(rest),
        section=section,
        position=reading.position(rest),
        form=reading.form(rest),
    )  # fmt: skip


def task_rate(world: World, key: str) -> float:
    """How often the agent meets a specific expectation untold: 10 % to 60 %."""
    return 0.1 + 0.5 * draw(world, "task", key)


def covers(line_topic: frozenset[str], wanted: frozenset[str]) -> bool:
    """A line does what a set of concepts asks when it carries at least half of them."""
    return bool(wanted) and len(line_topic & wanted) >= max(1, math.ceil(COVER * len(wanted)))


# --- what a skill asks for ----------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """One clause of an instruction as the agent reads it."""

    habits: tuple[tuple[Habit, float], ...]  # (habit, clarity)
    items: tuple[str, ...]
    counts: tuple[Count, ...]
    specific: frozenset[str]  # what else it asks for, by meaning
    negative: bool
    paired: tuple[Count, ...] = ()  # "one bullet per item": read as a count is, and no limit


def clauses(line: str) -> list[str]:
    """The sentences and semicolon parts of an instruction line: "Use its numbers; do not compute
    them by eye" asks for one thing and forbids another."""
    parts = re.split(r"(?<=[.;!?])\s+(?=[A-Za-z])|;\s+", line)
    return [p for p in (part.strip() for part in parts) if p]


@functools.lru_cache(maxsize=65536)
def read_instruction(world: World, line: str) -> Ask:
    negative = INSTRUCTION_NEGATION.search(line) is not None
    topic = topic_of(line)
    named = named_habits(world, topic)
    # A heading named beside the habit it belongs to is that habit's heading, not an extra item;
    # a heading on its own is only a heading: what goes under it is not asked for.
    own = {h.heading for h, _ in named}
    items = tuple(
        i for i in items_of(strip_counts(line)) + facts(strip_snippets(strip_counts(line)))
        if i not in own
    )  # fmt: skip
    asked = counts(line)
    # What a clause asks beyond the habits it names is done in its own words too ("organise it
    # into progress, plans and problems" asks for a structure and for those three parts); only
    # its first concepts are acted on: a stuffed line is not read to its end.
    cues = frozenset().union(*(h.cues for h, _ in named))
    specific = frozenset([c for c in dict.fromkeys(ordered(line)) if c not in cues][:REALIZED])
    return Ask(tuple(named), items, tuple(asked), specific, negative, tuple(counts(line, True)))


def ordered(text: str) -> list[str]:
    """The concepts of a text in the order they first appear."""
    return [c for c in (concept(w) for w in plain_words(strip_counts(text))) if c in topic_of(text)]


def attention(world: World, index: int, count: int) -> float:
    """How likely instruction `index` of `count` is followed. Every line past SHORT_SKILL costs
    all of them, with no floor: a skill twice as long is always followed less. A line buried deep
    loses up to position_cost of its own."""
    length = FOLLOW_MAX / (1 + world.length_cost * max(0, count - SHORT_SKILL))
    late = world.position_cost * index / max(count - 1, 2 * SHORT_SKILL)
    return length * (1 - late)
