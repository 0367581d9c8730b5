"""How the terminal views write numbers, money, times and intervals, and how they print rich
renderables. Never prints model-written text as rich markup."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from rich.console import Console

from optimizer import words
from optimizer.budget.pace import clock
from optimizer.report.caveats import evals_note

COLOURS = {"won": "green", "lost": "red", "tie": "yellow", "baseline": "blue"}


def emit(console: Console, *items: object) -> None:
    # The CLI's console soft-wraps (no cropping of plain lines); panels, trees and tables must
    # still fold long model-written text inside their borders rather than crop it.
    console.print(*items, soft_wrap=False)


def num(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def signed(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:+.{digits}f}"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def money(x: float | None) -> str:
    return words.dollars(x)  # one way to write dollars, in every view and message


def duration(seconds: float | None) -> str:
    return clock(seconds)  # one way to write a duration, here and on the live progress line


def interval(
    ci: Sequence[float] | None,
    n: object = None,
    unit: str | None = "eval",
    *,
    sign: bool = True,
    level: str = "",
) -> str:
    """' [+0.010, +0.090] 95% CI (n=3 evals)': an interval with its level (two of one Δ at different
    levels must not read as a disagreement) and how few evals it rests on."""
    if not ci:
        return ""
    shown = signed if sign else num
    return f" [{shown(ci[0])}, {shown(ci[1])}]{' ' + level if level else ''}{evals_note(n, unit)}"


# A section as tags.tag writes it: attributes, or its content on the next line; so an inline
# <b> or a comparison such as "a <b" in model prose is left as it is.
_OPEN = re.compile(r'<([a-zA-Z_][\w-]*)((?:\s+[\w-]+="[^"]*")+\s*>\n?|\s*>\n)')
_ATTR = re.compile(r'([\w-]+)="([^"]*)"')
_CUT_TAG = re.compile(r"<[a-zA-Z_/][^<>]*$")  # a tag the text was cut in the middle of


def readable(text: str, limit: int = 600) -> str:
    """Model-written text for a person: the tagged sections of a prompt it quotes (`<comparison
    eval="1" …>`) become a plain lead-in ("comparison eval 1, …: "), and a text that was cut
    (an unclosed section, a half tag) or is longer than `limit` ends at a word with an ellipsis."""
    cut = bool(_CUT_TAG.search(text))
    text = _CUT_TAG.sub("", text)
    names = {m.group(1) for m in _OPEN.finditer(text)}
    close = (
        re.compile(r"\n?</(?:" + "|".join(map(re.escape, sorted(names))) + r")>") if names else None
    )
    cut = cut or (close is not None and len(_OPEN.findall(text)) > len(close.findall(text)))

    def lead_in(m: re.Match[str]) -> str:
        attrs = ", ".join(f"{_words(k)} {html.unescape(v)}" for k, v in _ATTR.findall(m.group(2)))
        return f"\n{m.group(1)}{' ' + attrs if attrs else ''}: "

    text = _OPEN.sub(lead_in, close.sub("", text) if close else text)
    text = re.sub(r"[ \t]*\n\s*", "\n", text).lstrip()
    if len(text) > limit:
        # One character past the limit says whether the cut fell between words or inside one.
        text, cut = text[:limit] + (" " if text[limit].isspace() else ""), True
    return clip_words(text) if cut else text.rstrip()


def _words(key: str) -> str:
    # output_a → "output A", the way the comparator's prompt names its two outputs.
    return re.sub(r"_([a-z])$", lambda m: " " + m.group(1).upper(), key).replace("_", " ")


def clip_words(text: str) -> str:
    """A text cut right after its last character, ended at its last whole word with an ellipsis:
    a text that ends in a letter or digit may end inside a word, whose start is dropped."""
    if re.search(r"\w$", text):
        text = re.sub(r"\S+$", "", text) or text
    return text.rstrip(" \n,;:—-") + "…"
