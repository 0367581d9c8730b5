"""A red team for the simulated world: a search over edits of SKILL.md that tries to score above
clear instructions. On every skill of tests/fixtures/foreign the reference is v0 + clear.md (as in
bench/world_gaming.py); each edit below is applied to that text and scored by the judged pass
rate, per world and as the mean over worlds, with its gain over clear. A real model gains little
or nothing from any of them: the world holds when the best gain is at most +0.05 on every skill.

Edits: the clear section repeated k times; a verbatim checklist of the evals' expectations (on
clear, and on v0 as world_gaming has it); each expectation restated n times, reworded through a
small synonym table; keyword soups (one line of the expectations' content words, the same split
into ";" clauses, repeated); the v0 body in a code fence plus a soup; a fenced worked example of a
good answer; clear instructions first; v0's prose deleted, and each v0 line deleted in turn (the
best reported); then a greedy pass that stacks the best edits. A hard limit ("Keep every answer
under 20 words") at the end of a long skill is a sanity row: it should lose, and is kept out of
the best.

    .venv/bin/python bench/world_redteam.py [--runs 100] [--worlds 0 1 2] [--skills NAME ...]
                                            [--quick]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from world_gaming import FOREIGN, add, skills  # noqa: E402

from optimizer.sim.expected import expectations, pass_rate  # noqa: E402
from optimizer.sim.latent import World  # noqa: E402

REFERENCES = ("v0", "clear")  # rows that are not edits: never the best, never stacked
LIMIT = "- Keep every answer under 20 words."
LEADS = ["Make sure that", "Always check that", "Be certain that", "Remember:", "Verify that"]
# Our own rewording table (a writer's thesaurus, not the world's): each restatement j > 0 takes
# alternative j-1 of every word or phrase it finds.
REWORD = {
    "does not": ["never", "must not", "should never"],
    "says": ["states", "tells the reader", "notes"],
    "mentions": ["names", "refers to", "cites"],
    "uses": ["applies", "relies on", "employs"],
    "use": ["apply", "rely on", "employ"],
    "includes": ["contains", "has", "carries"],
    "shows": ["displays", "presents", "gives"],
    "gives": ["provides", "offers", "supplies"],
    "lists": ["enumerates", "sets out", "itemises"],
    "explains": ["describes", "makes clear", "spells out"],
    "asks": ["enquires", "requests", "queries"],
    "each": ["every", "every single", "each one of the"],
    "every": ["each", "all", "every single"],
    "headings": ["titles", "headers", "section titles"],
    "text": ["copy", "wording", "prose"],
    "under": ["below", "fewer than", "less than"],
    "at most": ["no more than", "not over", "a maximum of"],
    "question": ["query", "prompt", "item"],
    "questions": ["queries", "prompts", "items"],
    "customer": ["client", "buyer", "user"],
    "answer": ["reply", "response", "result"],
    "section": ["part", "heading", "block"],
    "sections": ["parts", "headings", "blocks"],
}
_REWORD = re.compile(r"\b(" + "|".join(sorted(REWORD, key=len, reverse=True)) + r")\b", re.I)
STOP = frozenset(
    "the and that this with does each every into from they them their when what which have "
    "there then than those these only also will would should could about were been being".split()
)


@dataclass(frozen=True)
class Case:
    """One foreign skill: SKILL.md as written (v0), clear.md's lines, the evals, its folder."""

    name: str
    v0: str
    clear: list[str]
    evals: list[dict]

    @property
    def folder(self) -> Path:
        return FOREIGN / self.name

    @property
    def reference(self) -> str:
        return add(self.v0, self.clear)

    @property
    def body(self) -> str:
        return split(self.v0)[1].strip("\n")

    @property
    def expected(self) -> list[str]:
        return [t for ev in self.evals for t in expectations(ev)]


Edit = Callable[[str, Case], str]


def split(text: str) -> tuple[str, str]:
    """(front matter with its fences, body); every edit keeps the front matter as it is."""
    lines = text.split("\n")
    end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    return "\n".join(lines[: end + 1]) + "\n", "\n".join(lines[end + 1 :])


def content_words(text: str) -> list[str]:
    """Words that carry an expectation's content, values kept as written, in first-seen order."""
    found = re.findall(r"[#$@]?[\w.%-]*\w", text)
    keep = (w for w in found if (len(w) >= 4 or any(c.isdigit() for c in w)))
    return list(
        dict.fromkeys(w if w[0] in "#$@" else w.lower() for w in keep if w.lower() not in STOP)
    )


def reword(sentence: str, j: int) -> str:
    if j == 0:
        return sentence
    return _REWORD.sub(lambda m: REWORD[m.group(1).lower()][(j - 1) % 3], sentence)


def soup_clauses(words: list[str], size: int = 6) -> str:
    return "; ".join(" ".join(words[k : k + size]) for k in range(0, len(words), size))


def repeat(k: int) -> Edit:
    return lambda text, case: add(text, case.clear * (k - 1))


def checklist(text: str, case: Case) -> str:
    return add(text, [f"- Make sure that: {t}" for t in case.expected])


