"""The gate's error rates, simulated (no model calls): how often `optimizer gate` says "not worse"
(exit 0) when HEAD is truly worse by the margin, and how often it does when HEAD is truly as good.
Never a timed test and never a model call: it prints a table.

    .venv/bin/python bench/gate.py [--trials 2000] [--evals 3 5 8 15 30] [--runs 3] [--margin 0.05]
        [--scope tasks|general]

A second table: an edit that breaks k of n tasks (each by 0.5, the others unchanged), the case a
small suite must catch; P(not worse) under both claims.
"""

# The world of one trial: each eval has a difficulty (BASE's true mean score, uniform in
# [0.15, 0.85]); HEAD's true mean is BASE's plus Δ_true plus a per-eval effect of mean zero, so
# Δ_true is the mean effect over the population of evals. Run scores are unbiased: a Beta or a
# count of binary expectations whose mean is the true mean (no clipping that would move Δ_true).
#   continuous  run scores ~ Beta with the true mean, sd ≈ 0.15; per-eval effects sd 0.05
#   levels4     4 binary expectations per eval, each passed with the true mean's probability
#   passfail    1 binary expectation per eval (the coarsest scores there are)
#   hetero      continuous, per-eval effects uniform in ±0.2 (sd 0.115): an edit that helps some
#               tasks and hurts others; difficulties in [0.3, 0.7] so no true mean leaves [0, 1]
#   sparse      continuous, the whole effect on a few evals: each eval moves by 0.5 with
#               probability |Δ_true| / 0.5, the others not at all (skewed, heavy-tailed)
#   stable      outputs that repeat exactly (no run noise), per-eval effects sd 0.02
# The gate is noninferiority.check at confidence 0.95 with the resolution step of the world.

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table

from optimizer.decide import noninferiority as ni

WORLDS = ("continuous", "levels4", "passfail", "hetero", "sparse", "stable")
KAPPA = 10.0  # Beta(m·κ, (1 − m)·κ): sd 0.15 at m = 0.5
DELTAS = (-0.10, -0.05, 0.0, 0.05)


def _inside(x: float) -> float:
    return min(0.999, max(0.001, x))


def _score(world: str, mean: float, rng: random.Random) -> float:
    if world in ("levels4", "passfail"):
        k = 4 if world == "levels4" else 1
        return sum(rng.random() < mean for _ in range(k)) / k
    if world == "stable":
        return mean
    m = _inside(mean)
    return rng.betavariate(m * KAPPA, (1 - m) * KAPPA)


def _means(world: str, delta: float, rng: random.Random) -> tuple[float, float]:
    """BASE's and HEAD's true mean score on one eval."""
    if world == "sparse":
        lo, hi = (0.5, 0.85) if delta < 0 else (0.15, 0.5)
        base = rng.uniform(lo, hi)
        hit = delta != 0 and rng.random() < abs(delta) / 0.5
        return base, base + (0.5 if delta > 0 else -0.5) * hit
    if world == "hetero":
        base = rng.uniform(0.3, 0.7)
        return base, base + delta + rng.uniform(-0.2, 0.2)
    base = rng.uniform(0.15, 0.85)
    return base, base + delta + rng.gauss(0, 0.02 if world == "stable" else 0.05)


