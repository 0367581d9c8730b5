"""What a sentence means in the simulated world: its concepts (content words with the world's
synonyms folded together), the count constraints it states, the identifiers it names, and whether
it forbids what it names. An instruction and an expectation meet by these, never by their exact
words, so a paraphrase and a verbatim restatement of one behaviour read alike."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from optimizer.sim.text import snippets, strip_facts, strip_snippets

# Words that say how a sentence checks or asks, not what: "the report *states* the cause" and
# "*name* the cause" both mean the cause. Subject nouns of answers are here too.
META = frozenset(
    """
    about above after again also always been before being both does doing done each even every
    from have having here into just make more most must need only other over same should some
    such sure than that their them then there these they this those through under until very
    were what when where which while will with would could your yours whose within without
    output outputs include includes including contain contains mention mentions file files use
    uses using answer answers response please state states stated say says said give gives given
    list lists listed show shows shown name names named provide provides describe describes
    explain explains explained
    write writes written present presents presented clearly explicit
    explicitly also report reports update updates document message reply text result results
    check ensure correctly correct properly proper good well like least most exactly under over
    less fewer than keep keeps kept one two three four five six seven eight nine ten the and for
    are was has its not but all any can out per via own new get let may yet too off had did
    his her she him our you who how got see put set way against ends starts begins opens closes
    finishes concludes wraps happen happens happened
    """.split()
)

# The world's synonyms: every word of a group reads as its first word. Small on purpose: a
# meaning the world defines, stated here, so a test can name what counts as a paraphrase.
SYNONYMS = (
    "affect affected affects affecting impact impacted impacts hit touched",
    "customer customers client clients subscriber subscribers account accounts",
    "cause causes caused reason reasons root why because due therefore hence driver drivers",
    "fix fixes fixed remedy remedies resolution resolve resolved mitigation mitigate solution "
    "repair repaired patch patched",
    "next step steps action actions todo followup follow-up",
    "owner owners responsible assignee assignees",
    "summary summarise summarize summarised summarized overview recap tldr gist",
    "short brief concise succinct terse compact",
    "thank thanks thanked gratitude credit acknowledge",
    "link links url urls",
    "team teams staff crew",
    "error errors failure failures fail failed failing broken bug bugs",
    "delay delays delayed late lag",
    "date dates day days deadline deadlines",
    "figure figures number numbers count counts metric metrics value values statistic "
    "statistics total totals amount amounts",
    "colour colours color colors palette hex",
    "font fonts typeface typefaces",
    "heading headings header headers title titles headline headlines",
    "section sections part parts",
    "bullet bullets point points item items",
    "table tables grid",
    "test tests testing check checks verify verifies verified assert asserts",
    "screenshot screenshots capture captures",
    "wait waits waited waiting await awaits",
    "risk risks caveat caveats gap gaps anomaly anomalies limitation limitations",
    "plain jargon-free everyday simple",
    "duration long lasted lasting",
    "outage outages incident incidents downtime disruption",
    "succeed succeeds succeeded success successful successfully",
    "recommend recommends recommended recommendation recommendations advise advises advised "
    "suggest suggests suggested suggestion suggestions",
    "rollback rollbacks revert reverts reverted roll-back undo",
    "flaky intermittent intermittently nondeterministic sporadic sporadically",
    "increase increases increased rise rises rose grow grows grew growth up",
    "decrease decreases decreased drop drops dropped fall falls fell shrink shrank",
    "restart restarts restarted reboot reboots rebooted",
    "delete deletes deleted deletion erase erased wipe wiped remove removed",
    "apologise apologises apologised apologize apologizes apologized apology sorry",
    "budget budgets spend spending spent",
    # A word that turns down what it names reads as its concept; sim/reading.polarity counts the
    # denial, so "the board rejects it" meets "if it is not approved".
    "approve approves approved approval accept accepts accepted reject rejects rejected "
    "decline declines declined deny denies denied",
    "measure measures measured measurable measurement quantify quantified",
)
_CANON = {w: group.split()[0] for group in SYNONYMS for w in group.split()}
_WORD = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]|[a-z]")


@functools.lru_cache(maxsize=65536)
def concept(word: str) -> str:
    """One word as the world reads it: its synonym group, else a light stem ("findings",
    "finding" and "find" read alike; so do "computed" and "compute")."""
    word = word.lower().strip("-")
    for _ in range(2):
        if word in _CANON:
            return _CANON[word]
        for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("s", ""), ("ly", "")):
            if word.endswith(suffix) and len(word) - len(suffix) >= 4 and not word.endswith("ss"):
                word = word[: -len(suffix)] + keep
                break
        else:
            break
    if word in _CANON:
        return _CANON[word]
    return word[:-1] if len(word) >= 5 and word.endswith("e") else word


def plain_words(text: str) -> list[str]:
    """The content words of a sentence in order, without snippets, values and meta words."""
    plain = strip_facts(strip_snippets(text)).lower()
    return [w for w in _WORD.findall(plain) if len(w) >= 3 and w not in META]


def concepts(text: str) -> frozenset[str]:
    """The content of a sentence: its concepts without snippets, values and meta words."""
    found = {concept(w) for w in plain_words(text)}
    return frozenset(c for c in found if c not in META and len(c) >= 3)


# --- what a sentence forbids --------------------------------------------------------------------

NEGATION = re.compile(
    r"\b(skip|omit|omits|never|avoid|avoids|do not|does not|don't|doesn't|leave out|leaves out|"
    r"no need to|without|free of|not)\b",
    re.I,
)


def negated(text: str) -> bool:
    return NEGATION.search(text) is not None


# --- identifiers and count constraints ----------------------------------------------------------

# Tokens a reader copies as written: snake_case, dotted or dashed names with a digit or an
# underscore, ticket ids (INC-4411), camelCase. Plain words are concepts, not identifiers.
_IDENT = re.compile(
    r"(?<![\w#`])(?:[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+|[A-Z]{2,}-\d+|[a-z]+[A-Z][A-Za-z0-9]+"
    r"|[A-Za-z]+\.[A-Za-z_][\w.]*\(\)|[a-z][\w-]*\.(?:py|js|ts|md|csv|json|html|css|txt|sh))(?![\w`])"
)


def identifiers(text: str) -> list[str]:
    return list(dict.fromkeys(_IDENT.findall(strip_snippets(text))))


UNITS = {
    "word": "words",
    "character": "characters",
    "char": "characters",
    "sentence": "sentences",
    "bullet": "bullets",
    "bullet point": "bullets",
    "point": "bullets",
    "item": "bullets",
    "line": "lines",
    "paragraph": "paragraphs",
    "section": "sections",
    "heading": "sections",
    "question": "questions",
    "row": "rows",
}
# Things an answer gives as the entries of a list: counted as the items of the list they are in.
LISTED = (
    "options|steps|examples|tips|reasons|recommendations|alternatives|ideas|suggestions|rules|"
    "tasks|risks|questions|names|benefits|features|takeaways|priorities|actions|causes|entries|"
    "criteria|goals|principles|choices|changes|fixes|tests|cases|headlines|slogans|titles|"
    "taglines|quotes|facts|metrics|stories|names"
)
_LISTED_UNITS = frozenset(LISTED.split("|")) - {"questions"}
NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
}  # fmt: skip
# A denied bound is the opposite bound: "does not exceed 50 words", "never write more than 5
# bullets" and "no more than 100 words" are all upper limits.
_DENIED = r"(?:(?:does not|doesn't|do not|don't|must not|should not|never|not)\s+(?:\w+\s+){0,2}?)"
_BOUND = (
    r"(?P<op>"
    + _DENIED
    + r"(?:exceeds?|go over|more than|longer than|over)|"
    + _DENIED
    + r"(?:fewer than|less than|shorter than|under)|exceeds?|"
    r"at most|no more than|not more than|no longer than|fewer than|less than|shorter than|"
    r"under|below|maximum of|longer than|"
    r"max(?:imum)?|up to|within|at least|more than|over|exactly|no fewer than|minimum of|only)?"
)
# One word that says what kind the counted things are: "10 evaluation questions", "5 clarifying
# questions", "20 numbered ideas"; never a function word, and never joined to the number by a
# hyphen ("a one-line tagline" is one line).
_KIND = r"(?:(?<=\s)(?!(?:and|for|from|per|the|than|that|with|each|every)\b)(?-i:[a-z]{3,})\s+)?"
_UNIT = (
    r"words?|characters?|chars?|sentences?|bullet points?|bullets?|points?|items?|lines?|"
    r"paragraphs?|sections?|headings?|questions?|rows?|"
    + "|".join(sorted({u.rstrip("s") + "s?" for u in LISTED.split("|")}))
)
_COUNT = re.compile(
    _BOUND + r"\s*(?<![\w#])(?P<n>\d{1,5})[\s-]*" + _KIND + r"(?P<unit>" + _UNIT + r")\b", re.I
)
# A range is two bounds: "between 5 and 10 questions", "5 to 20 ideas", "3-5 bullets".
_RANGE = re.compile(
    r"\b(?:between\s+(?P<a>\d{1,5})\s+and|(?P<b>\d{1,5})\s*(?:to|-|\u2013))\s*(?P<z>\d{1,5})"
    r"(?P<tail>[\s-]*" + _KIND + r"(?:" + _UNIT + r")\b)",
    re.I,
)
_OPS = {
    "at most": "<=", "no more than": "<=", "not more than": "<=", "maximum of": "<=",
    "max": "<=", "maximum": "<=", "up to": "<=", "within": "<=", "fewer than": "<",
    "less than": "<", "under": "<", "below": "<", "shorter than": "<", "no longer than": "<=",
    "longer than": ">", "at least": ">=", "no fewer than": ">=",
    "minimum of": ">=", "more than": ">", "over": ">", "exactly": "==", "only": "==",
    "exceed": ">", "exceeds": ">",
}  # fmt: skip


@dataclass(frozen=True)
class Count:
    """A number an expectation or an instruction sets for a countable part of the answer."""

    unit: str  # words, characters, sentences, bullets, lines, paragraphs, sections, questions, rows
    op: str  # <=, <, >=, >, ==
    n: int
    noun: str = ""  # what the entries of a list are ("options"), when the count names them

    def holds(self, value: int) -> bool:
        return {
            "<=": value <= self.n,
            "<": value < self.n,
            ">=": value >= self.n,
            ">": value > self.n,
            "==": value == self.n,
        }[self.op]

    @property
    def limit(self) -> int:
        """The largest count that holds (for an upper bound), or the count aimed at."""
        return self.n - 1 if self.op in ("<", ">") else self.n

    def words(self) -> str:
        return f"{self.op} {self.n} {self.unit}"


def counts(text: str, pairings: bool = False) -> list[Count]:
    """The count constraints a sentence states: "under 200 words", "exactly 5 bullet points";
    with `pairings`, only what reads like one but pairs things ("one row per column")."""
    found = []
    spelled = _RANGE.sub(
        lambda m: f"at least {m['a'] or m['b']}{m['tail']} and at most {m['z']}{m['tail']}",
        _spell(strip_snippets(text)),
    )
    for m in _COUNT.finditer(spelled):
        # "One row per column" sets no number of rows: it pairs rows with columns.
        if (m.group("n") == "1" and _PER.match(spelled, m.end()) is not None) is not pairings:
            continue
        said = m.group("unit").lower()
        unit = said.rstrip("s")
        noun = ""
        if said + ("" if said.endswith("s") else "s") in _LISTED_UNITS:
            if int(m.group("n")) < 2:
                continue  # "one example" asks for an example, not for a list of one
            unit, noun = "bullets", said  # three options, five tips: the entries of a list
        else:
            unit = UNITS.get(unit, "words")
        said_op = re.sub(r"\s+", " ", (m.group("op") or "").lower())
        if re.match(_DENIED, said_op) and not said_op.startswith(("no more", "not more")):
            op = "<=" if re.search(r"exceed|go over|more|longer|over", said_op) else ">="
        else:
            op = _OPS.get(said_op, "==")
        found.append(Count(unit, op, int(m.group("n")), noun))
    return found


_PER = re.compile(r"\s+(?:per|for each|for every|to each|to every)\b", re.I)


def _spell(text: str) -> str:
    """Number words as digits, so "three options" is counted as "3 options"."""
    return re.sub(
        r"\b(" + "|".join(NUMBER_WORDS) + r")\b(?=[\s-]+[a-z])",
        lambda m: str(NUMBER_WORDS[m.group(1).lower()]),
        text,
        flags=re.I,
    )


def strip_counts(text: str) -> str:
    spelled = _spell(text)
    if not _COUNT.search(spelled):
        return text
    return re.sub(r"\s+", " ", _COUNT.sub(" ", _RANGE.sub(" ", spelled))).strip()


def measure(content: str, unit: str) -> int:
    """How many of `unit` a text holds, as a careful judge counts them."""
    lines = [ln for ln in content.split("\n") if ln.strip()]
    if unit == "words":
        return len(re.findall(r"[A-Za-z0-9][\w'’.-]*", content))
    if unit == "characters":
        return len(content.strip())
    if unit == "bullets":
        return sum(bool(re.match(r"\s*(?:[-*•]|\d+[.)])\s+", ln)) for ln in lines)
    if unit == "lines":
        return len(lines)
    if unit == "sections":
        return sum(bool(re.match(r"#{1,6}\s", ln)) for ln in lines[1:])  # the title is no section
    if unit == "questions":
        # A list of questions is counted by its entries, some of which a writer ends with a full
        # stop ("Tell me about…"); a claim such as "10 questions:" is not counted at all.
        asked = len(re.findall(r"\?(?:\s|$)", re.sub(r"^#.*$", "", content, flags=re.M)))
        entries = [ln for ln in lines if re.match(r"\s*(?:[-*•]|\d+[.)])\s+\S", ln)]
        if entries and sum(ln.rstrip().endswith("?") for ln in entries) * 2 >= len(entries):
            return max(asked, len(entries))
        return asked
    if unit == "rows":
        table = [ln for ln in lines if ln.lstrip().startswith("|")]
        return max(0, len([ln for ln in table if not re.fullmatch(r"[\s|:-]+", ln)]) - 1)
    if unit == "paragraphs":
        return len([p for p in re.split(r"\n\s*\n", content) if p.strip()])
    return len(re.findall(r"[.!?](?:\s|$)", re.sub(r"^#.*$", "", content, flags=re.M)))


def items_of(text: str) -> list[str]:
    """Snippets and identifiers: tokens written as given, a heading or a column as much as a name."""
    return list(dict.fromkeys(snippets(text) + identifiers(text)))
