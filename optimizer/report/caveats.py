"""What a number rests on and what it does not say, for status, lineage and the report: intervals
kept inside the range they can take, with the count of evals behind them; what a version won
against and why a winner is not the current best; a sealed test that went backwards; splits too
small to conclude from. Reads only the run folder's own files; never writes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optimizer import schemas, words
from optimizer.decide import fdr
from optimizer.decide.stats import mean, mean_ci
from optimizer.grade.preview import natural_key
from optimizer.inputs.validate import small_suite
from optimizer.store.runs import Run

CONFIDENCE = 0.95  # of the intervals the morning shows over evals (train and sealed alike)

if TYPE_CHECKING:
    from optimizer.report.view import Node

# What a step's decision rested on. A step is a move of the search, not a claim: no view calls it
# "better" (only an adoption makes that claim, docs/design.md §16).
SCORE = (0.0, 1.0)
DELTA = (-1.0, 1.0)


def bounded(ci: Sequence[float | None] | None, bounds: tuple[float, float]) -> list[float] | None:
    """An interval clamped to what its number can take: folders written before benchmark.json
    clamped its intervals still hold raw t intervals (a score of 0.315 in [-0.922, 1.552])."""
    if not ci or ci[0] is None or ci[1] is None:
        return None
    low, high = bounds
    return [min(max(ci[0], low), high), max(min(ci[1], high), low)]


def score_interval(root: Path, label: str) -> tuple[list[float] | None, int | None]:
    """The 95% interval of a version's mean score over evals, from its benchmark.json, inside
    [0, 1] whatever wrote the file, and how many evals it rests on."""
    bench = _json(root / label / "benchmark.json") if re.fullmatch(r"v\d+", label) else None
    if not isinstance(bench, dict):
        return None, None
    stat = ((bench.get("run_summary") or {}).get("with_skill") or {}).get(
        "overall_efficiency"
    ) or {}
    rows = [
        r
        for r in bench.get("per_eval") or []
        if (r.get("with_skill") or {}).get("mean") is not None
    ]
    ci = bounded([stat.get("ci_low"), stat.get("ci_high")], SCORE)
    return ci, stat.get("ci_evals") or len(rows) or None


def verdict(node: Node, by_label: Mapping[str, Node], best: str | None) -> str:
    """'won against its parent v1 (a step on these tasks)', and for a winner that is not the
    current best, why not: a bare "won" next to another version's star reads as a contradiction."""
    decision, parent = node.decision, node.parent
    if decision not in ("won", "lost", "tie") or not parent:
        return ""
    text = f"{decision} against its parent {parent}"
    if decision == "won" and node.scope in ("tasks", "general"):
        units = "queries" if node.phase == "probe" else "evals"
        text += f" ({words.step_scope(str(node.scope), units)}"
        text += ")" if node.scope == "tasks" else "; the sealed test checks it)"
    if decision != "won" or best is None or node.label == best or best not in by_label:
        return text
    return f"{text}; not the best: {_why_not_best(node, by_label[best], by_label)}"


def promotions(nodes: list[Node]) -> str | None:
    """ "6 promotions in 20 decisions; at most 5% of such promotions are false on average": the
    night's family of promotions and what bounds it, from the decisions' own selection.json (the
    control they were made under), None before the promotion rule decided anything."""
    rows: list[fdr.RuleRow] = [
        {"version": n.label, "phase": n.phase, "decision": str(n.decision)}
        for n in nodes
        if n.decision in ("won", "lost", "tie")
    ]
    nights = [n.night for n in nodes if isinstance(n.night, dict)]
    ruled = [r for r in rows if r["phase"] in fdr.RULE_PHASES]
    if not ruled:
        return None
    if nights and isinstance(bound := nights[0].get("fdr"), int | float | str):
        return fdr.summary(rows, float(bound))
    alphas = [float(n.alpha) for n in nodes if isinstance(n.alpha, int | float)]
    if not alphas:  # decided before the rule recorded its α: say nothing it did not claim
        return None
    return fdr.summary(rows, None, max(alphas))


