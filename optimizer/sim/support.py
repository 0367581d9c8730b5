"""When the simulated judge may pass an expectation: only on content that meets it, quoted word for
word from one output file. What counts as content depends on the expectation's cause in the world
(sim/latent.py): its items as written (a value may also come with the section that carries the
inputs' figures), the section its hidden habit produces, or, for an expectation only the task
bears on, a draw fixed by the world and the output. A line that restates an expectation is never
evidence: a restatement is not content, and the agent never writes the skill's sentences."""

from __future__ import annotations

import re
from dataclasses import dataclass

from optimizer.sim.latent import HABITS, Habit, Need, World, draw, need, task_rate
from optimizer.sim.text import snippets

QUOTE_CHARS = 160  # of one quoted passage: enough to read the support in context
MAX_QUOTES = 3
INTRO = "This answer covers"


@dataclass(frozen=True)
class Support:
    passed: bool
    partial: bool  # close enough that a noisy judge may pass it, with a quote
    evidence: str


def has_item(text: str, item: str) -> bool:
    """A snippet or a quoted value appears as written; a number or a colour as a whole token, so
    "12" is not found inside "112" nor "#fff" inside "#ffffff"."""
    if re.fullmatch(r"#?[\w.,%]+", item) and re.search(r"\d|^#", item):
        return re.search(rf"(?<![\w.#]){re.escape(item)}(?![\w]|[.,]\d)", text) is not None
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


def section(lines: list[str], habit: Habit) -> str | None:
    """The first line of the habit's section, when the file has that heading with text under it."""
    for k, line in enumerate(lines[:-1]):
        if line.strip() == habit.heading and not lines[k + 1].lstrip().startswith("#"):
            return lines[k + 1]
    return None


def support(expectation: str, files: list[dict], task: str = "",
            world: World | None = None) -> Support:
    """Files are tried in the order given; the first that supports the expectation is quoted."""
    if not files:
        return Support(False, False, "No output files were produced.")
    world = world or World()
    wanted = need(world, expectation)
    if wanted.items:
        return _items(wanted, expectation, files, task)
    if wanted.habit is not None:
        return _habit(wanted, wanted.habit, files)
    return _task_bound(world, wanted, files)


def _items(wanted: Need, expectation: str, files: list[dict], task: str) -> Support:
    """Every item as written in one file; a value the task's prompt does not hold (it sits in the
    input files) may instead come with the figures section, which carries the inputs' values."""
    formats = set(snippets(expectation))
    partial: tuple[str, list[str]] | None = None
    for f in files:
        lines = _lines(f["content"])
        carried = section(lines, HABITS[0])
        quotes, missing = [], []
        for item in wanted.items:
            line = next((ln for ln in lines if has_item(ln, item)), None)
            if line is None and has_item(f["content"], item):
                line = item  # an item that spans lines is quoted as itself
            if line is None and item not in formats and carried and not has_item(task, item):
                line = carried
            (quotes.append(_quote(line, item)) if line is not None else missing.append(item))
        if not missing:
            return Support(True, True, _found(f["path"], list(dict.fromkeys(quotes))))
        if quotes and partial is None:
            partial = (f["path"], quotes)
    absent = ", ".join(f"`{i}`" for i in wanted.items if not any(
        has_item(f["content"], i) for f in files))
    if partial is not None:
        return Support(False, True, _found(*partial) + f"; but not {absent or 'all in one file'}.")
    return Support(False, False, f"Not found in the outputs: {absent}.")


def _habit(wanted: Need, habit: Habit, files: list[dict]) -> Support:
    for f in files:
        line = section(_lines(f["content"]), habit)
        if line is None:
            continue
        found = _found(f["path"], [habit.heading, _quote(line, None)])
        if wanted.feasible:
            return Support(True, True, found)
        return Support(False, True, found + "; but it does not show what the expectation asks.")
    return Support(False, False, f"Not found in the outputs: no {habit.heading.lstrip('# ')} "
                                 "section or anything that does its work.")


def _task_bound(world: World, wanted: Need, files: list[dict]) -> Support:
    """Only the task bears on it: whether this answer meets it is a draw fixed by the world, the
    expectation and the answer's text, so the grader and the comparator agree on it."""
    for f in files:
        lines = _lines(f["content"])
        line = next((ln for ln in lines if ln.startswith(INTRO)), lines[0] if lines else "")
        rate = task_rate(world, wanted.key) if wanted.feasible else 0.0
        if line and draw(world, "meets", wanted.key, f["content"]) < rate:
            return Support(True, True, _found(f["path"], [_quote(line, None)]))
    return Support(False, bool(wanted.feasible), "Not found in the outputs: nothing in them "
                   "does what the expectation asks.")


def _found(path: str, quotes: list[str]) -> str:
    return f"Found in {path}: " + " … ".join(f'"{q}"' for q in quotes[:MAX_QUOTES])
