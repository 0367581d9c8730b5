"""A proposal that copies a train eval's specific values into the skill (docs/design.md §3): the
values are ids, numbers, colours, file names and quoted phrases of the train evals' prompts,
expected outputs, expectations, checks and input files; common words, small numbers and the ids
of checks ("S2", a label of the eval file that carries no task's content) are not values.
A value counts as copied when a file of the candidate holds it and the same file of its parent
did not. The proposer gets the copied values back once to write a general instruction instead;
a proposal that still copies them is refused (search/propose.py). So is one that restates the evals'
wording (EvalWording): a run of RUN_WORDS words of a train expectation or check description, or a
check's id ("S2:"), new in the candidate. Pure functions of the texts."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from optimizer.inputs import skill as skills
from optimizer.inputs.evalset import Eval

_VALUE = re.compile(
    r'"([^"\n]{3,80})"|\u201c([^\u201d\n]{3,80})\u201d|(?<![\w`])\'([^\'\n]{3,80})\'(?![\w])'
    r"|(?<![\w#])(#[0-9a-fA-F]{3,8})(?![\w])"
    r"|(?<![\w.#/-])([$€£]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)*(?:%|[kKmMbB](?![a-z]))?)(?!\w|\.\w)"
    r"|(?<![\w/-])([A-Za-z]+[-_]\d[\w-]*|[A-Z]{2,}\d[\w-]*)(?![\w])"
    r"|(?<![\w.-])([\w-]+\.(?:csv|tsv|json|xlsx|xls|txt|pdf|docx|png|jpg|svg|html|xml|yaml))\b"
)
INPUT_CHARS = 200_000  # what is read of an input file: its values, not all its rows


def values_of(text: str, *, small_numbers: bool = True) -> set[str]:
    """The specific values a text names. A number is one with a decimal point, a currency or a unit,
    or with two digits or more (three without `small_numbers`: an input file's table holds every
    small count)."""
    found = set()
    for m in _VALUE.finditer(text):
        value = next(g for g in m.groups() if g is not None).strip()
        if m.group(5) is not None:
            digits = sum(c.isdigit() for c in value)
            marked = value != value.strip("$€£%kKmMbB") or "." in value
            if digits < (1 if marked else 2 if small_numbers else 3):
                continue
        if value:
            found.add(value)
    return found


def train_values(evals: Iterable[Eval], root: Path) -> frozenset[str]:
    """Every specific value of the train evals: their words and their input files (under root)."""
    found: set[str] = set()
    for ev in evals:
        checks = [str(getattr(c, "description", "") or "") for c in ev.structural]
        for text in (ev.prompt, ev.expected_output, *ev.expectations, *checks):
            found |= values_of(text)
        # An expectation's whole wording is not a value: one shared by several evals ("The
        # `## Columns` table has a `missing` count per column") is the kind of task's format.
        for rel in ev.files:
            path = root / rel
            try:
                text = path.read_text(encoding="utf-8", errors="replace")[:INPUT_CHARS]
            except OSError:
                continue
            found |= values_of(text, small_numbers=False)
    return frozenset(found)


def copied(parent: Path, candidate: Path, values: frozenset[str]) -> list[str]:
    """The values a candidate's text files hold that the same files of its parent did not, sorted."""
    out: set[str] = set()
    for content, old_text in _texts(parent, candidate):
        out |= {v for v in values if _holds(content, v) and not _holds(old_text, v)}
    return sorted(out)


def _texts(parent: Path, candidate: Path) -> list[tuple[str, str]]:
    """Each text file of the candidate beside the same file of its parent ("" when new), by path."""
    before = skills.files_of(parent, include_evals=False)
    pairs = []
    for rel, content in sorted(skills.files_of(candidate, include_evals=False).items()):
        if isinstance(content, bytes):
            continue
        old = before.get(rel)
        pairs.append((content, old if isinstance(old, str) else ""))
    return pairs


def _holds(text: str, value: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(value)}(?![\w])", text) is not None


def problem(found: list[str]) -> str:
    """The sentence the proposer gets back (and a refusal's reason)."""
    shown = ", ".join(repr(v) for v in found[:6]) + (" …" if len(found) > 6 else "")
    return (
        f"the proposal copies specific values of the evals into the skill ({shown}): write the "
        "instruction in general terms that would help on tasks you have not seen, without "
        "those values."
    )


# The words an instruction may share with an expectation by chance ("the report has a `## Notes`
# section" is 6); a run this long is the expectation's sentence restated, not a kind of work.
RUN_WORDS = 7


@dataclass(frozen=True)
class EvalWording:
    """The train evals' own wording: every run of RUN_WORDS words of an expectation or a
    structural check's description (to the text it comes from), and the ids of their checks and
    rubric dimensions."""

    runs: Mapping[tuple[str, ...], str] = field(default_factory=dict)
    ids: frozenset[str] = frozenset()


def wording_of(evals: Iterable[Eval]) -> EvalWording:
    runs: dict[tuple[str, ...], str] = {}
    ids: set[str] = set()
    for ev in sorted(evals, key=lambda e: e.id):
        texts = [*ev.expectations, *(str(c.description or "") for c in ev.structural)]
        for text in texts:
            for run in _runs(text):
                runs.setdefault(run, text)
        # A check's id shaped as the eval files write them ("S2"): a rubric dimension's id
        # ("Q1", "accuracy") is too often a word of a skill's own ("Q1: Jan-Mar").
        ids |= {str(c.id) for c in ev.structural if re.fullmatch(r"[A-Z]{1,3}\d+", str(c.id))}
    return EvalWording(runs, frozenset(ids))


def restated(parent: Path, candidate: Path, wording: EvalWording) -> list[str]:
    """The eval texts (and check ids, as "S2:") a candidate's text files restate that no text file
    of its parent held (a sentence moved from SKILL.md to a reference is not new), in the order
    of the texts."""
    found: dict[str, None] = {}
    held = "\n".join(text for text in _parent_texts(parent))
    had = _runs(held)
    for content, _ in _texts(parent, candidate):
        new_runs = _runs(content) - had
        for run in sorted(new_runs & wording.runs.keys()):
            found.setdefault(wording.runs[run], None)
        for check in sorted(wording.ids):
            mark = re.compile(rf"(?<![\w]){re.escape(check)}:")
            if mark.search(content) and not mark.search(held):
                found.setdefault(f"{check}:", None)
    return list(found)


def _parent_texts(parent: Path) -> list[str]:
    files = skills.files_of(parent, include_evals=False)
    return [text for _, text in sorted(files.items()) if isinstance(text, str)]


def restated_problem(found: list[str]) -> str:
    """The sentence the proposer gets back (and a refusal's reason)."""
    shown = "; ".join(repr(t) for t in found[:3]) + (" …" if len(found) > 3 else "")
    return (
        f"the proposal restates the evals' own wording ({shown}): say what work a good answer "
        "does, in words of your own that fit tasks you have not seen, never an expectation's "
        "sentence or a check's id."
    )


def _runs(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(words[k : k + RUN_WORDS]) for k in range(len(words) - RUN_WORDS + 1)}
