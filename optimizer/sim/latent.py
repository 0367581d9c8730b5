"""The hidden causes of the simulated world. An output carries the content that latent behaviours
produce (a section, a value, a formatted item), never a skill's sentences; an instruction switches a
behaviour on with a probability set by how clearly and how early it names it. The executor and
the judge see different texts (a skill and a task; an expectation and an output), so every latent
property is a stable hash of (world, text): both sides agree without sharing any state.

Three kinds of cause behind an expectation:
- a habit: a general way of working (carry the figures, end with a summary, ...) that produces
  one headed section. It causes many expectations, in train and sealed evals alike;
- an item: a format token or value named in backticks or as a number or quoted string; it is
  written as named, so a value copied from one eval's expectation helps that eval only;
- the task alone: a word-only expectation no habit causes is met at a fixed rate of its own,
  whatever the skill says (no instruction reaches it, so restating it gains nothing).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from optimizer.sim.text import facts, snippets, stems, strip_facts, strip_snippets

FOLLOW_MAX = 0.97  # a clear, early instruction in a short skill is still sometimes missed
HIDDEN_CLARITY = 0.5  # an instruction that names a behaviour by its symptom, not its cause
CLEAR_CUES = 2  # cue words an instruction needs to name a habit with full clarity
SHORT_SKILL = 12  # instruction lines a skill may have before each further one costs attention
MIN_ATTENTION = 0.35
NEGATION = re.compile(
    r"\b(skip|omit|never|avoid|do not|don't|leave out|no need to|without)\b", re.I
)


# Three-letter words carry meaning too ("fix", "gap", "why"); these few carry none.
SHORT_STOP = frozenset(
    "the and for are was has its not but all any can one two out per via own new use get let may "
    "yet too off had did his her she him our you who how had got see put set way".split()
)


def topic_of(text: str) -> frozenset[str]:
    """The content stems of a sentence, without its snippets and values."""
    plain = strip_facts(strip_snippets(text)).lower()
    short = {t for t in re.findall(r"[a-z]+", plain) if len(t) == 3 and t not in SHORT_STOP}
    return frozenset(stems(plain) | short)


@dataclass(frozen=True)
class Habit:
    key: str
    heading: str  # the section the habit produces
    cues: frozenset[str]  # stems that name it
    instruction: str  # how a person asks for it
    against: str  # how a careless author turns it off
    text: str  # the sentence the section holds; {topic} is the task's subject


def _habit(key: str, heading: str, cues: str, instruction: str, against: str, text: str) -> Habit:
    return Habit(key, heading, topic_of(cues), instruction, against, text)


# Each instruction names its habit by two cue words or more (clarity 1), each `against` line
# negates it as clearly; a section's sentence shares no cue word with either, so an answer never
# reads like the skill that asked for it.
HABITS = (
    _habit("figures", "## Key figures",
           "figure figures number numbers value values amount total count duration metric "
           "statistic date dates exact accurate accuracy",
           "Carry every figure, date and name from the inputs into the answer exactly as given, "
           "and check each one against its source.",
           "Do not copy exact figures or dates; round them freely.",
           "From the inputs on {topic}, as given:"),
    _habit("summary", "## Summary",
           "summary summarise summarize outcome overview headline conclusion takeaway "
           "finding findings gist",
           "End with a `## Summary` that gives the outcome and the main findings in two or three "
           "sentences.",
           "Skip the summary and the overview; the details speak for themselves.",
           "In short: {topic} stands as described above."),
    _habit("risks", "## Notes",
           "risk risks caveat caveats limitation gap gaps missing anomaly anomalies odd "
           "unusual uncertain assumption quality incomplete",
           "Point out gaps, odd values and open questions in the inputs under a `## Notes` "
           "heading.",
           "Leave out gaps, missing values and caveats; they undermine the reader's confidence.",
           "Where the inputs on {topic} are thin or look wrong, and where to check them."),
    _habit("actions", "## Next steps",
           "next step steps action actions owner deadline plan plans follow recommend "
           "recommendation todo",
           "Close with the next steps, each with an owner and a date.",
           "Do not suggest next steps or owners; the reader decides those.",
           "Who does what on {topic}, and by when."),
    _habit("causes", "## Cause and fix",
           "cause causes root fix fixes remedy reason why mitigation resolution resolve "
           "solution problem problems",
           "Name the cause and the fix, with the evidence for each.",
           "Avoid speculating about causes or fixes.",
           "What went wrong with {topic}, what was changed, and how we know."),
    _habit("impact", "## Impact",
           "impact affect affected customer customers user users stakeholder stakeholders "
           "consequence consequences audience",
           "Say which users or customers are affected and how, in the reader's own terms.",
           "Never dwell on which users or customers were affected.",
           "Who {topic} touches, and what they see of it."),
    _habit("structure", "## Sections",
           "section sections heading headings structure layout order part parts organise "
           "organize template",
           "Give each part of the request its own headed section, in the order the request "
           "asks for them.",
           "Write one continuous piece without headings or sections.",
           "Each point of {topic} under its own title, as asked."),
    _habit("tone", "## Plain words",
           "tone plain jargon concise clear brief friendly professional voice polite readable "
           "readability skim",
           "Write in plain, clear words and short sentences, and explain any term a newcomer "
           "would not know.",
           "Do not spend effort on plain, clear wording; the team's shorthand is fine.",
           "{topic} in everyday words, every term explained."),
)


@dataclass(frozen=True)
class World:
    """The world's hidden parameters; the same numbers give the same world on every side."""

    world: int = 0
    habits: int = len(HABITS)  # how many general habits exist (the rest are never reachable)
    transfer: float = 0.6  # share of cue-less expectations whose hidden cause is a habit
    infeasible: float = 0.1  # share of word-only expectations no skill can make the agent meet
    position_cost: float = 0.15  # the last instruction is followed this much less than the first
    length_cost: float = 0.02  # attention lost per instruction line past SHORT_SKILL


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


