"""How the simulated world reads a sentence beyond its concepts (sim/meaning.py): whether it is a
sentence at all or a list of words, whether it only restates what it is checked against, which way
it points (a claim or its denial), which values it states and in what role, and whether an
expectation forbids something or asks to point out an absence. The agent and the judge read with
these same functions, so an instruction, an answer and an expectation meet on meaning alone."""

from __future__ import annotations

import functools
import re

from optimizer.sim.meaning import concepts, counts
from optimizer.sim.text import snippets

# Words that build a sentence around its content: a line of content words without them is a
# list or a soup, which asks for nothing and says nothing.
FUNCTION = frozenset(
    """
    a an the of to in on at for with by from as and or but if so because since than that which who
    whom whose what when where why how is are was were be been being has have had do does did will
    would can could should may might must it its this these those there their they we our you your
    i my me he she his her them us not no into onto out up down over under after before until
    while about per via each every all any some both either neither nor just only also then
    """.split()
)
# Verbs an instruction or a step starts with: "Include owner, date and status." is a sentence that
# asks for a list, where "Owner, date, status." is only the list.
VERBS = frozenset(
    """
    add answer apply ask assign attach avoid bold call carry check cite close compare confirm copy
    count cover define describe detail document draft end estimate explain finish flag follow
    format give group highlight identify include keep label lead link list log make mark measure
    mention merge name note offer open order outline plan point prepare present print propose
    provide put quote rank read recommend record report return round run say schedule set show sort
    specify spell split start state suggest summarise summarize tell test title track use verify
    write warn ask close begin open let write pick choose drop remove skip omit leave tag
    """.split()
)
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d[\d.,:%/-]*")

# What an answer says of itself when it only announces content: "This update says which
# customers were affected." A careful judge reads that as a promise, not as the content.
_SELF = r"(?:this|the|our|my|that|below|above|it|we|i|here)\b(?:\s+[\w-]+){0,3}?"
_META_VERB = (
    r"(?:says?|said|explains?|explained|describes?|described|lists?|listed|mentions?|mentioned|"
    r"covers?|covered|includes?|included|addresses|addressed|notes?|noted|states?|stated|"
    r"outlines?|outlined|details?|detailed|gives?|provides?|provided|discusses?|discussed|"
    r"points? out|pointed out|shows?|shown|clarif(?:y|ies|ied)|summari[sz]es?|will \w+|"
    r"names?|identif(?:y|ies|ied)|specif(?:y|ies|ied)|defines?|flags?|highlights?|"
    r"recommends? (?=which|what|how|a specific|the best)|assigns?|"
    r"is about|talks? about|goes over|walks? through|answers?)"
)
ANNOUNCES = re.compile(
    rf"^\s*(?:[-*•]\s*|\d+[.)]\s*)?(?:{_SELF}\s+)?{_META_VERB}\b\s*"
    r"(?P<rest>(?:which|what|why|how|whether|who|when|where|that|the|a|an|all|any|each|every)\b.*)$",
    re.I,
)
# "The breaking changes in this release are listed here": the passive form of the same promise.
_LISTED_HERE = re.compile(
    r"^(?P<rest>.+?)\s+(?:is|are)\s+(?:listed|described|explained|given|covered|shown|"
    r"outlined|detailed|summari[sz]ed|included|set out|named|identified)\s+"
    r"(?:here|below|above|in this\b|in the (?:table|list|section))",
    re.I,
)
# Generic words a restatement pads itself with; they add no content.
FILLER = frozenset(
    """
    information info detail details above below following see listed here there relevant
    appropriate necessary needed required correct right proper accordingly clear clearly thing
    things stuff aspect aspects point points topic topics matter matters case cases way ways
    request task answer update report document section part note noted item items etc based
    data provided given available analysis review email message specific main key each every
    """.split()
)
FILLER = FILLER | frozenset(concepts(" ".join(FILLER)))  # as words and as the concepts they fold to

# Negators: a clause with an odd number of them denies what it names.
_NEGATORS = re.compile(
    r"\b(?:not|no|never|none|nothing|nobody|nowhere|neither|nor|without|against|cannot|"
    r"lacks?|lacking|missing|absent|\w+n[’']t|isnt|dont|doesnt|wont|cant|"
    r"un(?:defined|clear|known|specified|measurable|measured|tested|answered|resolved|"
    r"addressed|documented|available|approved|stated|explained|funded|assigned|owned)|"
    r"rejects?|rejected|declines?|declined|den(?:y|ies|ied)|refuses?|refused|postpones?|"
    r"postponed|defers?|deferred|delay(?:s|ed)?|wait(?:s|ed|ing)?|hold(?:s|ing)? off|held off|"
    r"cancel(?:s|led|ed)?|halt(?:s|ed)?|skip(?:s|ped)?|avoid(?:s|ed)?|instead of|rather than)\b",
    re.I,
)
_SUCCESS = re.compile(
    r"\b(?:succeed(?:s|ed)?|success(?:ful(?:ly)?)?|worked|passed|went well)\b", re.I
)
_FAILURE = re.compile(r"\b(?:fail(?:s|ed|ing|ure|ures)?|broke|broken|unsuccessful(?:ly)?)\b", re.I)


def tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def _unmark(line: str) -> str:
    """A line without its list marker, emphasis and trailing punctuation."""
    line = re.sub(r"^\s*(?:[-*•>]|\d+[.)])\s+", "", line)
    return re.sub(r"[*_`]+", "", line).strip()


def word_list(text: str) -> bool:
    """A list of words standing for content: three or more short comma-separated parts with no
    sentence around them ("Migration, maintenance, window, needs"), or a run of content words
    with hardly a function word ("customers affected outage hours cause fix owner")."""
    text = _unmark(text)
    head, colon, tail = text.partition(":")
    if colon and word_list(head) and not _says_something(tail):
        return True
    found = [t for t in tokens(text) if not t[0].isdigit()]
    if found and found[0] in VERBS and "," in text:
        return False  # "Include owner, date and status." asks for a list
    parts = [p.strip(" .;") for p in re.split(r",|;|\band\b|\bor\b|/", text) if p.strip(" .;")]
    if len(parts) >= 3 and all(len(tokens(p)) <= 2 for p in parts):
        words = [t for p in parts for t in tokens(p)]
        return not any(w in FUNCTION for w in words) or len(parts) >= 4
    if len(found) >= 5:
        glue = sum(t in FUNCTION for t in found)
        return glue / len(found) < 0.12
    return False


def _says_something(text: str) -> bool:
    """Text after a label that carries content: a value, or a content word that is no filler."""
    if re.search(r"\d", text):
        return True
    return any(c not in FILLER for c in concepts(text))


def is_sentence(text: str) -> bool:
    """Whether a line can ask for or state anything: not empty, not a heading, not a word list."""
    plain = _unmark(text)
    return bool(tokens(plain)) and not plain.startswith("#") and not word_list(plain)


def announces(line: str, wanted: frozenset[str]) -> bool:
    """The line only promises what an expectation checks ("This update says which customers were
    affected", "We explain why the window is needed") without giving it: after its framing, it
    holds nothing beyond the expectation's own concepts, filler and no value."""
    plain = _unmark(line)
    passive = _LISTED_HERE.match(plain)
    if passive is not None:
        rest = passive.group("rest")
    else:
        m = ANNOUNCES.match(plain)
        if m is None:
            return False
        # What it promises is the phrase up to its first comma: "I identified the off-by-one
        # error in the offset, which should be fixed" still names no line and no fix.
        rest = re.split(r",|;|:| which | so that ", m.group("rest"), maxsplit=1)[0]
    return not re.search(r"\d", rest) and not (concepts(rest) - wanted - FILLER)


def restates(line: str, wanted: frozenset[str]) -> bool:
    """The line holds nothing but the expectation's concepts (and filler): it names what is
    checked and gives none of it."""
    plain = _unmark(line)
    if re.search(r"\d", plain) or re.search(r"[A-Z][a-z]+\s+[A-Z]", plain[1:]):
        return False  # a value or a proper name is content
    return not (concepts(plain) - wanted - FILLER)


@functools.lru_cache(maxsize=65536)
def polarity(text: str, about: frozenset[str] | None = None) -> int:
    """1 when a clause denies, postpones or turns down what it names, else 0: "we recommend
    against migrating" and "wait until next quarter" point one way, "migrate now" the other. With
    `about`, only a denial near one of those concepts counts: "Acme could not sign in" says
    nothing against "Acme was affected"."""
    if about is None:
        return len(_NEGATORS.findall(text)) % 2
    flips = 0
    for m in _NEGATORS.finditer(text):
        near = text[max(0, m.start() - 30) : m.end() + 40]
        flips += bool(concepts(near) & about)
    return flips % 2


def outcome(text: str) -> int | None:
    """+1 for a clause that reports success, -1 for failure, None when it reports neither or
    both (a denial is read by `polarity`)."""
    good, bad = bool(_SUCCESS.search(text)), bool(_FAILURE.search(text))
    return None if good == bad else (1 if good else -1)


def statements(line: str) -> list[str]:
    """The sentences of a line of an answer, and the parts a semicolon separates: a denial in one
    does not turn the next around."""
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(*])|;\s*", line)
    return [p.strip() for p in parts if p and p.strip()]


# --- what an expectation forbids ---------------------------------------------------------------

