"""A night's promotions as a family (selection.night): how many promotions a night of children
makes, and what share of them is false, with LORD++ online false-discovery control against each
decision at α = 0.05 alone. Simulated (no model calls); prints a table.

    .venv/bin/python bench/night.py [--nights 300] [--children 20] [--evals 5 10] [--world continuous]

A night: `--children` children judged one after another, each in its own trial of a world of
bench/_worlds.py (default: continuous), each equal to its parent (Δ = 0) with probability 0.6,
worse (−0.05) with 0.2, better (+0.10) with 0.1 and clearly better (+0.20) with 0.1. A promotion
of a child that is not better is false. FDR = the mean over nights of false / max(1, promoted)."""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _worlds as worlds  # noqa: E402
import selection as bench  # noqa: E402

from optimizer.config import Selection  # noqa: E402
from optimizer.decide import fdr  # noqa: E402
from optimizer.decide.comparison import Asked, Measured  # noqa: E402
from optimizer.decide.step import claim_scope, decide  # noqa: E402

MIX = ((0.0, 0.6), (-0.05, 0.2), (0.10, 0.1), (0.20, 0.1))


def _child(tr: worlds.Trial, claim: str, selection: Selection, alpha: float) -> bool:
    runs = bench.START_RUNS
    while True:
        measured = Measured(
            dict(enumerate(tr.child[:, :runs].tolist())),
            dict(enumerate(tr.parent[:, :runs].tolist())),
            bench._tally(tr.verdict[:, :runs]),
        )
        asked = Asked(first_runs=bench.START_RUNS, look=runs, scope=claim, alpha=alpha)
        made = decide(measured, asked, selection=selection, rng=bench._RNG)
        if not made.needs_more_runs or made.next_runs is None:
            return made.decision == "won"
        runs = min(made.next_runs, worlds.CAP)


def one_night(
    seed: int, n_evals: int, children: int, world: str, control: str
) -> tuple[int, int, int]:
    """(promotions, false promotions, better children) of one night."""
    selection = Selection()
    claim = claim_scope(selection, n_evals)
    rng = random.Random(f"night:{seed}:{n_evals}")
    outcomes: list[bool] = []
    false = better = 0
    for k in range(children):
        delta = rng.choices([d for d, _ in MIX], [w for _, w in MIX])[0]
        alpha = fdr.lord(outcomes, 0.05).alpha if control == "lord" else 0.05
        tr = worlds.trial(world, n_evals, delta, claim == "tasks", (seed, n_evals, k, 77))
        won = _child(tr, claim, selection, alpha)
        outcomes.append(won)
        false += won and delta <= 0
        better += delta > 0
    return sum(outcomes), false, better


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nights", type=int, default=300)
    p.add_argument("--children", type=int, default=20)
    p.add_argument("--evals", type=int, nargs="*", default=[5, 10, 20])
    p.add_argument("--world", default="continuous", choices=worlds.WORLDS)
    args = p.parse_args(argv)
    started = time.perf_counter()
    print(
        f"Nights of {args.children} children ({', '.join(f'{d:+.2f}: {w:.0%}' for d, w in MIX)}), "
        f"world {args.world}, {args.nights} nights a row"
    )
    print(
        f"{'evals':>5} {'control':<7} | {'promotions':>10} {'false':>6} {'FDR':>6} "
        f"{'nights with a false one':>23} | {'better found':>12}"
    )
    for n in args.evals:
        for control in ("none", "lord"):
            got = [one_night(s, n, args.children, args.world, control) for s in range(args.nights)]
            promoted = sum(g[0] for g in got) / args.nights
            false = sum(g[1] for g in got) / args.nights
            fdr = sum(g[1] / max(1, g[0]) for g in got) / args.nights
            any_false = sum(g[1] > 0 for g in got) / args.nights
            better = sum(g[2] for g in got) / args.nights
            print(
                f"{n:>5} {control:<7} | {promoted:>10.2f} {false:>6.2f} {fdr:>6.1%} "
                f"{any_false:>23.1%} | {(promoted - false) / better:>12.1%}"
            )
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