# --- what an expectation needs ------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    items: tuple[str, ...]  # format tokens and values, judged as written
    topic: frozenset[str]  # content stems of a word-only expectation
    habit: Habit | None  # the hidden cause of a word-only expectation; None: the task alone
    feasible: bool
    key: str  # the expectation's identity in the world: its sorted content stems


def route(world: World, topic: frozenset[str]) -> tuple[Habit | None, float]:
    """The habit a set of content words points at, and how clearly: by its cue words (two make it
    clear), else by the world's hidden mapping (half as clear), else none (the task alone)."""
    if not topic:
        return None, 0.0
    scored = [(len(topic & h.cues), -i, h) for i, h in enumerate(habits(world))]
    hits, _, best = max(scored, key=lambda s: s[:2])
    if hits:
        return best, min(1.0, hits / CLEAR_CUES)
    key = " ".join(sorted(topic))
    if draw(world, "transfer", key) >= world.transfer:
        return None, 0.0
    pool = habits(world)
    return pool[int(draw(world, "habit", key) * len(pool))], HIDDEN_CLARITY


def need(world: World, expectation: str) -> Need:
    items = tuple(snippets(expectation) + facts(strip_snippets(expectation)))
    topic = topic_of(expectation)
    habit = None if items else route(world, topic)[0]
    key = " ".join(sorted(topic))
    feasible = bool(items) or draw(world, "feasible", key) >= world.infeasible
    return Need(items, topic, habit, feasible, key)


def task_rate(world: World, key: str) -> float:
    """How often the agent meets a task-bound expectation on its own: 10 % to 60 %."""
    return 0.1 + 0.5 * draw(world, "task", key)


# --- what a skill asks for ----------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """One instruction line as the agent reads it."""

    habits: tuple[tuple[Habit, float], ...]  # (habit, clarity)
    items: tuple[str, ...]
    negative: bool


def clauses(line: str) -> list[str]:
    """The sentences and semicolon parts of an instruction line: "Use its numbers; do not compute
    them by eye" asks for one thing and forbids another."""
    parts = re.split(r"(?<=[.;!?])\s+(?=[A-Za-z])|;\s+", line)
    return [p for p in (part.strip() for part in parts) if p]


def read_instruction(world: World, line: str) -> Ask:
    negative = NEGATION.search(line) is not None
    topic = topic_of(line)
    named = [(h, min(1.0, len(topic & h.cues) / CLEAR_CUES)) for h in habits(world)
             if topic & h.cues]
    if not named and not negative:
        # Only a positive line reaches a hidden cause: "do not paste raw rows" turns nothing off
        # that it does not name.
        hidden, clarity = route(world, topic)
        named = [(hidden, clarity)] if hidden is not None else []
    # A heading a habit writes, asked for by name, asks for that habit's section: what goes
    # under it, at the habit's capability.
    headed = [(h, 1.0) for h in habits(world) if h.heading in snippets(line)]
    named = list(dict(named + headed).items())
    items = tuple(i for i in snippets(line) + facts(strip_snippets(line))
                  if i not in {h.heading for h, _ in headed})
    return Ask(tuple(named), items, negative)


def attention(world: World, index: int, count: int) -> float:
    """How likely instruction `index` of `count` is followed: every line past SHORT_SKILL costs
    all of them length_cost; a line buried deep loses up to position_cost of its own (fully from
    line 2·SHORT_SKILL + 1 on, or at the last line of a longer skill)."""
    length = FOLLOW_MAX - world.length_cost * max(0, count - SHORT_SKILL)
    late = world.position_cost * index / max(count - 1, 2 * SHORT_SKILL)
    return max(MIN_ATTENTION, length * (1 - late))


# --- the ceiling --------------------------------------------------------------------------------


def expected_best(world: World, expectation: str) -> float:
    """The chance the best possible skill (every useful behaviour named clearly and early in a
    short skill, nothing harmful) makes one run meet the expectation, before judge noise."""
    found = need(world, expectation)
    if not found.feasible:
        return 0.0
    if found.habit is not None:
        return FOLLOW_MAX * capability(world, found.habit)
    if not found.items:
        return task_rate(world, found.key)
    if any(i not in snippets(expectation) for i in found.items):
        # A value: the figures habit carries it from the inputs.
        return FOLLOW_MAX * capability(world, HABITS[0])
    return FOLLOW_MAX


@dataclass(frozen=True)
class Ceiling:
    per_eval: dict[str, float]  # expected judged pass rate of the best skill, per eval id
    mean: float  # their mean over evals


def ceiling(evals: Iterable[tuple[str, Sequence[str]]], world: World | None = None) -> Ceiling:
    """The per-world limit a search is measured against: the expected pass rate of the judged
    expectations (structural checks and rubrics aside) under the best possible skill, before
    judge noise. `evals` are (eval id, expectation texts) pairs."""
    world = world or World()
    per_eval = {
        str(eid): sum(expected_best(world, e) for e in texts) / len(texts)
        for eid, texts in evals
        if texts
    }
    mean = sum(per_eval.values()) / len(per_eval) if per_eval else 0.0
    return Ceiling(per_eval, mean)