def _ancestors(label: str | None, by_label: Mapping[str, Node]) -> list[str]:
    out: list[str] = []
    node = by_label.get(label or "")
    up = node.parent if node else None
    while up and up not in out:
        out.append(up)
        node = by_label.get(up)
        up = node.parent if node else None
    return out


def stray_wins(nodes: list[Node], best: str | None) -> dict[str, str]:
    """Winners off the current best's line, with their verdicts: the ones a reader asks about.
    Winners on the line are the path the best was built along."""
    by_label = {n.label: n for n in nodes}
    line = {best, *_ancestors(best, by_label)}
    return {
        n.label: n.verdict or "won" for n in nodes if n.decision == "won" and n.label not in line
    }


def _why_not_best(node: Node, best: Node, by_label: Mapping[str, Node]) -> str:
    if node.label in _ancestors(best.label, by_label):  # the usual, happy reason
        return f"{best.label}, built on it, won after it"
    mine, theirs = node.score, best.score
    scores = "" if mine is None or theirs is None else f" ({theirs:.3f} vs {mine:.3f})"
    if mine is not None and theirs is not None and theirs > mine:
        return f"{best.label} scores higher{scores}"
    # The loop promotes a winner only when it beat the best itself or scores above it.
    return f"it beat {node.parent}, not the current best {best.label}{scores}"


def train_delta(test: object, nodes: list[Node]) -> float | None:
    """What the sealed test's best gained over v0 on the train evals, to set beside its sealed
    Δ: a gain that shows on train only is fitted to the tasks the loop saw."""
    if not isinstance(test, dict) or not test.get("best") or test.get("best") == "v0":
        return None
    scores = {n.label: n.score for n in nodes}
    base, final = scores.get("v0"), scores.get(test["best"])
    return None if base is None or final is None else round(final - base, 4)


def paired(v0: dict[str, float], best: dict[str, float]) -> schemas.SummaryNumbers | None:
    """best − v0 paired over the evals both scored, with a Student-t interval over evals."""
    shared = sorted(set(v0) & set(best), key=natural_key)
    if not shared:
        return None
    diffs = [best[e] - v0[e] for e in shared]
    low = high = None
    if len(diffs) >= 2:
        low, high = mean_ci(diffs, CONFIDENCE, bounds=(-1.0, 1.0))
    return schemas.SummaryNumbers(
        v0=round(mean([v0[e] for e in shared]), 4),
        best=round(mean([best[e] for e in shared]), 4),
        delta=round(mean(diffs), 4),
        low=None if low is None else round(low, 4),
        high=None if high is None else round(high, 4),
        confidence=CONFIDENCE,
        level=words.ci(CONFIDENCE),
        evals=len(shared),
    )


def sealed_numbers(test: object, best: str) -> schemas.SummaryNumbers | None:
    """The final best against v0 on the sealed evals (runs.test_json), paired, with its
    interval."""
    if not isinstance(test, dict) or test.get("incomplete"):
        return None
    versions = test.get("versions") or {}
    v0 = (versions.get("v0") or {}).get("per_eval") or {}
    final = (versions.get(best) or versions.get("v0") or {}).get("per_eval") or {}
    return paired(
        {str(k): v for k, v in v0.items() if v is not None},
        {str(k): v for k, v in final.items() if v is not None},
    )


def sealed_verdict(numbers: schemas.SummaryNumbers, best: str) -> str:
    """'sealed test (3 evals): v3 0.610 vs v0 0.550, Δ +0.060 [-0.080, +0.200] 95% CI over the
    evals: cannot tell': the size of the test and its interval beside the two scores, and where
    the interval lies (above v0, below v0, or cannot tell; one eval gives no interval). Never
    "better": only an adoption, on fresh runs, makes that claim."""
    head = (
        f"sealed test ({words.plural(numbers.evals, 'eval')}): {best} {numbers.best:.3f} vs v0 "
        f"{numbers.v0:.3f}, Δ {numbers.delta:+.3f}"
    )
    if numbers.low is None or numbers.high is None:
        return f"{head} (no interval from one eval): cannot tell"
    said = "above v0" if numbers.low > 0 else "below v0" if numbers.high < 0 else "cannot tell"
    return (
        f"{head} [{numbers.low:+.3f}, {numbers.high:+.3f}] {numbers.level} over the evals: {said}"
    )


