"""When the simulated judge may pass an expectation: only on content that meets it, quoted word for
word from one output file, read as a careful person reads it (sim/reading.py). Restating the
expectation or listing its words is no content; an expectation that asks to point out an absence
is content, and a prohibition is broken only by what it forbids; counts are counted in the unit
named; a value must stand in its role; a claim the answer denies does not pass; a heading with
content under it is a section. Never reads the skill: a restatement in the skill is not content."""

from __future__ import annotations

import re
from dataclasses import dataclass

from optimizer.sim import reading
from optimizer.sim.answer import Line, content, has_item, lines_of, placed, quote, quoted, read
from optimizer.sim.compose import DONE, INTRO
from optimizer.sim.latent import (
    LAYOUT_CUES,
    Habit,
    Need,
    World,
    covers,
    draw,
    habits,
    need,
    task_rate,
    topic_of,
)
from optimizer.sim.meaning import Count, concept, measure


@dataclass(frozen=True)
class Support:
    passed: bool
    partial: bool  # close enough that a noisy judge may pass it, with a quote
    evidence: str


def _pattern(habit: Habit) -> re.Pattern[str]:
    head, _, tail = habit.text.partition("{topic}")
    return re.compile(re.escape(head) + r".*" + re.escape(tail), re.I)


def section(lines: list[str], habit: Habit) -> str | None:
    """The line that holds the habit's content, wherever it stands: its heading does not count."""
    pattern = _pattern(habit)
    return next((ln for ln in lines if pattern.search(ln)), None)


def _doing(
    lines: list[Line], wanted: Need, realized: bool = True, forbidden: bool = False
) -> tuple[Line | None, bool]:
    """A line of the answer that does what the expectation asks, and whether one denied it. A
    clause does it when, read with the heading it stands under, it carries half of the
    expectation's concepts, it is a sentence (no list of words), it gives something beyond the
    expectation's own words, and it points the same way (a denial against a claim fails). For a
    habit's expectation, a line the agent wrote in an instruction's own words (`realized` False)
    is no content: a habit is done by its content. What a prohibition forbids is done only by a
    line carrying most of its concepts: "Customers often write in annoyed" shares "customer" with
    "blames the customer", and blames no one."""
    denied = False
    for line in lines:
        if not content(line) or (not realized and line.text.endswith(f"{DONE}.")):
            continue
        context = topic_of(f"{line.heading} {line.intro}")
        for clause in [line.text] if line.code else reading.statements(line.text):
            said = topic_of(clause.replace(DONE, ""))
            carried = len((said | context) & wanted.topic)
            if not (
                carried * 2 > len(wanted.topic)
                if forbidden
                else covers(said | context, wanted.topic)
            ):
                continue
            if line.intro and not said & wanted.topic:
                continue  # an entry under "Action items:" says nothing of owners by standing there
            if not line.code and (
                not reading.is_sentence(clause)
                or reading.announces(clause, wanted.topic)
                or reading.restates(clause, wanted.topic)
            ):
                continue
            same = reading.polarity(clause, wanted.topic) == wanted.polarity
            told = reading.outcome(clause)
            if (
                wanted.polarity == 0
                and wanted.outcome is not None
                and told not in (None, wanted.outcome)
            ):
                same = False
            if not same:
                denied = True
                continue
            if placed(line, lines, wanted.position):
                return line, denied
    return None, denied


def support(
    expectation: str, files: list[dict], task: str = "", world: World | None = None
) -> Support:
    """Files are tried in the order given; the first that supports the expectation is quoted."""
    if not files:
        return Support(False, False, "No output files were produced.")
    world = world or World()
    wanted = need(world, expectation)
    if wanted.negated and not (wanted.counts and not wanted.items):
        return _prohibition(wanted, expectation, files, world)
    return _positive(wanted, files, world, expectation)


def _positive(wanted: Need, files: list[dict], world: World, expectation: str) -> Support:
    if wanted.counts:
        return _counts(wanted, files, world, expectation)
    if wanted.form:
        return _form(wanted, files, expectation)
    if wanted.items or wanted.amounts:
        return _values(wanted, files)
    if wanted.section is not None:
        return _section(wanted, files)
    if wanted.habit is not None:
        return _habit(wanted, wanted.habit, files)
    return _specific(world, wanted, files)


def _main(files: list[dict]) -> dict:
    return max(files, key=lambda f: len(f["content"]))


