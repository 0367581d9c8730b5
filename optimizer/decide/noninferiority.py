"""The gate's statistics (`optimizer gate`, docs/design.md §17): is HEAD not worse than BASE by more than a
margin? Two claims, as the promotion and the adoption make (§16): on these tasks (`check_tasks`:
the evals are fixed and the runs are the units, so an edit that breaks one task of five is seen
however the others vary) or in general (`check`: evals are the units, a Student-t bound over
their paired differences), at the promotion rule's confidence. Pure: no rng, no files, no clock. Never a normal approximation, never an
interval of zero width.

Why a floor on the spread: when every eval's difference is the same (often 0: the runs scored
alike), s is 0 and a t bound collapses onto the mean, claiming certainty that a handful of
evals cannot give. The floor is the spread the differences would have if one eval had moved by
one step of the scores' resolution (1 / (runs × expectations) of its coarsest eval): a change
the runs could not have told from none. It never narrows an interval the data make wider."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, TypedDict

from optimizer.decide.stats import mean, stddev, t_quantile

Outcome = Literal["not_worse", "worse", "inconclusive"]
_t = functools.lru_cache(maxsize=256)(t_quantile)  # a bisection each call; bench/gate.py makes 10⁵


@dataclass(frozen=True)
class NonInferiority:
    outcome: Outcome
    delta: float  # mean over evals of (HEAD − BASE)
    low: float  # one-sided lower bound at `confidence`
    high: float  # one-sided upper bound at `confidence`
    confidence: float
    margin: float
    evals: int
    spread: float  # the standard deviation used: the evals' own, or the floor when larger
    floored: bool  # the floor was used: the evals' differences were (nearly) all alike
    t: float
    reason: str
    # What the interval's spread comes from, as the reason says it: the evals (`check`) or the
    # runs of these tasks (`check_tasks`); the gate's footnote names the same.
    units: str = "evals"


def resolution(runs: int, expectations: Mapping[int, int]) -> float:
    """The smallest step one eval's mean score can move by: one expectation of one run, of the
    eval with the fewest expectations (the coarsest), over `runs` runs."""
    fewest = min((k for k in expectations.values() if k > 0), default=1)
    return 1.0 / (max(1, runs) * fewest)


def check(
    diffs: Mapping[int, float], *, confidence: float, margin: float, step: float
) -> NonInferiority:
    """HEAD is `not_worse` when the lower bound of mean(HEAD − BASE) is above −margin, `worse`
    when it is not and the upper bound is below zero (shown lower than BASE, and not within the
    margin), else `inconclusive` (the gate treats it as a failure: not worse was not shown). Both bounds are one-sided at `confidence`, so the interval
    [low, high] is a two-sided one at 1 − 2·(1 − confidence)."""
    ds = [diffs[e] for e in sorted(diffs)]
    n = len(ds)
    if n < 2:
        raise ValueError("a non-inferiority test needs at least two evals")
    delta = mean(ds)
    floor = step / math.sqrt(n)  # the sample sd of (step, 0, …, 0): one eval moved by one step
    own = stddev(ds)
    spread = max(own, floor)
    t = _t(confidence, n - 1)
    half = t * spread / math.sqrt(n)
    low, high = delta - half, delta + half
    where = (
        f"Δ = {delta:+.3f} (HEAD − BASE, mean over {n} evals), {confidence:.0%} lower bound "
        f"{low:+.3f}, upper bound {high:+.3f} (Student-t, {n - 1} degrees of freedom"
        + (
            f"; the evals' differences were alike, so the spread is floored at {floor:.3f}, "
            f"one eval moved by one score step of {step:.3f}"
            if own < floor
            else ""
        )
        + ")"
    )
    outcome, reason = _verdict(
        low,
        high,
        margin,
        where,
        "",
        "More evals narrow the interval most; more runs per eval help when runs vary.",
    )
    return NonInferiority(
        outcome, delta, low, high, confidence, margin, n, spread, own < floor, t, reason
    )


def check_tasks(
    head: Mapping[int, Sequence[float]],
    base: Mapping[int, Sequence[float]],
    *,
    confidence: float,
    margin: float,
    step: float,
) -> NonInferiority:
    """HEAD against BASE on these tasks: Δ is the mean over evals of the per-eval difference of
    mean scores, and its standard error comes from the runs (Σ s²/r over both sides and every
    eval, over E²), with Welch-Satterthwaite degrees of freedom. The same outcomes as `check`.
    The error is floored at one eval's mean moved by one score step (step / E): runs that all
    scored alike cannot show more certainty than the scores can resolve. Needs 2 runs a side."""
    evals = sorted(e for e in head if e in base and len(head[e]) >= 2 and len(base[e]) >= 2)
    n = len(evals)
    if n < 1:
        raise ValueError("a tasks non-inferiority test needs an eval with 2 runs on each side")
    delta = mean([mean(list(head[e])) - mean(list(base[e])) for e in evals])
    parts = [
        (stddev(list(side[e])) ** 2 / len(side[e]), len(side[e]) - 1)
        for e in evals
        for side in (head, base)
    ]
    var = math.fsum(v for v, _ in parts) / n**2
    dof = math.fsum(v for v, _ in parts) ** 2 / max(math.fsum(v * v / k for v, k in parts), 1e-300)
    floor = step / n
    own = math.sqrt(var)
    se = max(own, floor)
    df = max(1, round(dof)) if own >= floor else sum(k for _, k in parts)
    t = _t(confidence, df)
    low, high = delta - t * se, delta + t * se
    runs = min(len(side[e]) for e in evals for side in (head, base))
    where = (
        f"Δ = {delta:+.3f} (HEAD − BASE on these {n} tasks, {runs}+ runs each), "
        f"{confidence:.0%} lower bound {low:+.3f}, upper bound {high:+.3f} (Student-t over the "
        f"runs, {df} degrees of freedom"
        + (
            f"; the runs scored alike, so the error is floored at {floor:.3f}"
            if own < floor
            else ""
        )
        + ")"
    )
    outcome, reason = _verdict(
        low, high, margin, where, " on these tasks", "More runs per eval narrow it."
    )
    return NonInferiority(
        outcome, delta, low, high, confidence, margin, n, se, own < floor, t, reason, "runs"
    )


class GateRule(Protocol):
    """Is HEAD not worse than BASE: an outcome from both sides' per-run scores on the evals both
    scored, `step` the scores' resolution (resolution()). Pure."""

    def check(
        self, head: Mapping[int, Sequence[float]], base: Mapping[int, Sequence[float]], step: float
    ) -> NonInferiority: ...


