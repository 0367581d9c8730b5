"""How the simulated author turns a failing expectation into an instruction, from its words alone
(never its hidden cause): the expectation as an imperative, with one eval's values left out (a value
several evals fail on is a convention and stays). A whole sentence, never a check's id, never a word
left dangling where a value was; None when nothing general is left to ask for, or when the
expectation has no subject and verb to turn (an author does not restate it instead)."""

from __future__ import annotations

import re

from optimizer.sim.latent import topic_of
from optimizer.sim.meaning import counts, strip_counts
from optimizer.sim.text import facts, snippets, strip_snippets


def one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def lower_first(text: str) -> str:
    first = text.split(" ", 1)[0]
    return text[0].lower() + text[1:] if first[:1].isupper() and first[1:].islower() else text


_SUBJECT = re.compile(
    r"^(?:the|a|an|its|this|every|each|it)\b(?:\s+[\w'\x00-]+){0,3}?\s+"
    r"(?P<verb>(?-i:is|are|has|have|[a-z]+s))\s+(?P<rest>.+)$",
    re.I,
)
_BARE = re.compile(
    r"^(?P<np>[A-Za-z][\w'\x00-]*(?:\s+[\w'\x00-]+){0,2}?)\s+(?P<verb>(?-i:is|are|has|have|[a-z]+s))\s+"
    r"(?P<rest>.+)$"
)
_BARE_BE = re.compile(
    r"^(?P<np>[A-Za-z][\w'\x00-]*(?:\s+[\w'\x00-]+){0,2}?)\s+(?P<verb>is|are|has|have)\s+(?P<rest>.+)$"
)
_BASE = {"is": "Keep every answer", "are": "Keep them", "has": "Give every answer",
         "have": "Give every answer"}  # fmt: skip


# A check's id the gradings prefix a failed check with ("S2: The report has its title"): a label
# of the eval file, never words an author puts in a skill.
_CHECK_ID = re.compile(r"^[A-Z]{1,3}\d+:\s*")
# Words left dangling where one eval's value was taken out ("states the `Row count:` of").
_DANGLING = re.compile(r"\s+(?:of|as|to|for|with|at|in|is|are|the|a|an|and|or|by|from|on)$", re.I)
_SPAN = re.compile(r"`[^`]*`")


def imperative(expectation: str) -> str | None:
    """A failing expectation as an author turns it into an instruction, from its words alone:
    "The update says which customers were affected" -> "Say which customers were affected";
    "The `## Columns` table has a `missing` count" -> "Give the `## Columns` table a `missing`
    count". A whole sentence, never the check's id nor a word left dangling; None when the
    expectation has no subject and verb to turn (an author would not restate it instead)."""
    said = _CHECK_ID.sub("", one_line(expectation)).rstrip(".")
    while (cut := _DANGLING.sub("", said)) != said:
        said = cut
    # A quoted format is one word to the grammar: "the `## Columns` table" is a subject (a NUL-marked
    # placeholder, which no expectation's text holds).
    spans = _SPAN.findall(said)
    plain = _SPAN.sub(lambda m: f"\x00{spans.index(m.group(0))}\x00", said)

    def back(text: str) -> str:
        return re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], text)

    negative = re.match(
        r"^(?:it\s+|the\s+\w+\s+)?(?:does not|doesn't|never)\s+(\w+?)(?:e?s)?\b(.*)$", plain, re.I
    )
    if negative:
        return back(f"Never {negative.group(1).lower()}{negative.group(2)}")
    m = _SUBJECT.match(plain)
    if m is None:
        # "Headings are coloured …": a subject without an article; "is" or "has" is read as the
        # verb before any word that merely ends in s ("Missing values are counted").
        bare = _BARE_BE.match(plain) or _BARE.match(plain)
        if bare is None:
            return None
        np, verb, rest = lower_first(bare.group("np")), bare.group("verb"), bare.group("rest")
        if verb in _BASE:
            return back(f"{'Give' if verb in ('has', 'have') else 'Keep'} {np} {rest}")
        return back(f"Make {np} {_base_form(verb)} {rest}")
    verb, rest = m.group("verb").lower(), m.group("rest")
    subject = plain[: m.start("verb")].strip()
    if verb in _BASE:
        if "\x00" in subject:  # a named part of the answer: the instruction names it
            lead = "Give" if verb in ("has", "have") else "Keep"
            return back(f"{lead} {lower_first(subject)} {rest}")
        return back(f"{_BASE[verb]} {rest}")
    return back(f"{_base_form(verb).capitalize()} {rest}")


def _base_form(verb: str) -> str:
    return verb[:-2] if verb.endswith(("ches", "shes", "sses", "xes")) else verb[:-1]


def instruction_for(text: str, shared: frozenset[str] | set[str] = frozenset()) -> str | None:
    """The instruction a careful author writes for a failing expectation, from what the gradings
    show (its text, never its hidden cause): the expectation as an instruction, with the values
    of one eval left out (a value several evals fail on is a convention and stays). None when
    nothing general is left to ask for."""
    values = values_in(text)
    general = text
    for value in values:
        if value not in shared:
            general = re.sub(rf'["\u201c\'`]?{re.escape(value)}["\u201d\'`]?', "", general)
    general = re.sub(r"\s+", " ", general).strip()
    if not (topic_of(general) or snippets(general) or counts(general) or set(values) & shared):
        return None
    said = imperative(general)
    return f"- {said}." if said else None


def values_in(text: str) -> list[str]:
    """Its values, bare or quoted: a quoted format (`## Summary`) is the task's, `0.9.2` one eval's."""
    return facts(strip_snippets(strip_counts(text))) + [
        s for s in snippets(text) if facts(s) == [s]
    ]