def outcome_and_delta(
    world: str,
    n: int,
    delta: float,
    runs: int,
    margin: float,
    rng: random.Random,
    scope: str = "general",
    broken: int = 0,
) -> tuple[str, float]:
    """One gate's outcome and the true Δ on these tasks (the mean over its evals of HEAD's true
    mean less BASE's): what a claim on these tasks is right or wrong about. `broken` evals (the
    first ones) lose 0.5 of their true mean on HEAD, the others are unchanged (delta ignored)."""
    hs: dict[int, list[float]] = {}
    bs: dict[int, list[float]] = {}
    realized = 0.0
    for e in range(n):
        if broken:
            base = rng.uniform(0.55, 0.85)
            head = base - 0.5 if e < broken else base
        else:
            base, head = (min(1.0, max(0.0, x)) for x in _means(world, delta, rng))
        realized += (head - base) / n
        bs[e] = [_score(world, base, rng) for _ in range(runs)]
        hs[e] = [_score(world, head, rng) for _ in range(runs)]
    k = 1 if world == "passfail" else 4
    step = ni.resolution(runs, dict.fromkeys(hs, k))
    if scope == "tasks":
        said = ni.check_tasks(hs, bs, confidence=0.95, margin=margin, step=step).outcome
        return said, realized
    diffs = {e: sum(hs[e]) / runs - sum(bs[e]) / runs for e in hs}
    return ni.check(diffs, confidence=0.95, margin=margin, step=step).outcome, realized


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--evals", type=int, nargs="*", default=[3, 5, 8, 15, 30])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--margin", type=float, default=0.05)
    p.add_argument("--worlds", nargs="*", default=list(WORLDS), choices=WORLDS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scope", choices=("tasks", "general"), default="tasks")
    args = p.parse_args(argv)
    table = Table(
        title=f"P(gate says not worse), claim: {args.scope}, {args.trials} trials a cell, "
        f"{args.runs} runs per eval, margin {args.margin}; Δ_true = −margin is the false pass "
        "rate (target ≤ 5%)"
    )
    table.add_column("world")
    table.add_column("evals", justify="right")
    for d in DELTAS:
        label = f"Δ_true {d:+.2f}" + (" (false pass)" if abs(d + args.margin) < 1e-9 else "")
        table.add_column(label, justify="right")
    worst = 0.0
    for world in args.worlds:
        for n in args.evals:
            row = [world, str(n)]
            for d in DELTAS:
                rng = random.Random(f"{args.seed}-{world}-{n}-{d}")
                passed = (
                    sum(
                        outcome_and_delta(world, n, d, args.runs, args.margin, rng, args.scope)[0]
                        == "not_worse"
                        for _ in range(args.trials)
                    )
                    / args.trials
                )
                if abs(d + args.margin) < 1e-9:
                    worst = max(worst, passed)
                row.append(f"{passed:.1%}")
            table.add_row(*row)
    console = Console(width=140)
    console.print(table)
    console.print(
        f"worst false pass rate (Δ_true = −{args.margin}) over every world and size: {worst:.1%}"
    )
    # The tasks claim is right or wrong about these evals: among gates whose true Δ on their own
    # evals is −margin or lower (whatever the population's), how many said not worse.
    wrong_worst = 0.0
    for world in args.worlds:
        for n in args.evals:
            hit = total = 0
            for d in DELTAS[:2]:
                rng = random.Random(f"{args.seed}-{world}-{n}-{d}-realized")
                for _ in range(args.trials):
                    said, realized = outcome_and_delta(
                        world, n, d, args.runs, args.margin, rng, args.scope
                    )
                    if realized <= -args.margin + 1e-12:
                        total += 1
                        hit += said == "not_worse"
            if total >= 50:
                wrong_worst = max(wrong_worst, hit / total)
    console.print(
        f"claim {args.scope}: worst share saying not worse of gates whose true Δ on their own "
        f"evals is −{args.margin} or lower: {wrong_worst:.1%} (target ≤ 5%)"
    )
    broken = Table(title="an edit that breaks k of n tasks by 0.5: P(gate says not worse)")
    for col in ("world", "evals", "broken", "claim: tasks", "claim: general"):
        broken.add_column(col, justify="right")
    for world in ("continuous", "levels4", "passfail"):
        for n in (5, 8):
            for k in (1, 2):
                said = []
                for scope in ("tasks", "general"):
                    rng = random.Random(f"{args.seed}-broken-{world}-{n}-{k}-{scope}")
                    hits = sum(
                        outcome_and_delta(world, n, 0.0, args.runs, args.margin, rng, scope, k)[0]
                        == "not_worse"
                        for _ in range(args.trials)
                    )
                    said.append(f"{hits / args.trials:.1%}")
                broken.add_row(world, str(n), str(k), *said)
    console.print(broken)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