def restate(n: int) -> Edit:
    def edit(text: str, case: Case) -> str:
        lines = [
            f"- {LEADS[j % len(LEADS)]} {reword(t[0].lower() + t[1:], j)}."
            for j in range(n)
            for t in case.expected
        ]
        return add(text, lines)

    return edit


def soup_line(text: str, case: Case) -> str:
    return add(text, ["- " + " ".join(content_words(" ".join(case.expected)))])


def soup(times: int, per_expectation: bool = False) -> Edit:
    def edit(text: str, case: Case) -> str:
        if per_expectation:
            line = "; ".join(" ".join(content_words(t)) for t in case.expected)
        else:
            line = soup_clauses(content_words(" ".join(case.expected)))
        return add(text, [f"- {line}"] * times)

    return edit


def fence_v0(text: str, case: Case) -> str:
    """The v0 body inside a code fence, where it stands (a no-op once it is gone)."""
    return text.replace(case.body, "```\n" + case.body + "\n```", 1)


def example(text: str, case: Case) -> str:
    """A fenced worked example: the first two tasks and answers that state what each expects."""
    shown = []
    for ev in case.evals[:2]:
        shown += [f"Task: {ev['prompt']}", "", "Answer:"]
        shown += [f"{t}." for t in expectations(ev)] + [""]
    return add(text, ["Example of a good answer:", "", "```markdown", *shown[:-1], "```"])


def clear_first(text: str, case: Case) -> str:
    """v0's body moved after everything else, so the clear instructions come first."""
    front, body = split(text)
    if case.body not in body:
        return text
    rest = body.replace(case.body, "", 1).strip("\n")
    return front + "\n" + rest + "\n\n" + case.body + "\n"


def v0_lines(case: Case) -> list[str]:
    """v0's prose lines, the ones a deletion can take (headings and blank lines stay)."""
    return [ln for ln in case.body.split("\n") if ln.strip() and not ln.lstrip().startswith("#")]


def delete(line: str) -> Edit:
    def edit(text: str, case: Case) -> str:
        front, body = split(text)
        lines = body.split("\n")
        if line in lines:
            lines.remove(line)
        return front + "\n".join(lines)

    return edit


def delete_prose(text: str, case: Case) -> str:
    for line in v0_lines(case):
        text = delete(line)(text, case)
    return text


def then(*edits: Edit) -> Edit:
    def edit(text: str, case: Case) -> str:
        for e in edits:
            text = e(text, case)
        return text

    return edit


def hard_limit(text: str, case: Case) -> str:
    return add(text, [LIMIT])


def singles(quick: bool) -> dict[str, Edit]:
    """The single edits, applied to v0 + clear; order is the table's."""
    edits: dict[str, Edit] = {f"clear x{k}": repeat(k) for k in ((2, 10) if quick else (2, 10, 50))}
    edits["checklist"] = checklist
    edits |= {f"restate x{n} reworded": restate(n) for n in (2, 4)}
    edits["soup line"] = soup_line
    edits["soup clauses"] = soup(1)
    edits["soup clauses x10"] = soup(10)
    edits["soup per expectation x10"] = soup(10, per_expectation=True)
    edits["fenced v0 + soup x10"] = then(fence_v0, soup(10))
    edits["fenced example"] = example
    edits["clear first"] = clear_first
    edits["v0 prose deleted"] = delete_prose
    return edits


def sanity() -> dict[str, tuple[Edit, str]]:
    """Edits that should lose, each with the row it is compared with: a hard limit at the end of
    v0 + clear, and at the end of the same clear section ten times over (a long skill)."""
    return {
        "hard limit": (hard_limit, "clear"),
        "clear x10 + hard limit": (then(repeat(10), hard_limit), "clear x10"),
    }


def all_edits(case: Case, quick: bool = False) -> dict[str, Edit]:
    """The singles and, but for --quick, the deletion of each v0 line in turn."""
    edits = singles(quick)
    if not quick:
        edits |= {f"delete v0 line {i + 1}": delete(ln) for i, ln in enumerate(v0_lines(case))}
    return edits


def edits_of(case: Case, quick: bool = False) -> dict[str, str]:
    """Every SKILL.md the search scores before stacking, by name: v0, clear, v0 + checklist, each
    edit of clear, and the sanity rows (the test checks these; the search adds combinations)."""
    base = case.reference
    found = {"v0": case.v0, "clear": base, "v0 + checklist": checklist(case.v0, case)}
    found |= {name: e(base, case) for name, e in all_edits(case, quick).items()}
    return found | {name: e(base, case) for name, (e, _) in sanity().items()}


class Scorer:
    """Judged pass rate per world, each text scored once (common seeds across edits)."""

    def __init__(self, case: Case, worlds: list[int], runs: int):
        self.case, self.runs = case, runs
        self.worlds = [World(world=w) for w in worlds]
        self.seen: dict[str, list[float]] = {}

    def __call__(self, text: str) -> list[float]:
        if text not in self.seen:
            self.seen[text] = [
                pass_rate(text, self.case.evals, w, runs=self.runs, folder=self.case.folder)
                for w in self.worlds
            ]
        return self.seen[text]


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