def _counted(content: str, count: Count) -> int:
    """A count as a careful judge takes it: the entries of the list that holds what is named
    ("three options": the list under a line about options, else the longest list)."""
    if count.unit != "bullets" or not count.noun:
        return measure(content, count.unit)
    lists: list[tuple[str, int]] = []
    intro, size = "", 0
    for text in lines_of(content) + [""]:
        if re.match(r"\s*(?:[-*•]|\d+[.)])\s+\S", text):
            size += 1
            continue
        if size:
            lists.append((intro, size))
        intro, size = text, 0
    if not lists:
        return 0
    named = concept(count.noun)
    about = [n for head, n in lists if named in topic_of(head)]
    return about[0] if about else max(n for _, n in lists)


def _counts(wanted: Need, files: list[dict], world: World, expectation: str) -> Support:
    """Every count the expectation states, in the main output (the longest file); a claim of a
    count ("I wrote 10 questions") is not the count."""
    main = _main(files)
    measured = [(c, _counted(main["content"], c)) for c in wanted.counts]
    said = "; ".join(f"{n} {c.noun or c.unit} (wanted {c.words()})" for c, n in measured)
    rest = (
        _values(wanted, files).passed
        if wanted.items or wanted.amounts
        else (_form(wanted, files, expectation).passed if wanted.form else True)
    )
    if all(c.holds(n) for c, n in measured) and rest:
        return Support(True, True, f"Counted in {main['path']}: {said}.")
    close = all(abs(n - c.n) <= max(1, c.n // 10) for c, n in measured)
    return Support(False, close, f"Counted in {main['path']}: {said}.")


def _form(wanted: Need, files: list[dict], expectation: str) -> Support:
    for f in files:
        if reading.has_form(f["content"], wanted.form, expectation):
            return Support(True, True, f"{f['path']} is written as asked ({wanted.form}).")
    return Support(False, False, f"No output is written as asked ({wanted.form}).")


def _in_role(line: Line, amount: tuple[float, bool], wanted: Need) -> bool:
    """A number stands in its role when the sentence that states it, read with its heading,
    names what the expectation says it is ("$2.4M" as revenue, not as cost)."""
    if not wanted.role:
        return True
    context = topic_of(line.heading) if line.heading else frozenset()
    return any(
        covers(topic_of(clause) | context, wanted.role)
        for clause in reading.statements(line.text)
        if reading.states_amount(clause, amount)
    )


def _values(wanted: Need, files: list[dict]) -> Support:
    """Every item as written and every number by value, in one file, each in its role: a value
    nobody wrote is absent, whatever else is there."""
    partial: tuple[str, list[str]] | None = None
    missing_all: list[str] = []
    for f in files:
        lines = read(f["content"])
        quotes, missing = [], []
        for item in wanted.items:
            line = next((ln.text for ln in lines if has_item(ln.text, item)), None)
            if line is None and has_item(f["content"], item):
                line = item  # an item that spans lines is quoted as itself
            (quotes.append(quote(line, item)) if line is not None else missing.append(item))
        for value, amount in wanted.amounts:
            stated = [ln for ln in lines if reading.states_amount(ln.text, amount)]
            in_role = [ln for ln in stated if _in_role(ln, amount, wanted)]
            if in_role:
                quotes.append(quote(in_role[0].text))
            else:
                missing.append(value + (" as stated there" if stated else ""))
        if not missing:
            return Support(True, True, quoted(f["path"], list(dict.fromkeys(quotes))))
        missing_all = missing
        if quotes and partial is None:
            partial = (f["path"], quotes)
    absent = ", ".join(f"`{i}`" for i in missing_all)
    if partial is not None:
        return Support(False, True, quoted(*partial) + f"; but not {absent or 'all in one file'}.")
    return Support(False, False, f"Not found in the outputs: {absent}.")


def _section(wanted: Need, files: list[dict]) -> Support:
    """A heading about the topic with content under it, or the section of the habit the topic
    belongs to; a heading alone is no section."""
    assert wanted.section is not None
    bare = None
    for f in files:
        lines = lines_of(f["content"])
        for k, text in enumerate(lines):
            if not re.match(r"#{1,6}\s", text) or not covers(topic_of(text), wanted.section):
                continue
            under = k + 1 < len(lines) and not re.match(r"#{1,6}\s", lines[k + 1])
            if under:
                return Support(True, True, quoted(f["path"], [text, quote(lines[k + 1])]))
            bare = bare or (f["path"], text)
    if wanted.habit is not None:
        found = _habit(wanted, wanted.habit, files)
        if found.passed:
            return found
    if bare is not None:
        return Support(False, True, quoted(bare[0], [bare[1]]) + "; but nothing stands under it.")
    return Support(False, False, "Not found in the outputs: no section on it.")


def _habit(wanted: Need, habit: Habit, files: list[dict]) -> Support:
    for f in files:
        lines = read(f["content"])
        own = section([ln.text for ln in lines], habit)
        held = next((ln for ln in lines if ln.text == own), None)
        if held is not None and not placed(held, lines, wanted.position):
            held = None
        line = held or _doing(lines, wanted, realized=False)[0]
        if line is None:
            continue
        found = quoted(f["path"], [quote(line.text)])
        if wanted.feasible or line is not held:
            return Support(True, True, found)
        return Support(False, True, found + "; but it does not show what the expectation asks.")
    return Support(
        False, False, "Not found in the outputs: nothing in them does what the expectation asks."
    )


def _specific(world: World, wanted: Need, files: list[dict]) -> Support:
    """A line that does it; else, in an answer of the simulated agent, whether it did it untold
    is a draw fixed by the world, the expectation and the answer's covers line (so the grader and
    the comparator agree on it, and a skill cannot buy it)."""
    denied = False
    for f in files:
        line, no = _doing(read(f["content"]), wanted)
        denied = denied or no
        if line is not None:
            return Support(True, True, quoted(f["path"], [quote(line.text)]))
    if denied:
        return Support(False, False, "The outputs say the opposite of what the expectation asks.")
    for f in files:
        intro = next((ln for ln in lines_of(f["content"]) if ln.startswith(INTRO)), None)
        # Keyed on the covers line, which the agent writes before it reads the skill: the
        # same run of the same task meets it or not whatever the skill says.
        if intro and draw(world, "meets", wanted.key, intro) < task_rate(world, wanted.key):
            return Support(True, True, quoted(f["path"], [quote(intro)]))
    # No line to quote: nothing a noisy judge could lean on to pass it.
    return Support(
        False, False, "Not found in the outputs: nothing in them does what the expectation asks."
    )


_PROPER = re.compile(r"(?<=[a-z,;:]\s)([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)")
_CALENDAR = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may "
    "june july august september october november december".split()
)


def _names(line: str) -> bool:
    """Whether a line names someone or something by a proper name (not a day or a month)."""
    return any(
        not {w.lower() for w in m.group(1).split()} <= _CALENDAR for m in _PROPER.finditer(line)
    )


def _broken(wanted: Need, expectation: str, files: list[dict], world: World) -> Support | None:
    """Where the outputs do what a prohibition forbids, if anywhere."""
    text = reading.forbidden(expectation)
    if reading.SPECULATION.search(text):
        # Speculation is a cause offered with a hedge; "we are still investigating" is none.
        about = wanted.topic - topic_of("speculate guess")
        for f in files:
            for line in lines_of(f["content"]):
                if reading.SPECULATES.search(line) and (not about or topic_of(line) & about):
                    return Support(False, True, quoted(f["path"], [quote(line)]))
        return None
    if re.search(r"\bnames?\b", text, re.I) and not wanted.items:
        for f in files:
            for line in lines_of(f["content"]):
                if not line.lstrip().startswith("#") and _names(line):
                    return Support(False, True, quoted(f["path"], [quote(line)]))
        return None
    if wanted.items or wanted.amounts or wanted.form:
        found = _form(wanted, files, text) if wanted.form else _values(wanted, files)
        return Support(False, True, found.evidence) if found.passed else None
    for f in files:
        doing, _ = _doing(read(f["content"]), wanted, forbidden=True)
        if doing is not None:
            return Support(False, True, quoted(f["path"], [quote(doing.text)]))
    for habit in habits(world):
        # "Does not suggest next steps" is broken by a next-steps section: the content of a
        # habit the prohibition is mostly about.
        if len((habit.cues & wanted.topic) - LAYOUT_CUES) >= min(2, len(wanted.topic)):
            found = _habit(wanted, habit, files)
            if found.passed:
                return Support(False, True, found.evidence)
    return None


def _prohibition(wanted: Need, expectation: str, files: list[dict], world: World) -> Support:
    broken = _broken(wanted, expectation, files, world)
    if broken is not None:
        return Support(False, True, broken.evidence + " It does what the expectation forbids.")
    return Support(True, True, "None of the outputs does what the expectation forbids.")
