"""The adoption rule on bench/selection.py's panel of noise worlds (no model calls): how often a version
that is not better is certified (the bound is adopt.alpha = 5 %, per world), how often a real
+0.10 is certified (power), and what one adoption costs in fresh runs, at 4, 7, 10 and 20 evals.
Never a timed test; prints a table and the target's line.

    .venv/bin/python bench/adoption.py [--trials 400] [--evals 4 7 10 20] [--worlds ...]
        [--usd-per-run 0.036]

Each trial draws fresh runs of the candidate and of the version the user has (bench/_worlds.py,
with the per-eval advantages centred: the claim is "better on these tasks", so an equal
candidate is equal on these evals) and asks optimizer.decide.adopt.decide, the product's rule
with the default settings, at each look of its schedule (3, 4, 6, 9, 12 fresh runs an eval) until
it decides. The cost is both sides' fresh runs; in dollars at --usd-per-run (csv-report's measured
price of one run, executor and grader, in the simulator: $0.036)."""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _worlds as worlds  # noqa: E402

from optimizer.config import Adopt, Selection  # noqa: E402
from optimizer.decide import adopt as rule  # noqa: E402

DELTAS = (-0.05, 0.0, 0.10)
EVAL_COUNTS = (4, 7, 10, 20)


def one(world: str, n: int, delta: float, t: int) -> tuple[bool, int]:
    """(certified, fresh runs an eval it took) of one adoption."""
    tr = worlds.trial(world, n, delta, True, (17, n, round(delta * 1000) + 1000, t))
    adopt, selection = Adopt(), Selection()
    for runs in rule.looks(adopt):
        decided = rule.decide(
            {e: list(tr.child[e, :runs]) for e in range(n)},
            {e: list(tr.parent[e, :runs]) for e in range(n)},
            selection=selection,
            adopt=adopt,
            look=runs,
            rng=random.Random(0),
        )
        if not decided.needs_more_runs:
            break
    return decided.decision == "won", runs


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=400)
    p.add_argument("--evals", type=int, nargs="*", default=list(EVAL_COUNTS))
    p.add_argument("--worlds", nargs="*", default=list(worlds.PANEL), choices=worlds.WORLDS)
    p.add_argument("--usd-per-run", type=float, default=0.036)
    args = p.parse_args(argv)
    print(
        f"adoption rule: α {Adopt().alpha}, looks {rule.looks(Adopt())}, claim: better on these "
        f"tasks; {args.trials} trials a cell\n"
    )
    print(
        "| world | evals | certified at Δ −0.05 | at Δ 0 | power at +0.10 | fresh runs an eval "
        "(mean, +0.10) | runs per adoption | $ per adoption |"
    )
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    powers: dict[int, list[float]] = {n: [] for n in args.evals}
    costs: dict[int, list[float]] = {n: [] for n in args.evals}
    for world in args.worlds:
        for n in args.evals:
            rates, runs_at = {}, {}
            for delta in DELTAS:
                got = [one(world, n, delta, t) for t in range(args.trials)]
                rates[delta] = float(np.mean([c for c, _ in got]))
                runs_at[delta] = float(np.mean([r for _, r in got]))
            worst = max(worst, rates[-0.05], rates[0.0])
            mean_runs = float(np.mean(list(runs_at.values())))
            per = 2 * n * mean_runs
            powers[n].append(rates[0.10])
            costs[n].append(per * args.usd_per_run)
            print(
                f"| {world} | {n} | {rates[-0.05]:.1%} | {rates[0.0]:.1%} | {rates[0.10]:.0%} | "
                f"{runs_at[0.10]:.1f} | {per:.0f} | ${per * args.usd_per_run:.2f} |"
            )
    print("\nby evals, over the worlds: power at +0.10 (min–max), $ per adoption (mean)")
    for n in args.evals:
        print(
            f"  {n} evals: power {min(powers[n]):.0%}–{max(powers[n]):.0%}, "
            f"${float(np.mean(costs[n])):.2f}"
        )
    bound = Adopt().alpha
    verdict = (
        "met" if worst <= bound + 1.96 * np.sqrt(bound * (1 - bound) / args.trials) else "NOT met"
    )
    print(
        f"\nadoption: worst false certification over the panel {worst:.1%} (bound {bound:.0%}, "
        f"within sampling error of {args.trials} trials: {verdict})"
    )


if __name__ == "__main__":
    main()