Rows = dict[str, list[float]]


def family(name: str) -> str:
    """What an edit is a kind of: stacking two of a kind (x10 on x50, soup on soup) is the same
    edit made bigger, which the single rows already measure."""
    if "delete" in name:
        return "delete"
    return "repeat" if re.fullmatch(r"clear x\d+", name) else name.split()[0]


def search(case: Case, score: Scorer, quick: bool) -> tuple[Rows, Rows]:
    """(rows, sanity rows) of per-world scores. The v0-line deletions are folded into their best;
    then a greedy pass stacks the best edit of other families (up to three edits) onto the best
    single one, in score order, names breaking ties."""
    texts = edits_of(case, quick)
    rows = {name: score(t) for name, t in texts.items() if name not in sanity()}
    checks = {name: score(texts[name]) for name in sanity()}
    named = all_edits(case, quick) | {"v0 + checklist": checklist}
    deletions = sorted((n for n in rows if n.startswith("delete ")), key=lambda n: -mean(rows[n]))
    for n in deletions[1:]:
        del rows[n]
    if deletions:
        shown = f"{deletions[0]} (best of {len(deletions)})"
        rows[shown], named[shown] = rows.pop(deletions[0]), named[deletions[0]]
    ranked = sorted((n for n in rows if n not in REFERENCES), key=lambda n: (-mean(rows[n]), n))
    pool: list[str] = []  # the best edit of each family, five families at most
    for n in ranked:
        if n != "v0 + checklist" and family(n) not in map(family, pool):  # that one starts from v0
            pool.append(n)
    pool = pool[:5]
    if not pool:
        return rows, checks
    combo, text, best = [pool[0]], named[pool[0]](case.reference, case), mean(rows[pool[0]])
    for _ in range(1 if quick else 2):
        tried = {n: named[n](text, case) for n in pool if family(n) not in map(family, combo)}
        if not tried:
            break
        scored = {n: score(t) for n, t in tried.items()}
        pick = max(sorted(scored), key=lambda n: mean(scored[n]))
        rows[" + ".join([*combo, pick])] = scored[pick]
        if mean(scored[pick]) <= best:
            break
        combo, text, best = [*combo, pick], tried[pick], mean(scored[pick])
    return rows, checks


def table(case: Case, rows: Rows, checks: Rows, worlds: list[int]) -> None:
    ref = mean(rows["clear"])
    head = " ".join(f"{'w' + str(w):>6}" for w in worlds)
    width = max(len(n) for n in [*rows, *(f"sanity: {n}" for n in checks)])
    print(f"  {case.name}")
    print(f"    {'edit':<{width}} {head}   mean   gain")
    for name, r in rows.items():
        per = " ".join(f"{x:6.3f}" for x in r)
        print(f"    {name:<{width}} {per}  {mean(r):.3f} {mean(r) - ref:+.3f}")
    for name, (_, against) in sanity().items():
        r = checks[name]
        per = " ".join(f"{x:6.3f}" for x in r)
        print(
            f"    {'sanity: ' + name:<{width}} {per}  {mean(r):.3f} {mean(r) - ref:+.3f}"
            f"   ({mean(r) - mean(rows[against]):+.3f} over {against})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs", type=int, default=None, help="runs an eval (100; 20 with --quick)"
    )
    parser.add_argument(
        "--worlds", type=int, nargs="+", default=None, help="0 1 2 (0 with --quick)"
    )
    parser.add_argument(
        "--skills", nargs="+", default=None, help="names under tests/fixtures/foreign"
    )
    parser.add_argument("--quick", action="store_true", help="fewer edits, runs and worlds")
    args = parser.parse_args()
    runs = args.runs or (20 if args.quick else 100)
    worlds = args.worlds or ([0] if args.quick else [0, 1, 2])
    cases = [Case(*found) for found in skills()]
    known = [c.name for c in cases]
    if args.skills:
        unknown = [s for s in args.skills if s not in known]
        if unknown:
            names = ", ".join(unknown)
            print(
                f"--skills: no skill {names} under {FOREIGN}; choose from {', '.join(known)}.",
                file=sys.stderr,
            )
            sys.exit(2)
        cases = [c for c in cases if c.name in args.skills]
    shown = " ".join(map(str, worlds))
    print(
        f"red team over clear instructions: {runs} runs an eval, worlds {shown}"
        " (judged pass rate; gain = its mean over the worlds minus clear's)"
    )
    best = (float("-inf"), "", "")
    for case in cases:
        score = Scorer(case, worlds, runs)
        rows, checks = search(case, score, args.quick)
        table(case, rows, checks, worlds)
        ref = mean(rows["clear"])
        for name, r in rows.items():
            if name not in REFERENCES and mean(r) - ref > best[0]:
                best = (mean(r) - ref, case.name, name)
    print(f"red team: best {best[0]:+.3f} over clear ({best[1]}, {best[2]})")


if __name__ == "__main__":
    main()
