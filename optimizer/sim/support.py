"""When the simulated judge may pass an expectation: only on content that meets it, quoted word for
word from one output file. Items and values must appear as written; a count (words, bullets,
sections) is counted; a habit's expectation needs the habit's content, never its heading alone;
any other expectation needs a line that does what it asks (by meaning, sim/meaning.py) or, in an
answer of the simulated agent, the task's own draw. A negated expectation is violated by what it
forbids. Never reads the skill: a restatement in the skill is not content of the answer."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
from optimizer.sim.meaning import measure

QUOTE_CHARS = 160  # of one quoted passage: enough to read the support in context
MAX_QUOTES = 3
FILLER = "under this heading."  # the paragraph an item heading gets when nothing asked for more


@dataclass(frozen=True)
class Support:
    passed: bool
    partial: bool  # close enough that a noisy judge may pass it, with a quote
    evidence: str


def has_item(text: str, item: str) -> bool:
    """A snippet or a quoted value appears as written; a number, a colour or an id as a whole
    token, so "12" is not found inside "112" nor "#fff" inside "#ffffff". A heading counts only
    with content under it: a heading alone is no section."""
    if re.match(r"#+\s", item):
        lines = [ln for ln in text.split("\n") if ln.strip()]
        return any(
            ln.strip() == item and k + 1 < len(lines) and not lines[k + 1].lstrip().startswith("#")
            for k, ln in enumerate(lines)
        )
    if re.fullmatch(r"#?[\w.,%-]+", item) and re.search(r"\d|^#|_|-", item):
        pattern = rf"(?<![\w.#-]){re.escape(item)}(?![\w-]|[.,]\d)"
        return re.search(pattern, text, re.I if item.startswith("#") else 0) is not None
    return item in text


def _quote(line: str, item: str | None) -> str:
    """A verbatim window of the line around `item`, so a reviewer can find it in the output."""
    line = line.strip()
    if len(line) <= QUOTE_CHARS:
        return line
    at = line.find(item) if item else 0
    start = max(0, min(at - QUOTE_CHARS // 3, len(line) - QUOTE_CHARS))
    return line[start : start + QUOTE_CHARS]


def _lines(content: str) -> list[str]:
    return [line for line in content.split("\n") if line.strip()]


def _pattern(habit: Habit) -> re.Pattern[str]:
    head, _, tail = habit.text.partition("{topic}")
    return re.compile(re.escape(head) + r".*" + re.escape(tail), re.I)


def section(lines: list[str], habit: Habit) -> str | None:
    """The line that holds the habit's content, wherever it stands: its heading does not count."""
    pattern = _pattern(habit)
    return next((ln for ln in lines if pattern.search(ln)), None)


def _doing(lines: list[str], wanted: Need, realized: bool = True) -> str | None:
    """A line of the answer that does what the expectation asks: it carries at least half of its
    concepts. The title, the simulated agent's covers line and item fillers are not content; nor,
    for a habit's expectation, a line the agent wrote to do a clause in that clause's own words
    (`realized` False): a habit is done by its content, not by a list of the words that name it."""
    for line in lines:
        if line.lstrip().startswith("#") or line.startswith(INTRO) or line.endswith(FILLER):
            continue  # a heading alone does nothing an expectation asks
        if not realized and line.endswith(f"{DONE}."):
            continue
        if covers(topic_of(line.replace(DONE, "")), wanted.topic):
            return line
    return None


def support(
    expectation: str, files: list[dict], task: str = "", world: World | None = None
) -> Support:
    """Files are tried in the order given; the first that supports the expectation is quoted."""
    if not files:
        return Support(False, False, "No output files were produced.")
    world = world or World()
    wanted = need(world, expectation)
    found = _positive(wanted, files, world)
    if not wanted.negated:
        return found
    if wanted.counts and not wanted.items:
        return found  # "no more than 150 words" is a count, not a negation
    if not found.passed:
        # "Does not speculate about the root cause" is broken by a cause section, whatever else
        # it says: what a negation forbids is any of the behaviours it names.
        for habit in habits(world):
            if (habit.cues & wanted.topic) - LAYOUT_CUES and not found.passed:
                found = _habit(wanted, habit, files)
    if found.passed:
        return Support(False, True, found.evidence + " It does what the expectation forbids.")
    return Support(True, True, "None of the outputs does what the expectation forbids.")