_SUBJECT = r"(?:(?:the|this|it|each|every|an?|your|its)\b(?:\s+[\w-]+){0,3}?\s+)?"
_FORBIDS = re.compile(
    rf"^\s*{_SUBJECT}(?:does not|doesn['’]t|do not|don['’]t|must not|should not|shouldn['’]t|"
    r"never|avoids?|avoiding|refrains? from|omits?|leaves? out|excludes?|steers? clear of|"
    r"stays? away from|is free of|is not|isn['’]t|are not|aren['’]t|contains no|has no|"
    r"includes no|makes no|uses no|mentions no|names no|gives no|with no|no|without)\b",
    re.I,
)


def forbids(expectation: str) -> bool:
    """An expectation is a prohibition when its main verb is denied ("Does not speculate about
    the root cause", "Avoids jargon", "No customer names"); "Points out that the score is never
    defined" asks for content about an absence, which is no prohibition; "Has no more than 3
    bullets" is a count (sim/meaning.counts reads its bound)."""
    if counts(expectation) and not snippets(expectation):
        return False
    return _FORBIDS.match(expectation) is not None


def forbidden(expectation: str) -> str:
    """What a prohibition forbids, as a positive statement of its content."""
    m = _FORBIDS.match(expectation)
    return expectation[m.end() :].strip() if m else expectation


# What speculation is made of: a cause offered with a hedge.
SPECULATES = re.compile(
    r"\b(?:probably|likely|possibly|perhaps|maybe|might|may have|could have|could be|may be|"
    r"we (?:think|believe|suspect|guess)|suspect|appears? to|seems? to|our guess|presumably)\b",
    re.I,
)
SPECULATION = re.compile(r"\b(?:speculat\w*|guess\w*|conjectur\w*)\b", re.I)


# --- values and their roles ---------------------------------------------------------------------

_AMOUNT = re.compile(
    r"(?<![\w.#/])(?P<cur>[$€£])?\s?(?P<num>\d+(?:,\d{3})*(?:\.\d+)?)"
    r"(?:\s?(?P<mult>k|m|mn|bn|b|thousand|million|billion)\b)?(?P<pct>\s?%|\s?percent\b)?",
    re.I,
)
_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "b": 1e9, "bn": 1e9,
          "billion": 1e9}  # fmt: skip


def amounts(text: str) -> list[tuple[float, bool]]:
    """The numbers a text states, as a reader compares them: "$2.4M", "$2,400,000" and "2.4
    million" are one amount; a percentage is not the bare number."""
    found = []
    for m in _AMOUNT.finditer(text):
        value = float(m.group("num").replace(",", ""))
        value *= _SCALE.get((m.group("mult") or "").lower(), 1.0)
        found.append((round(value, 6), bool(m.group("pct"))))
    return found


def states_amount(text: str, amount: tuple[float, bool]) -> bool:
    return any(abs(v - amount[0]) <= 1e-9 * max(1.0, abs(v)) and p == amount[1]
               for v, p in amounts(text))  # fmt: skip


# --- where and in what form ---------------------------------------------------------------------

_SECTION = re.compile(
    r"\b(?:section|heading|header|part)s?\b\s+(?:on|about|for|covering|titled|called|named|"
    r"that covers|describing|listing|with)\s+(?P<after>.+)$"
    r"|\b(?:an?|the|its|own)\s+(?P<before>[\w\s'-]{2,40}?)\s+(?:section|heading)\b",
    re.I,
)
_NOT_TOPIC = frozenset({"section", "heading", "separate", "dedicated", "clear", "short"})


def section_topic(expectation: str) -> frozenset[str] | None:
    """What a section an expectation asks for is about ("Includes a section on risks" -> risks),
    or None when it asks for no section."""
    m = _SECTION.search(expectation)
    if m is None:
        return None
    topic = concepts(m.group("after") or m.group("before") or "") - _NOT_TOPIC
    return topic or None


def position(expectation: str) -> str:
    if re.search(r"\b(?:ends|closes|finishes|concludes|wraps up|signs off)\s+(?:with|by|on)\b",
                 expectation, re.I):  # fmt: skip
        return "last"
    if re.search(r"\b(?:starts|opens|begins|leads)\s+(?:with|by)\b", expectation, re.I):
        return "first"
    return ""


FORMS = ("table", "code", "question-end", "second-person", "verb-bullets", "numbered", "bullets")


