"""An answer as a judge reads it: its lines with the heading each stands under and the line that
introduces its lists and code, where a line stands, whether a named item is there as written, and
the verbatim quotes a verdict leans on. Pure functions of the text."""

from __future__ import annotations

import re
from dataclasses import dataclass

from optimizer.sim.compose import INTRO

QUOTE_CHARS = 160  # of one quoted passage: enough to read the support in context
MAX_QUOTES = 3
ITEM_FILLER = (
    "under this heading."  # the paragraph an item heading gets when nothing asked for more
)


@dataclass(frozen=True)
class Line:
    text: str
    heading: str  # the heading it stands under ("" above the first)
    index: int  # its place among the file's non-empty lines
    intro: str = ""  # the line that introduces the list or the code it belongs to
    code: bool = False  # inside a fenced block: a command or code, content without prose


def lines_of(content: str) -> list[str]:
    return [line for line in content.split("\n") if line.strip()]


def read(content: str) -> list[Line]:
    """The non-empty lines of a file with the heading each stands under and, for the entries of
    a list and the lines of a fenced block, the line that introduces them ("Restart the workers:"
    over the command)."""
    found: list[Line] = []
    heading, intro, fenced = "", "", False
    for i, text in enumerate(lines_of(content)):
        if text.lstrip().startswith("```"):
            fenced = not fenced
            continue
        entry = re.match(r"\s*(?:[-*•]|\d+[.)])\s+\S", text) is not None
        if fenced or entry:
            found.append(Line(text, heading, i, intro, code=fenced))
            continue
        if re.match(r"#{1,6}\s", text) or re.fullmatch(r"\s*\*\*[^*]+\*\*\s*", text):
            heading, intro = text, ""  # a line in bold alone is a heading by another name
        else:
            intro = text
        found.append(Line(text, heading, i))
    return found


def has_item(text: str, item: str) -> bool:
    """A snippet or a quoted value appears as written; a number, a colour or an id as a whole
    token, so "12" is not found inside "112" nor "#fff" inside "#ffffff". A heading counts only
    with content under it: a heading alone is no section."""
    if re.match(r"#+\s", item):
        lines = lines_of(text)
        return any(
            ln.strip() == item and k + 1 < len(lines) and not lines[k + 1].lstrip().startswith("#")
            for k, ln in enumerate(lines)
        )
    if re.fullmatch(r"#?[\w.,%-]+", item) and re.search(r"\d|^#|_|-", item):
        pattern = rf"(?<![\w.#-]){re.escape(item)}(?![\w-]|[.,]\d)"
        return re.search(pattern, text, re.I if item.startswith("#") else 0) is not None
    return item.lower() in text.lower() if item[:1].isalpha() and " " in item else item in text


def quote(line: str, item: str | None = None) -> str:
    """A verbatim window of the line around `item`, so a reviewer can find it in the output."""
    line = line.strip()
    if len(line) <= QUOTE_CHARS:
        return line
    at = line.find(item) if item else 0
    start = max(0, min(at - QUOTE_CHARS // 3, len(line) - QUOTE_CHARS))
    return line[start : start + QUOTE_CHARS]


def content(line: Line) -> bool:
    """Lines that can carry content: not a heading, the simulated agent's covers line or an
    item heading's filler."""
    text = line.text
    return not (
        text.lstrip().startswith("#")
        or text == line.heading
        or text.startswith(INTRO)
        or text.endswith(ITEM_FILLER)
    )


def placed(line: Line, lines: list[Line], where: str) -> bool:
    """Whether a line stands where an expectation wants it: the first or the last part."""
    body = [ln for ln in lines if content(ln)]
    if not where or not body:
        return True
    if where == "first":
        return line.index <= body[min(2, len(body) - 1)].index
    last_heading = max((ln.index for ln in lines if ln.text.lstrip().startswith("#")), default=-1)
    return line.index > last_heading or line.index >= body[max(0, len(body) - 3)].index


def quoted(path: str, quotes: list[str]) -> str:
    return f"Found in {path}: " + " … ".join(f'"{q}"' for q in quotes[:MAX_QUOTES])
