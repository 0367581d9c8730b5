"""Parent selection (docs/design.md §3): the current best, or a draw from the per-eval Pareto front.
Pure: a function of the versions' per-eval scores and a seeded random.Random."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from optimizer.decide.stats import mean

_EPS = 1e-12
E = TypeVar("E", bound=int | str)


@dataclass(frozen=True)
class VersionScores(Generic[E]):
    label: str
    per_eval: dict[E, float]
    is_best: bool = False


def _dominates(a: VersionScores[E], b: VersionScores[E]) -> bool:
    shared = [e for e in a.per_eval if e in b.per_eval]
    if not shared:
        return False
    return all(a.per_eval[e] >= b.per_eval[e] - _EPS for e in shared) and any(
        a.per_eval[e] > b.per_eval[e] + _EPS for e in shared
    )


def pareto_front(versions: Sequence[VersionScores[E]]) -> list[str]:
    """Labels of versions no other version dominates (≥ on every shared eval, > on one)."""
    return [
        v.label
        for v in versions
        if not any(_dominates(o, v) for o in versions if o.label != v.label)
    ]


def _leads(versions: Sequence[VersionScores[E]]) -> dict[str, int]:
    """How many evals each version leads; a tie for the lead counts for every leader."""
    evals = {e for v in versions for e in v.per_eval}
    leads = {v.label: 0 for v in versions}
    for e in evals:
        best = max(v.per_eval[e] for v in versions if e in v.per_eval)
        for v in versions:
            if e in v.per_eval and v.per_eval[e] >= best - _EPS:
                leads[v.label] += 1
    return leads


def _best(versions: Sequence[VersionScores[E]]) -> str:
    flagged = [v.label for v in versions if v.is_best]
    if flagged:
        return flagged[0]
    return max(versions, key=lambda v: mean(list(v.per_eval.values())) if v.per_eval else -1).label


def select_parent(
    versions: Sequence[VersionScores[E]], *, strategy: Literal["best", "pareto"], rng: random.Random
) -> str:
    """`best`: the current best. `pareto` (GEPA): a version on the per-eval Pareto front, drawn
    with weight = evals it leads, so a version that is best somewhere keeps getting chances."""
    if not versions:
        raise ValueError("select_parent needs at least one version")
    if strategy == "best":
        return _best(versions)
    if strategy != "pareto":
        raise ValueError(f"unknown parent selection strategy {strategy!r}")
    front = set(pareto_front(versions))
    leads = _leads(versions)
    labels = [v.label for v in versions if v.label in front and leads[v.label] > 0]
    if not labels:
        return _best(versions)
    return rng.choices(labels, weights=[leads[label] for label in labels], k=1)[0]


def runs_read(counts: dict[E, int], *, floor: int, judged: int, most: int) -> dict[E, int]:
    """The parent's runs an eval a step reads: the child's count, at least `floor` (what was
    measured of it already, v0's runs), and one more for each of its `judged` children up to
    `most` (selection.parent_runs; 0 turns it off). A parent's first runs won it its place, or
    were one draw of v0: measured again as its children are judged, a lucky first run stops
    blocking every child (bench/peers.py, docs/design.md §8: at $4, 20 worlds, +0.327 sealed gain
    up to 3 against +0.297 read at the child's count; at $1.6 it costs 0.022)."""
    grown = min(most, 1 + judged) if most else 0
    return {e: max(n, floor, grown) for e, n in counts.items()}