def _positive(wanted: Need, files: list[dict], world: World) -> Support:
    if wanted.counts:
        return _counts(wanted, files)
    if wanted.items:
        return _items(wanted, files)
    if wanted.habit is not None:
        return _habit(wanted, wanted.habit, files)
    return _specific(world, wanted, files)


def _counts(wanted: Need, files: list[dict]) -> Support:
    """Every count the expectation states, in the main output (the longest file)."""
    main = max(files, key=lambda f: len(f["content"]))
    measured = [(c, measure(main["content"], c.unit)) for c in wanted.counts]
    said = "; ".join(f"{n} {c.unit} (wanted {c.words()})" for c, n in measured)
    if all(c.holds(n) for c, n in measured) and (not wanted.items or _items(wanted, files).passed):
        return Support(True, True, f"Counted in {main['path']}: {said}.")
    close = all(abs(n - c.n) <= max(1, c.n // 10) for c, n in measured)
    return Support(False, close, f"Counted in {main['path']}: {said}.")


def _items(wanted: Need, files: list[dict]) -> Support:
    """Every item as written in one file: a value nobody wrote is absent, whatever else is there."""
    partial: tuple[str, list[str]] | None = None
    for f in files:
        lines = _lines(f["content"])
        quotes, missing = [], []
        for item in wanted.items:
            line = next((ln for ln in lines if has_item(ln, item)), None)
            if line is None and has_item(f["content"], item):
                line = item  # an item that spans lines is quoted as itself
            (quotes.append(_quote(line, item)) if line is not None else missing.append(item))
        if not missing:
            return Support(True, True, _found(f["path"], list(dict.fromkeys(quotes))))
        if quotes and partial is None:
            partial = (f["path"], quotes)
    absent = ", ".join(
        f"`{i}`" for i in wanted.items if not any(has_item(f["content"], i) for f in files)
    )
    if partial is not None:
        return Support(False, True, _found(*partial) + f"; but not {absent or 'all in one file'}.")
    return Support(False, False, f"Not found in the outputs: {absent}.")


def _habit(wanted: Need, habit: Habit, files: list[dict]) -> Support:
    for f in files:
        lines = _lines(f["content"])
        line = section(lines, habit) or _doing(lines, wanted, realized=False)
        if line is None:
            continue
        found = _found(f["path"], [_quote(line, None)])
        if wanted.feasible or line != section(lines, habit):
            return Support(True, True, found)
        return Support(False, True, found + "; but it does not show what the expectation asks.")
    return Support(
        False, False, "Not found in the outputs: nothing in them does what the expectation asks."
    )


def _specific(world: World, wanted: Need, files: list[dict]) -> Support:
    """A line that does it; else, in an answer of the simulated agent, whether it did it untold
    is a draw fixed by the world, the expectation and the answer's covers line (so the grader and
    the comparator agree on it, and a skill cannot buy it). A negated expectation never leans on that draw."""
    for f in files:
        lines = _lines(f["content"])
        line = _doing(lines, wanted)
        if line is not None:
            return Support(True, True, _found(f["path"], [_quote(line, None)]))
    if not wanted.negated:
        for f in files:
            intro = next((ln for ln in _lines(f["content"]) if ln.startswith(INTRO)), None)
            # Keyed on the covers line, which the agent writes before it reads the skill: the
            # same run of the same task meets it or not whatever the skill says.
            if intro and draw(world, "meets", wanted.key, intro) < task_rate(world, wanted.key):
                return Support(True, True, _found(f["path"], [_quote(intro, None)]))
    return Support(
        False,
        bool(wanted.topic),
        "Not found in the outputs: nothing in them does what the expectation asks.",
    )


def _found(path: str, quotes: list[str]) -> str:
    return f"Found in {path}: " + " … ".join(f'"{q}"' for q in quotes[:MAX_QUOTES])
