"""Where the next runs go when a look is undecided (issue 18, docs/selection.md): to the evals whose
d = mean child − mean parent is least settled, never to an eval whose runs were all identical.
Pure: a function of the scores and the run counts asked so far; ties by eval id, never by timing.

Why: the promotion rule's t bound is over one d per eval, and an extra run moves only that eval's
d. An eval whose child runs all scored the same, and whose parent runs all scored the same (a
binary expectation passed every time, say), has an estimated variance of d of zero: another run
would almost never change it. The rest are ranked by that variance, s²_child/n + s²_parent/n, the
share selection.runs_share of them (largest first) getting the next run."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, Literal, TypedDict

from optimizer.decide.comparison import E, EvalId
from optimizer.decide.stats import mean
from optimizer.schemas import RuleDecision

_EPS = 1e-12


def identical(child: list[float], parent: list[float]) -> bool:
    """Every child run scored the same and every parent run scored the same (two runs or more)."""
    return (
        len(child) >= 2
        and len(parent) >= 2
        and max(child) - min(child) <= _EPS
        and max(parent) - min(parent) <= _EPS
    )


def d_variance(child: list[float], parent: list[float]) -> float:
    """The estimated variance of one eval's d: s²_child/n_child + s²_parent/n_parent."""

    def part(xs: list[float]) -> float:
        if len(xs) < 2:
            return math.inf
        m = mean(xs)
        return math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)

    return part(child) + part(parent)


class AllotmentJson(TypedDict):
    """An allotment as selection.json keeps it (schemas.AddedRuns)."""

    runs: int
    to: list[EvalId]
    skipped_identical: list[EvalId]
    skipped_low_variance: list[EvalId]


@dataclass(frozen=True)
class Allotment(Generic[E]):
    """The runs added after one look: eval → its run count afterwards; and who got none, why."""

    look: int  # the look these runs lead to: the loop's runs per eval once they are done
    to: dict[E, int]
    skipped_identical: tuple[E, ...] = ()
    skipped_low_variance: tuple[E, ...] = ()

    def as_json(self) -> AllotmentJson:
        return {
            "runs": self.look,
            "to": sorted(self.to, key=_key),
            "skipped_identical": list(self.skipped_identical),
            "skipped_low_variance": list(self.skipped_low_variance),
        }


def _key(e: EvalId) -> tuple[int, int, str]:
    """Eval ids in a stated order: ints by value, then anything else by its text."""
    return (0, e, "") if isinstance(e, int) else (1, 0, str(e))


def allot(
    child: Mapping[E, list[float]],
    parent: Mapping[E, list[float]],
    counts: Mapping[E, int],
    *,
    look: int,
    mode: Literal["all", "informative"],
    share: float,
    to_runs: int | None = None,
) -> Allotment[E]:
    """Which evals get more runs after the look at `look` runs, up to `to_runs` each (the next
    look's run count; default one more). `all`: every eval. `informative`: not an eval whose runs
    were all identical on both sides; of the others the ceil(share · n) with the largest variance
    of d, ties by eval id. An eval without scores on both sides (all its runs unscored, say)
    counts as the least settled of all."""
    evals = sorted(counts, key=_key)
    target = look + 1 if to_runs is None else to_runs

    def grown(e: E) -> int:
        return max(counts[e] + 1, counts[e] + target - look)

    if mode == "all":
        return Allotment(target, {e: grown(e) for e in evals})
    same = tuple(e for e in evals if identical(child.get(e, []), parent.get(e, [])))
    rest = [e for e in evals if e not in same]
    ranked = sorted(rest, key=lambda e: (-d_variance(child.get(e, []), parent.get(e, [])), _key(e)))
    chosen = ranked[: math.ceil(share * len(ranked) - _EPS)]
    low = tuple(sorted((e for e in rest if e not in chosen), key=_key))
    return Allotment(target, {e: grown(e) for e in sorted(chosen, key=_key)}, same, low)


def nothing_to_add(decision: RuleDecision) -> RuleDecision:
    """The decision when more runs were wanted but no eval could gain from one."""
    return decision.model_copy(
        update={
            "needs_more_runs": False,
            "reason": decision.reason
            + (
                " No runs were added: every eval's runs so far scored the same for the child and for the "
                "parent, so another run would hardly move Δ."
            ),
        }
    )


def uneven_note(counts: Mapping[E, int], history: list[Allotment[E]]) -> str:
    """The sentence that says which evals ran fewer times and why, when counts differ."""
    if not history or len(set(counts.values())) < 2:
        return ""
    fewest, most = min(counts.values()), max(counts.values())
    same = sorted({e for a in history for e in a.skipped_identical}, key=_key)
    low = sorted({e for a in history for e in a.skipped_low_variance} - set(same), key=_key)
    why = []
    if same:
        why.append(
            f"eval{'s' if len(same) > 1 else ''} {', '.join(map(str, same))} had all runs identical"
        )
    if low:
        why.append(
            f"eval{'s' if len(low) > 1 else ''} {', '.join(map(str, low))} had the least variable d"
        )
    return (
        f" Runs per eval went from {fewest} to {most}: extra runs went where d was least "
        f"settled ({'; '.join(why)})."
    )
