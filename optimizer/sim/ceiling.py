"""The per-world limit a search is measured against: the expected judged pass rate of the best
possible skill for any evals, computed from the world's hidden causes (sim/latent.py). Only a
bench reads it; no simulated role does."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from optimizer.sim.latent import (
    FOLLOW_MAX,
    HABITS,
    SPECIFIC_CAP,
    World,
    capability,
    focus,
    need,
    task_rate,
)
from optimizer.sim.meaning import strip_counts
from optimizer.sim.text import facts, strip_snippets


def expected_best(
    world: World,
    expectation: str,
    prompt: str | None = None,
    sections: int = 0,
    conventions: frozenset[str] = frozenset(),
) -> float:
    """The chance the best possible skill (every useful behaviour asked for clearly and early in
    a short skill, nothing harmful, no eval's own values copied) makes one run meet the
    expectation, before judge noise. A value the task's prompt holds comes with the figures habit;
    a convention (a value several evals expect, such as a brand colour) is named by the skill; any
    other value is out of a general skill's reach. Without the prompt, values count as reachable."""
    found = need(world, expectation)
    if not found.feasible:
        return 0.0
    if found.negated:
        return FOLLOW_MAX
    keep = focus(world, sections)
    carried = [v for v in found.values if v not in conventions]
    if prompt is not None and any(v not in prompt for v in carried):
        return 0.0
    if found.habit is not None:
        return FOLLOW_MAX * capability(world, found.habit) * keep
    if carried:
        return FOLLOW_MAX * capability(world, HABITS[0]) * keep
    if found.items or found.counts or found.amounts:
        return FOLLOW_MAX
    return FOLLOW_MAX * SPECIFIC_CAP if found.topic else task_rate(world, found.key)


@dataclass(frozen=True)
class Ceiling:
    per_eval: dict[str, float]  # expected judged pass rate of the best skill, per eval id
    mean: float  # their mean over evals


def ceiling(evals: Iterable[Sequence], world: World | None = None) -> Ceiling:
    """The per-world limit a search is measured against: the expected pass rate of the judged
    expectations (structural checks and rubrics aside) under the best possible skill, before
    judge noise. `evals` are (eval id, expectation texts) or (eval id, texts, prompt)."""
    world = world or World()
    listed = [(str(e[0]), list(e[1]), e[2] if len(e) > 2 else None) for e in evals]
    needed = {
        n.habit.key
        for _, texts, _ in listed
        for t in texts
        if (n := need(world, t)).habit is not None and not n.negated
    }
    evals_of: dict[str, set[str]] = {}
    for eid, texts, _ in listed:
        for value in (v for t in texts for v in facts(strip_snippets(strip_counts(t)))):
            evals_of.setdefault(value, set()).add(eid)
    shared = frozenset(v for v, ids in evals_of.items() if len(ids) >= 2)
    per_eval = {
        eid: sum(expected_best(world, t, prompt, len(needed), shared) for t in texts) / len(texts)
        for eid, texts, prompt in listed
        if texts
    }
    mean = sum(per_eval.values()) / len(per_eval) if per_eval else 0.0
    return Ceiling(per_eval, mean)