@dataclass(frozen=True)
class OnTheseTasks:
    """The claim on these tasks (check_tasks): the runs are the units; needs 2 runs a side."""

    confidence: float
    margin: float

    def check(
        self, head: Mapping[int, Sequence[float]], base: Mapping[int, Sequence[float]], step: float
    ) -> NonInferiority:
        return check_tasks(head, base, confidence=self.confidence, margin=self.margin, step=step)


@dataclass(frozen=True)
class InGeneral:
    """The claim in general (check): the evals are the units, over their paired differences."""

    confidence: float
    margin: float

    def check(
        self, head: Mapping[int, Sequence[float]], base: Mapping[int, Sequence[float]], step: float
    ) -> NonInferiority:
        diffs = {e: mean(head[e]) - mean(base[e]) for e in head if e in base}
        return check(diffs, confidence=self.confidence, margin=self.margin, step=step)


def gate_rule(scope: str, runs: int, *, confidence: float, margin: float) -> GateRule:
    """The claim `scope` names ("tasks", "general"); one run a side has no spread within an eval
    to measure, so there it is the claim in general."""
    if scope == "tasks" and runs >= 2:
        return OnTheseTasks(confidence, margin)
    return InGeneral(confidence, margin)


def _verdict(
    low: float, high: float, margin: float, where: str, claim: str, more: str
) -> tuple[Outcome, str]:
    """not worse when the lower bound is above −margin; worse when not, and the whole interval is
    below zero (HEAD scores lower, by more than it may); else inconclusive, with what narrows it."""
    if low > -margin:
        return "not_worse", f"not worse{claim}: {where}; the lower bound is above −{margin}."
    if high < 0:
        return "worse", f"worse{claim}: {where}; even the upper bound is below " + (
            f"−{margin}." if high < -margin else f"zero, and the lower bound below −{margin}."
        )
    return "inconclusive", (
        f"not shown to be not worse{claim}: {where}; the lower bound is not above −{margin}. {more}"
    )


class GateEval(TypedDict):
    """One eval's means on each side of the gate, their difference and the runs behind them."""

    name: str
    base: float | None
    head: float | None
    diff: float | None
    base_runs: int
    head_runs: int


@dataclass
class GateResult:
    """What the gate found: the test (None when it could not be made), per-eval means, cost."""

    base: Path
    head: Path
    evals_path: Path
    identical: bool
    runs_per_eval: int
    test: NonInferiority | None
    per_eval: dict[int, GateEval] = field(default_factory=dict)
    unscored: int = 0
    judge_errors: int = 0
    total_runs: int = 0
    cost_usd: float = 0.0
    note: str = ""  # why no test could be made, when none was
    invalid_head: list[str] = field(default_factory=list)  # HEAD's problems as a skill, if any

    @property
    def passed(self) -> bool:
        return self.identical or (self.test is not None and self.test.outcome == "not_worse")