def sealed_test_warning(test: object, nodes: list[Node] | None = None) -> str | None:
    """A final best whose sealed interval lies below v0's (evals the loop never saw), or that
    gains on the train evals but not on the sealed ones, is the sign of overfitting the train
    evals; it must not hide in a table of numbers. A lower score whose interval also holds zero
    is no finding: the sealed verdict says "cannot tell" where the scores are shown."""
    if not isinstance(test, dict) or test.get("incomplete"):
        return None
    best, versions = test.get("best"), test.get("versions") or {}
    if not best or best == "v0":
        return None
    base, final = ((versions.get(label) or {}).get("score") for label in ("v0", best))
    if base is None or final is None:
        return None
    numbers = sealed_numbers(test, best)
    if numbers is not None and numbers.high is not None and numbers.high < 0:
        return f"{sealed_verdict(numbers, best)}; the gain may be overfitting to the train evals"
    if final < base:
        return None
    gain = train_delta(test, nodes or [])
    # Half the train gain, not zero: a sealed Δ of +0.001 against +0.200 on train is no carry-over.
    if gain is not None and gain > 0 and final - base < gain / 2:
        n = len(test.get("evals") or [])
        return (
            f"sealed test: {best} gained {gain:+.3f} over v0 on the train evals and "
            f"{final - base:+.3f} on the {n} sealed eval{'s' if n != 1 else ''}; less than "
            "half the gain has shown beyond the tasks the loop saw"
        )
    return None


def suite_warning(run: Run, settings: Mapping[str, Any]) -> str | None:
    """The small-suite sentence of `validate`, for a run of the body target (trigger queries are
    split three ways and counted by their own report)."""
    if run.target == "description":
        return None
    split = run.split
    if not isinstance(split.get("train"), list):
        return None
    fraction = (settings.get("evals") or {}).get("test_fraction", 0.25)
    return small_suite(len(split["train"]), len(split.get("test") or []), fraction)


def annotate(
    root: Path,
    nodes: list[Node],
    best: str | None,
    run: Run,
    settings: Mapping[str, Any],
    test: object,
) -> list[str]:
    """Adds `verdict` and `delta_evals` to each node; returns the run's warnings, worst first."""
    by_label = {n.label: n for n in nodes}
    unit = "query" if run.target == "description" else "eval"
    for n in nodes:
        n.verdict = verdict(n, by_label, best)
        n.delta_unit = unit
        if n.delta_evals is None and n.delta is not None:
            n.delta_evals = _selection_evals(root, n.label)
        n.ci = bounded(n.ci, DELTA)
    return [w for w in (sealed_test_warning(test, nodes), suite_warning(run, settings)) if w]


def _selection_evals(root: Path, label: str) -> int | None:
    """How many evals (or trigger queries) a decision's Δ rests on, from its selection.json."""
    sel = _json(root / label / "selection.json")
    return (sel.get("evals") or sel.get("queries")) if isinstance(sel, dict) else None


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent, or mid-rename while a run writes it
        return None


# The level of benchmark.json's intervals of a mean score over evals (grade/aggregate.py).
SCORE_LEVEL = "95% CI"


def decision_level(confidence: object) -> str:
    """ "99.8% CI, the decision's": the level of a decision's interval of Δ as its reason states it
    (the look's, at the α it spent), so it is never read beside a 95% interval as the same kind."""
    if isinstance(confidence, int | float) and 0 < confidence < 1:
        return f"{words.ci(confidence)}, the decision's"
    return "the decision's level"


def evals_note(n: object, unit: str | None = "eval") -> str:
    """' (n=3 evals)' beside an interval, so three evals' interval is not read as precise."""
    if not isinstance(n, int) or n <= 0:
        return ""
    unit = unit or "eval"
    return f" (n={n} {unit if n == 1 else 'queries' if unit == 'query' else unit + 's'})"