def form(expectation: str) -> str:
    """The form of the answer an expectation checks, if it checks one (FORMS)."""
    text = expectation.lower()
    if re.search(r"\b(?:every|each|all)\s+(?:bullet|item|step|point)s?\b.*\b(?:starts?|begins?)"
                 r"\s+with\s+(?:an?\s+)?(?:action\s+)?(?:verb|imperative)", text):  # fmt: skip
        return "verb-bullets"
    if re.search(r"\b(?:ends|closes|finishes)\s+with\s+(?:a|an|one)\s+(?:\w+\s+)?question", text):
        return "question-end"
    if re.search(r"\bsecond[- ]person\b|addresses the reader (?:as|directly)", text):
        return "second-person"
    if re.search(r"\bcode (?:example|block|sample|snippet)s?\b|\bexample (?:in|of) (?:python|"
                 r"javascript|typescript|sql|bash|shell|go|rust|java)\b", text):  # fmt: skip
        return "code"
    if re.search(r"\btable\b", text) and "table of contents" not in text:
        return "table"
    if re.search(r"\bnumbered (?:list|steps)\b|\b(?:are|is) numbered\b|\bnumbered [a-z]+s\b", text):
        return "numbered"
    if re.search(r"\bbullet(?:ed)? (?:list|points)\b|\bas bullets\b", text):
        return "bullets"
    return ""


# A form a sentence rules out: "with no bullet points", "never use tables", "in plain prose".
_DENIED_FORM = re.compile(
    r"\b(?:no|without|never use|not use|n't use|avoid|avoids|free of)\s+(?:any\s+)?"
    r"(?P<form>bullet(?:ed)?(?:\s+(?:points?|lists?))?|bullets|numbered\s+lists?|tables?)\b"
    r"|\b(?:in|as)\s+(?:plain\s+|running\s+)?(?P<prose>prose|paragraphs)\b",
    re.I,
)


def denied_forms(text: str) -> frozenset[str]:
    """The forms (FORMS) a sentence rules out; prose rules out bullets."""
    found = set()
    for m in _DENIED_FORM.finditer(text):
        said = (m.group("form") or "bullets").lower()
        found.add(
            "table" if said.startswith("table") else "numbered" if "numbered" in said else "bullets"
        )
    return frozenset(found)


# A form a sentence asks for, beyond what the agent writes anyway: a numbered list ("give a
# numbered list of ideas", "number the findings", "ask five questions and number them").
_ASKED_NUMBERED = re.compile(
    r"\bnumbered\s+(?:list|steps|points|items|entries|findings|questions|ideas)\b"
    r"|\bnumber\s+(?:them|each|every|the\s+[a-z]+s|your\s+[a-z]+s)\b",
    re.I,
)


def asked_forms(text: str) -> frozenset[str]:
    """The forms (FORMS) a sentence asks the answer to take; none that it also rules out."""
    if "numbered" in denied_forms(text) or not _ASKED_NUMBERED.search(text):
        return frozenset()
    return frozenset({"numbered"})


_LANG = re.compile(r"\b(python|javascript|typescript|sql|bash|shell|go|rust|java)\b", re.I)


def has_form(content: str, kind: str, expectation: str = "") -> bool:
    """Whether an answer has the form asked for; each checked the way a reader sees it."""
    lines = [ln for ln in content.split("\n") if ln.strip()]
    items = [ln for ln in lines if re.match(r"\s*(?:[-*•]|\d+[.)])\s+\S", ln)]
    if kind == "table":
        return any(re.fullmatch(r"\s*\|?[\s:|-]*-{3,}[\s:|-]*\|?\s*", ln) for ln in lines) and (
            sum(ln.lstrip().startswith("|") or ln.count("|") >= 2 for ln in lines) >= 3
        )
    if kind == "code":
        fences = re.findall(r"```(\w*)\n(.*?)```", content, re.S)
        lang = _LANG.search(expectation)
        if not fences:
            return False
        if lang is None:
            return True
        want = lang.group(1).lower()
        return any(f.lower() in (want, {"shell": "bash", "bash": "sh"}.get(want, want)) or
                   (not f and want == "python" and re.search(r"\b(?:def|import|print\()", c))
                   for f, c in fences)  # fmt: skip
    if kind == "question-end":
        prose = [ln for ln in lines if not ln.lstrip().startswith(("#", "```", "|"))]
        return bool(prose) and prose[-1].rstrip().rstrip("*_").endswith("?")
    if kind == "second-person":
        words = tokens(content)
        you = sum(w in ("you", "your", "you're", "yours") for w in words)
        return you >= 2 and you >= sum(w in ("i", "we", "he", "she", "they") for w in words)
    if kind == "verb-bullets":
        return bool(items) and all(tokens(_unmark(ln))[:1] and tokens(_unmark(ln))[0] in VERBS
                                   for ln in items)  # fmt: skip
    if kind == "numbered":
        return sum(bool(re.match(r"\s*\d+[.)]\s+\S", ln)) for ln in lines) >= 2
    return len(items) >= 2
