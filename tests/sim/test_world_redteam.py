"""bench/world_redteam.py's edits of SKILL.md: each one yields a SKILL.md that still parses, with
its front matter as written, and does the edit it is named for. Scores are the bench's business
(the world they measure keeps changing), so none is asserted here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from optimizer.inputs.skillmd import front_matter_problems, parse_skill_md

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "world_redteam.py"


def load_bench():
    before = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location("world_redteam", BENCH)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # a dataclass looks its module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = before


redteam = load_bench()
CASE = next(redteam.Case(*found) for found in redteam.skills() if found[0] == "theme-factory")
EDITED = redteam.edits_of(CASE)


def stacked() -> str:
    """Every single edit applied in turn: the longest combination the greedy pass could build."""
    text = CASE.reference
    for edit in redteam.all_edits(CASE).values():
        text = edit(text, CASE)
    return text


@pytest.mark.parametrize("name", [*EDITED, "all stacked"])
def test_every_edit_is_a_valid_skill_md_with_its_front_matter_kept(name):
    text = stacked() if name == "all stacked" else EDITED[name]
    assert text.startswith(redteam.split(CASE.v0)[0])
    doc = parse_skill_md(text)
    assert doc.front_matter == parse_skill_md(CASE.v0).front_matter
    assert front_matter_problems(doc) == []
    if name not in redteam.REFERENCES:
        assert text != CASE.reference, name


def test_the_families_of_edits_the_search_tries_are_all_there():
    names = " | ".join(EDITED)
    for family in ("clear x2", "clear x10", "clear x50", "checklist", "reworded", "soup line",
                   "soup clauses x10", "fenced v0", "fenced example", "clear first",
                   "v0 prose deleted", "delete v0 line", "hard limit"):  # fmt: skip
        assert family in names, family


def test_each_edit_does_what_its_name_says():
    clear, body = CASE.clear, CASE.body
    assert all(EDITED["clear x10"].count(line) == 10 for line in clear)
    assert EDITED["hard limit"].rstrip().endswith(redteam.LIMIT)
    assert EDITED["clear x10 + hard limit"].count(clear[0]) == 10
    assert "```\n" + body + "\n```" in EDITED["fenced v0 + soup x10"]
    assert EDITED["fenced example"].rstrip().endswith("```")
    first = EDITED["clear first"]
    assert first.index(clear[0]) < first.index(body) and len(first) == pytest.approx(
        len(CASE.reference), abs=2
    )
    prose = redteam.v0_lines(CASE)
    assert prose and not any(line in EDITED["v0 prose deleted"].split("\n") for line in prose)
    assert all(line in EDITED["v0 prose deleted"] for line in clear)
    assert prose[0] not in EDITED["delete v0 line 1"].split("\n")
    assert prose[1] in EDITED["delete v0 line 1"].split("\n")


def test_restatements_reword_each_expectation_and_soups_carry_its_words():
    expected = CASE.expected
    added = EDITED["restate x4 reworded"][len(CASE.reference) :].strip().split("\n")
    assert len(added) == 4 * len(expected)
    rounds = [added[k * len(expected) : (k + 1) * len(expected)] for k in range(4)]
    assert len({line.lower() for line in added}) == len(added)
    # The first round restates each expectation verbatim, the later ones reword some of them.
    assert all(t[1:].lower() in line.lower() for t, line in zip(expected, rounds[0], strict=True))
    assert any(t[1:].lower() not in line for t, line in zip(expected, rounds[1], strict=True))
    assert redteam.reword("Does not use pure black", 1) == "never apply pure black"
    soup = EDITED["soup clauses x10"].rstrip("\n").split("\n")[-10:]
    assert len(set(soup)) == 1 and ";" in soup[0]
    assert "#22313f" in soup[0] and "playfair" in soup[0]
    assert all(len(clause.split()) <= 6 for clause in soup[0][2:].split("; "))
