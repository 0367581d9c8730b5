"""How a decision's false-promotion budget α is spent over its looks (docs/selection.md, step 2):
where the looks are, each look's share of α, and the level each look's test runs at. Pure: no
rng, no files, no clock.

Each look may spend a share of α, the shares summing to α. Under `tasks` a look tests at its
share: a union bound, whatever the looks' correlation. Under `general` a look tests at the level
at which it spends exactly its share given the least correlation the looks can have. Δ at r runs
per eval is the mean of d over the evals, and d's run noise at r runs is nested in its noise at
r' > r runs, so corr(Δ_r, Δ_r') = √((τ² + σ²/r')/(τ² + σ²/r)) ≥ √(r/r') whatever the spread τ²
between evals or the run noise σ². The Brownian motion with information fractions r/R is that
least correlated case (τ² = 0), and for normal statistics more correlation only lowers the chance
of ever crossing (Slepian's inequality). So levels at which the Brownian motion first crosses at
each look with that look's share keep the chance of ever promoting an equal child at or below α
for normal statistics with known variance, in every world. The t statistics estimate their
variance anew at each look, which loosens their correlation a little, and a t reference is not
exact for discrete scores: bench/looks.py measures both (docs/selection.md). The union bound
spends only 0.032 of 0.05 at the default looks: its last look tests at 0.018, the exact one at
0.034. With the union bound (and α spent later) four cells at 10 and 20 evals were 10–16 points
behind the oracle; with these levels at most 8.2.

The crossing probabilities come from the classical recursive numerical integration of the
Brownian motion's density over the region where no earlier look crossed (Armitage, McPherson and
Rowe 1969; Jennison and Turnbull 2000, ch. 19), by Simpson's rule on a grid of at most 0.1."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

Scope = Literal["tasks", "general"]
# Cumulative share of α spent by a look at r of R runs per eval: (r/R)^SPEND_POWER. Any exponent
# keeps the bound; it only moves power between looks. At 1.5 clear children stop at 4–6 runs.
# `tasks` at 3 left +0.10 10–11 points behind the oracle at 5 evals; `general` at 3 (futility 0.45
# to keep an equal child under 4 runs per eval) left expectations at 10 evals 11.8 points behind
# instead of 7.7, and at 1 found +0.10 2–3 points less often (bench/selection.py, 1,000 trials).
SPEND_POWER = 1.5
# Whether a claim's looks test at the levels that use their correlation (nominal_levels) rather
# than at their shares. `tasks` keeps the union bound: its slack absorbs the pooled t's excess
# with pass/fail runs (the exact levels promoted 4.8% of equal pass/fail children at 8 evals and
# kept equal children at 3.96–4.22 runs per eval), and it is within 10 points of the oracle
# without them.
EXACT_LEVELS: dict[str, bool] = {"tasks": False, "general": True}
# The look after r runs per eval is at ⌊GROWTH·r⌋ runs (≥ r + 1, ≤ the cap): 3, 4, 6, 9, 12. A
# first extension of one run keeps an equal child cheap (≤ 4.0 runs/eval; 3, 5, 8, 12 gave 4.0–4.4).
GROWTH = 1.5
_NORMAL = NormalDist()
_EPS = 1e-12
_LOW = -6.0  # W(t) has sd √t ≤ 1: below −6 lies less than 1e-9 of it
_STEP = 0.1  # Simpson on a Gaussian kernel: 0.05 moved no level by more than 3e-5 of itself
_SMALLEST = 1e-8  # a share whose bound, ≤ 5.7 standard deviations, still lies on the grid


def schedule(first_runs: int, max_runs: int) -> tuple[int, ...]:
    """The run counts per eval at which the rule looks: first_runs, then ×GROWTH, up to the cap."""
    first = max(1, first_runs)
    if first >= max_runs:
        return (first,)
    looks = [first]
    while looks[-1] < max_runs:
        looks.append(min(max_runs, max(looks[-1] + 1, math.floor(GROWTH * looks[-1] + _EPS))))
    return tuple(looks)


def next_look(runs: int, first_runs: int, max_runs: int) -> int | None:
    """The run count of the next look after `runs`, or None at or past the cap."""
    return next((r for r in schedule(first_runs, max_runs) if r > runs), None)


def look_alpha(alpha: float, runs: int, max_runs: int, first_runs: int = 1) -> float:
    """α the look at `runs` runs per eval may spend: α·[(r/R)^p − (r'/R)^p], r' the previous look
    of the schedule. A run count that is not a look spends nothing (a caller adding one run at a
    time reaches the next look); past the cap it is the last look. Summed over the looks it is α."""
    looks = schedule(first_runs, max_runs)
    runs = min(runs, looks[-1])
    if runs not in looks:
        return 0.0
    k = looks.index(runs)
    top = looks[-1]
    before = (looks[k - 1] / top) ** SPEND_POWER if k else 0.0
    return alpha * ((runs / top) ** SPEND_POWER - before)


def look_level(
    alpha: float, runs: int, max_runs: int, first_runs: int = 1, scope: Scope = "general"
) -> float:
    """The one-sided level the look at `runs` tests at: its share of α (look_alpha), or under
    EXACT_LEVELS the level at which it spends exactly that share (nominal_levels)."""
    if not EXACT_LEVELS[scope]:
        return look_alpha(alpha, runs, max_runs, first_runs)
    looks = schedule(first_runs, max_runs)
    runs = min(runs, looks[-1])
    if runs not in looks or alpha <= 0:
        return 0.0
    shares = tuple(look_alpha(alpha, r, max_runs, first_runs) for r in looks)
    return nominal_levels(shares, tuple(r / looks[-1] for r in looks))[looks.index(runs)]


def _simpson(low: float, high: float, step: float) -> tuple[list[float], list[float]]:
    """Grid points from low to high and their Simpson weights (an even number of intervals)."""
    n = max(2, math.ceil((high - low) / step))
    n += n % 2
    h = (high - low) / n
    points = [low + i * h for i in range(n + 1)]
    weights = [h / 3 * (1 if i in (0, n) else 4 if i % 2 else 2) for i in range(n + 1)]
    return points, weights


def _crossing(points: Sequence[float], mass: Sequence[float], bound: float, sd: float) -> float:
    """P(W, after an increment with this sd, is above `bound`), from the not-yet-crossed mass."""
    k = 1 / (sd * math.sqrt(2))
    return 0.5 * math.fsum(
        m * math.erfc((bound - x) * k) for x, m in zip(points, mass, strict=True)
    )


@lru_cache(maxsize=4096)
def nominal_levels(shares: tuple[float, ...], fractions: tuple[float, ...]) -> tuple[float, ...]:
    """One-sided levels per look at which the Brownian motion observed at the information
    `fractions` (increasing, the last 1) first crosses at look k with probability shares[k]. A
    share of zero gives a level of zero: that look never promotes. Below _SMALLEST a share's bound
    lies past the grid (W > 6), so the levels are the shares themselves: the union bound, which
    holds whatever the correlation."""
    if len(shares) != len(fractions):
        raise ValueError("nominal_levels needs one share per look")
    if any(0 < a < _SMALLEST for a in shares):
        return tuple(max(0.0, a) for a in shares)
    levels: list[float] = []
    points: list[float] = []
    mass: list[float] = []  # density × Simpson weight of W where no look has crossed yet
    before = 0.0
    for share, t in zip(shares, fractions, strict=True):
        sd = math.sqrt(t - before)
        if share <= 0:
            bound = math.inf
        elif not levels:
            bound = -sd * _NORMAL.inv_cdf(share)
        else:
            low, high = _LOW, -_LOW
            for _ in range(44):  # the crossing falls as the bound rises; 12/2^44 ≈ 1e-12
                mid = (low + high) / 2
                low, high = (mid, high) if _crossing(points, mass, mid, sd) > share else (low, mid)
            bound = high
        levels.append(0.0 if math.isinf(bound) else _NORMAL.cdf(-bound / math.sqrt(t)))
        grid, weights = _simpson(_LOW, min(bound, -_LOW), min(_STEP, sd / 6))
        scale = 1 / (sd * math.sqrt(2 * math.pi))
        if points:
            density = [
                scale
                * math.fsum(
                    m * math.exp(-0.5 * ((y - x) / sd) ** 2)
                    for x, m in zip(points, mass, strict=True)
                )
                for y in grid
            ]
        else:
            density = [scale * math.exp(-0.5 * (y / sd) ** 2) for y in grid]
        points, mass = grid, [d * w for d, w in zip(density, weights, strict=True)]
        before = t
    return tuple(levels)
