"""What makes an expectation one a grader can fail, and the user's corrections turned into such
expectations. Heuristics on the text alone: they decide what growing the evals writes and what it
leaves to the user, never how a run is graded."""

from __future__ import annotations

import re
from collections.abc import Callable

from optimizer.logs import MASK

_UNITS = (
    r"words?|lines?|sentences?|characters?|chars|bullets?|bullet points?|paragraphs?|pages?|"
    r"items?|rows?|columns?|sections?|questions?|points?|steps?|examples?|minutes?|tokens?"
)
_AT_MOST = r"under|below|less than|fewer than|at most|no more than|max(?:imum)?(?: of)?|within|up to|shorter than"
_AT_LEAST = r"at least|more than|over|no fewer than|no less than|min(?:imum)?(?: of)?|longer than"
_LIMIT = re.compile(
    rf"\b(?P<how>{_AT_MOST}|{_AT_LEAST}|exactly)\s+(?P<n>\d[\d,.]*)\s+(?P<unit>{_UNITS})\b",
    re.IGNORECASE,
)
# Marks of a precise expectation: a number (a limit, a count, a date, a version), a quoted or
# code value, a file name, a URL, a colour, an id or acronym, a named thing in capitals inside the
# sentence, or a word that bounds what passes.
_PRECISE = re.compile(
    r"\d|`[^`]+`|\"[^\"]+\"|“[^”]+”|(?<!\w)'[^']+'(?!\w)|https?://|#[0-9a-fA-F]{3,8}\b"
    r"|\b[\w-]+\.[A-Za-z][A-Za-z0-9]{0,5}\b"
    r"|\b[A-Z]{2,}[\w-]*\b"
    r"|\s[A-Z][a-z]+"
    r"|\b(red|green|blue|yellow|orange|purple|black|white|grey|gray|pink|brown)\b"
    r"|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|dozen|half|both|single)\b"
    r"|\b(at (most|least)|exactly|no more than|fewer than|less than|more than|under|only|every|"
    r"each|all|none|never|without|not|no|before|after|first|last|between|within)\b"
)
# A verb that asks for something the output either holds or lacks, followed by what it names.
_CONTENT = re.compile(
    r"\b(mentions?|names?|states?|lists?|includes?|contains?|quotes?|cites?|links?|gives?|"
    r"reports?|shows?|opens?|starts?|ends?|has|have|uses?|asks?|defines?|explains?|"
    r"compares?|recommends?|sorts?|groups?|rounds?|converts?|is written|are written)\s+\w+",
    re.IGNORECASE,
)
# Judgements no grader can fail an output on by itself.
_UNFALSIFIABLE = re.compile(
    r"\b(do|does|did)\s+what\b.*\b(ask|asks|asked|requested|wants?|wanted)\b"
    r"|\b(answers|addresses|completes|fulfils|fulfills|satisfies|handles)\s+the\s+(task|request|prompt)\b"
    r"|\bfollows the (task|instructions|request)\b"
    r"|^\s*the (output|result|answer|response)\s+(is|looks)\s+(correct|good|fine|right|ok|okay|"
    r"complete|reasonable|appropriate|helpful|useful)\.?\s*$",
    re.IGNORECASE,
)
_OPENER = re.compile(
    r"^\s*(?:(?:no(?!\s+(?:more|fewer|less|longer)\b)|nope|not quite|hmm|ok|okay|thanks|thank you|also|actually|wait|but|and|"
    r"please|that's wrong|that is wrong|this is wrong|wrong|sorry|now|then|oh)\b[\s,:;.!-]*)+",
    re.IGNORECASE,
)
_CLAUSE = re.compile(
    r"\s*(?:[;!]|\.(?=\s|$)|,?\s+and\s+(?=(?:please\s+)?(?:add|use|keep|make|remove|drop|"
    r"put|include|sort|round|rename|cut|shorten|don't|do not|never)\b))\s*",
    re.I,
)
_CHANGE = re.compile(
    r"^(?:(?:keep|make|put) (?:it|this|that|them|the \w+)|add|remove|drop|use|shorten|cut|trim|"
    r"include|sort|round|rename|change|don't|do not|never|always|avoid|only)\b",
    re.IGNORECASE,
)
# A message that starts a task of its own, even if it states a limit ("write the newsletter in
# under 300 words"): not a change to the answer before it.
_NEW_TASK = re.compile(
    r"^(?:(?:can|could|would) you\s+)?(?:write|create|draft|summari[sz]e|report|generate|prepare|"
    r"produce|compose|analy[sz]e|profile|turn|convert|build|plan|review|do)\b",
    re.IGNORECASE,
)
FOLLOW_UP_WORDS = 15  # longer than this, a message is a request of its own


def precise(text: str) -> bool:
    """An expectation that names what passes: a number, limit, quoted value, id, colour, file."""
    return bool(_PRECISE.search(text))


