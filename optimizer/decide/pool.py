"""The pool of a night (docs/design.md §3): v0 and every child that won its step, each with what its
train score is worth once the noise of a step is taken out. Parents are drawn from the pool and
the current best is its best estimate, so a child that won one step on a lucky run is a candidate,
not the new incumbent, and a version measured again as a parent falls back to its place.

A member's true score is its parent's plus the gain of its step. A step's Δ is read from the two
versions' runs as they stand (a parent's grow with each child it is measured against), over the
evals both have; its noise from the spread of runs of one version on one eval, pooled over the
run, so what differs between evals (a change that helps one task and not another) is gain, not
noise. Each Δ is shrunk toward the run's mean step by empirical Bayes over every measured step,
won or lost (the method of moments, as the stop rule's search/worth.py): a winner keeps the share
of its Δ that the run's spread of true steps explains. Pure: a function of the versions' runs and a
seeded random.Random; every sum is taken in a stated order."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Version:
    """A decided version as the pool reads it: its runs' scores per eval, in run order. `won`:
    v0 or a child that won its step (a member); `measured`: its step was decided on the full set
    of evals (a screened-out child's minibatch is no step of the run's)."""

    label: str
    parent: str | None
    runs: Mapping[int, Sequence[float]] = field(default_factory=dict)
    won: bool = False
    measured: bool = False


@dataclass(frozen=True)
class Estimate:
    """A member's expected true score over v0's, and that expectation's variance."""

    mean: float
    variance: float


@dataclass(frozen=True)
class Step:
    delta: float
    noise: float  # Δ's variance from the runs' spread


@dataclass(frozen=True)
class Steps:
    """The run's true steps: their mean, and the posterior of their spread (standard deviation)
    on a grid, as (spread, weight) pairs whose weights sum to 1."""

    mean: float
    spreads: tuple[tuple[float, float], ...]


# The spread of true steps is integrated over, not read at its estimate: with eight steps whose
# noise is twice their spread, the method of moments reads a spread of 0 about half the time, and
# a spread of 0 says every winner gained the mean step, whatever its runs showed since. A flat prior
# on the spread (Gelman 2006) over a score's whole range, on a grid of this many points.
GRID = 200


def noise(versions: Sequence[Version]) -> float | None:
    """The variance of one run's score about its version's mean on its eval, pooled over every
    version and eval with two runs or more; None when none has."""
    squares: list[float] = []
    df = 0
    for v in versions:
        for e in sorted(v.runs):
            xs = v.runs[e]
            if len(xs) >= 2:
                m = math.fsum(xs) / len(xs)
                squares.extend((x - m) ** 2 for x in xs)
                df += len(xs) - 1
    return math.fsum(sorted(squares)) / df if df else None


def step(child: Version, parent: Version, run_noise: float) -> Step | None:
    """The child's Δ over its parent on the evals both have, and its variance."""
    common = sorted(set(child.runs) & set(parent.runs))
    common = [e for e in common if child.runs[e] and parent.runs[e]]
    if not common:
        return None
    ds = [_mean(child.runs[e]) - _mean(parent.runs[e]) for e in common]
    inverse = [1 / len(child.runs[e]) + 1 / len(parent.runs[e]) for e in common]
    return Step(math.fsum(ds) / len(ds), run_noise * math.fsum(inverse) / len(common) ** 2)


def steps(measured: Sequence[Step]) -> Steps | None:
    """The mean of the measured steps and the posterior of their spread; None under two."""
    n = len(measured)
    if n < 2:
        return None
    mean = math.fsum(sorted(s.delta for s in measured)) / n
    logs = []
    for k in range(GRID):
        tau = k / (GRID - 1)
        logs.append(
            -0.5
            * math.fsum(
                sorted(
                    math.log(tau**2 + s.noise) + (s.delta - mean) ** 2 / (tau**2 + s.noise)
                    for s in measured
                )
            )
            if all(tau**2 + s.noise > 0 for s in measured)
            else -math.inf
        )
    top = max(logs)
    if not math.isfinite(top):
        return Steps(mean, ((0.0, 1.0),))
    weights = [math.exp(x - top) for x in logs]
    total = math.fsum(weights)
    return Steps(mean, tuple((k / (GRID - 1), w / total) for k, w in enumerate(weights)))


def estimates(versions: Sequence[Version]) -> dict[str, Estimate]:
    """Each member's expected score over v0's, in the versions' order (parents before children).
    Without a prior (under two measured steps) or without any run's noise, a step is taken at its
    measured Δ: nothing yet tells its noise from its gain."""
    by_label = {v.label: v for v in versions}
    run_noise = noise(versions)
    measured = [
        s
        for v in versions
        if v.measured and v.parent in by_label and run_noise is not None
        if (s := step(v, by_label[v.parent], run_noise)) is not None
    ]
    prior = steps(measured)
    known: dict[str, Estimate] = {}
    for v in versions:
        if not v.won:
            continue
        parent = by_label.get(v.parent or "")
        s = step(v, parent, run_noise or 0.0) if parent is not None else None
        if s is None:
            known[v.label] = Estimate(0.0, 0.0)
            continue
        base = known.get(parent.label, Estimate(0.0, 0.0)) if parent else Estimate(0.0, 0.0)
        gain, variance = _shrunk(s, prior)
        known[v.label] = Estimate(base.mean + gain, base.variance + variance)
    return known


def _shrunk(s: Step, prior: Steps | None) -> tuple[float, float]:
    """The step's expected true gain and its variance: the normal prior's posterior at each
    spread, averaged over the spread's posterior."""
    if prior is None:
        return s.delta, 0.0
    first, second = [], []
    for tau, weight in prior.spreads:
        total = tau**2 + s.noise
        keep = tau**2 / total if total > 0 else 0.0
        gain = prior.mean + keep * (s.delta - prior.mean)
        first.append(weight * gain)
        second.append(weight * ((1 - keep) * tau**2 + gain**2))
    mean = math.fsum(sorted(first))
    return mean, max(0.0, math.fsum(sorted(second)) - mean**2)


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs)


def best(known: dict[str, Estimate]) -> str:
    """The member with the highest expected score; a tie goes to the earlier member (v0 first):
    a version is the incumbent only when it is expected to be better."""
    order = list(known)
    return max(order, key=lambda label: (known[label].mean, -order.index(label)))


def draw(known: dict[str, Estimate], rng: random.Random) -> str:
    """A parent: the member with the highest score drawn from its estimate (Thompson sampling),
    so a child that won on one run is stepped from, and so measured again, as often as it may be
    the best; one draw per uncertain member in the pool's order, ties to the earlier member."""
    order = list(known)
    drawn = {
        label: e.mean + (rng.gauss(0.0, math.sqrt(e.variance)) if e.variance > 0 else 0.0)
        for label, e in known.items()
    }
    return max(order, key=lambda label: (drawn[label], -order.index(label)))
