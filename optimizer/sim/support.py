"""When the simulated judge may pass an expectation: only when a passage of one output file, as
rendered for the judge, supports it, and the evidence quotes that passage word for word. Without
this rule the simulator rewards overfitting: an answer that merely shares topic words with an
expectation ("uses the colour #d97757" against "This answer covers short, html, page") passed,
and the loop learnt to chase the judge instead of the task."""

from __future__ import annotations

import re
from dataclasses import dataclass

from optimizer.sim.text import all_stems, facts, snippets, stems, strip_facts, strip_snippets

PASS_WORDS = 0.6  # share of an expectation's content words the supporting file must contain
PARTIAL_WORDS = 0.3  # a lenient judge may pass on this much, and quotes what it leant on
QUOTE_CHARS = 160  # of one quoted passage: enough to read the support in context
MAX_QUOTES = 3


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


def _line_with(lines: list[str], item: str) -> str:
    # An item that spans lines (a snippet with a line break in it) is quoted as itself.
    return next((line for line in lines if has_item(line, item)), item)


def _share(wanted: set[str], text: str) -> float:
    return len(wanted & all_stems(text)) / len(wanted) if wanted else 1.0


def support(expectation: str, files: list[dict]) -> Support:
    """Verbatim items (snippets in backticks, numbers, colours, quoted values) must all appear in
    one file, with most content words of the expectation in that file; an expectation of words
    only needs one line that holds most of them, read with its file name and section heading. Files are tried in the order given; the first
    that supports the expectation is quoted."""
    if not files:
        return Support(False, False, "No output files were produced.")
    items = snippets(expectation) + facts(strip_snippets(expectation))
    wanted = stems(strip_facts(strip_snippets(expectation)))
    partial: tuple[str, list[str]] | None = None
    for f in files:
        text = f"{f['path']}\n{f['content']}"
        lines = [line for line in f["content"].split("\n") if line.strip()]
        if items:
            if any(not has_item(f["content"], item) for item in items):
                continue
            quotes = list(dict.fromkeys(_quote(_line_with(lines, i), i) for i in items))
            share = _share(wanted, text)
        else:
            scored = [(_share(wanted, f"{f['path']}\n{head}\n{line}"), -k, line)
                      for k, (head, line) in enumerate(_with_headings(lines))]
            share, _, best = max(scored, default=(0.0, 0, ""))
            quotes = [_quote(best, None)] if best else []
        if share >= PASS_WORDS and quotes:
            return Support(True, True, _found(f["path"], quotes))
        if share >= PARTIAL_WORDS and quotes and partial is None:
            partial = (f["path"], quotes)
    missing = _missing(items, wanted, files)
    if partial is not None:
        return Support(False, True, _found(*partial) + f"; but not {missing}.")
    return Support(False, False, f"Not found in the outputs: {missing}.")


def _with_headings(lines: list[str]) -> list[tuple[str, str]]:
    """Each line with the heading it sits under: a passage is read in its section, as a judge
    reads "seven" under "# Heron count"."""
    out, head = [], ""
    for line in lines:
        head = line if line.lstrip().startswith("#") else head
        out.append((head, line))
    return out


def _found(path: str, quotes: list[str]) -> str:
    return f"Found in {path}: " + " … ".join(f'"{q}"' for q in quotes[:MAX_QUOTES])


def _missing(items: list[str], wanted: set[str], files: list[dict]) -> str:
    hay = "\n".join(f"{f['path']}\n{f['content']}" for f in files)
    absent = [f"`{i}`" for i in items if not has_item(hay, i)]
    absent += sorted(wanted - all_stems(hay))
    return ", ".join(absent[:8]) or "all of it in one place"