def checkable(text: str) -> bool:
    """Could an output fail it? Precise, or asking for named content; never a bare judgement."""
    if not text.strip() or _UNFALSIFIABLE.search(text):
        return False
    return precise(text) or bool(_CONTENT.search(text))


def unmasked(text: str) -> str | None:
    """text when it holds no masked value; else what it says before the value's name, when that
    still names something ("use a JWT for the upload: Authorization: [redacted]" -> "use a JWT for
    the upload"); None when nothing is left. A check built around a mask says nothing a grader
    can hold an output to."""
    if MASK not in text:
        return text
    head = text[: text.index(MASK)]
    cut = re.search(r"[:=]", head)
    kept = head[: cut.start()].strip(" ,;-\"'“") if cut else ""
    return kept if len(kept.split()) >= 3 and checkable(kept) else None


def same_limit(a: str, b: str) -> bool:
    """Both state the same bound ("under 10 lines" and "is at most 10 lines")."""
    found = limit(a, "")
    return found is not None and found == limit(b, "")


def limit(text: str, subject: str = "The answer") -> str | None:
    """ "keep it under 80 words" -> "The answer is at most 80 words"; None without a limit."""
    found = _LIMIT.search(text)
    if found is None:
        return None
    how = found["how"].lower()
    bound = (
        "exactly"
        if how == "exactly"
        else "at least"
        if re.fullmatch(_AT_LEAST, how, re.IGNORECASE)
        else "at most"
    )
    return f"{subject} is {bound} {found['n']} {found['unit'].lower()}"


def asks_for_change(message: str) -> bool:
    """A follow-up that asks for the result to be different ("keep it under 80 words",
    "make it shorter", "add a Notes section"), which the session file's wording alone misses."""
    rest = _OPENER.sub("", message).strip()
    if len(rest.split()) > FOLLOW_UP_WORDS or _NEW_TASK.match(rest):
        return False
    return bool(_LIMIT.search(message) or _CHANGE.match(rest))


def from_correction(message: str, subject: str = "The answer") -> list[str]:
    """What the first answer should already have done, one check per clause the user typed."""
    out: list[str] = []
    for clause in _CLAUSE.split(_OPENER.sub("", message.strip())):
        clause = unmasked(_OPENER.sub("", clause).strip(" ,:;-")) or ""
        if len(clause.split()) < 2:
            continue
        check = limit(clause, subject) or _rewritten(clause, subject)
        if check not in out:
            out.append(check)
    return out


def _rewritten(clause: str, subject: str) -> str:
    lowered = clause[:1].lower() + clause[1:]
    for pattern, form in _FORMS:
        found = re.match(pattern, lowered, re.IGNORECASE)
        if found:
            return form(found, subject)
    # No form fits: the user's own words, quoted, are still something the first answer lacked.
    return f'{subject} already has what the user asked for afterwards: "{clause}"'


def _should(found: re.Match[str], _subject: str) -> str:
    thing, rest = found["thing"].strip(), found["rest"].strip()
    verb = "is not" if found["neg"] else "is"
    if thing.split()[-1].endswith("s") and not thing.split()[-1].endswith("ss"):
        verb = "are not" if found["neg"] else "are"
    return f"{thing[:1].upper()}{thing[1:]} {verb} {rest}"


_FORMS: list[tuple[str, Callable[[re.Match[str], str], str]]] = [
    (
        r"^(?P<thing>(?:the|all|every|each|its|their)\b[^,]*?)\s+(?:should|must|need to|needs to)"
        r"(?P<neg>\s+not|n't)?\s+be\s+(?P<rest>.+)$",
        _should,
    ),
    (r"^(?:add|include|put in)\s+(?P<what>.+)$", lambda m, s: f"{s} has {m['what']}"),
    (
        r"^use\s+(?P<good>.+?)\s*(?:,\s*)?(?:not|instead of|rather than)\s+(?P<bad>.+)$",
        lambda m, s: f"{s} uses {m['good']}, not {m['bad']}",
    ),
    (r"^use\s+(?P<what>.+)$", lambda m, s: f"{s} uses {m['what']}"),
    (
        r"^(?:remove|drop|leave out|don't (?:add|include|use|write|mention)|do not (?:add|include|"
        r"use|write|mention)|never (?:add|include|use|write|mention))\s+(?P<what>.+)$",
        lambda m, s: f"{s} has no {_bare(m['what'])}",
    ),
    (r"^(?:you )?(?:forgot|left out|missed)\s+(?P<what>.+)$", lambda m, s: f"{s} has {m['what']}"),
    (r"^(?P<what>.+?)\s+(?:is|are) missing$", lambda m, s: f"{s} has {m['what']}"),
]


def _bare(noun: str) -> str:
    return re.sub(r"^(the|any|a|an)\s+", "", noun, flags=re.IGNORECASE)
