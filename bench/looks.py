"""Does each look's test hold its level, and do the looks together spend at most α? Equal children
of bench/selection.py's panel of worlds, the claim made by default for each suite size, no model
calls. Never a timed test: it prints a table.

    .venv/bin/python bench/looks.py [--trials 4000] [--worlds ...] [--evals ...] [--workers 2]
        [--alpha 0.05]

Per world and eval count: for each look (3, 4, 6, 9, 12 runs per eval) the share of equal children
whose score bound at that look's level (decide/spending.py look_level) clears zero, against the
level; then `ever`, the share whose bound clears zero at some look when every child is taken to
the cap (no futility stop, no minimum effect): the false-promotion chance the spending bounds by
α. The rule itself stops most equal children early and so promotes fewer (bench/selection.py).
`--alpha` sets the decision's budget (the night's control passes smaller ones).
The per-look rates test the Student-t reference (which is not exact for pass/fail or discrete
scores); `ever` tests that reference and the spending together: under `tasks` the union bound
(the shares sum to α whatever the looks' correlation), under `general` the exact levels (which
assume the looks are at least as correlated as nested runs make them)."""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _worlds as worlds  # noqa: E402

from optimizer.config import Selection  # noqa: E402
from optimizer.decide import sequential, spending  # noqa: E402
from optimizer.decide.step import claim_scope  # noqa: E402

EVAL_COUNTS = (3, 5, 8, 10, 20, 50)
START_RUNS = 3


@dataclass(frozen=True)
class Cell:
    world: str
    n_evals: int
    trials: int
    seed: int
    alpha: float


def run_cell(cell: Cell) -> tuple[Cell, str, list[float], list[int], int]:
    """(cell, claim, level per look, bounds above zero per look, children above zero at any look)."""
    selection = Selection()
    claim = claim_scope(selection, cell.n_evals)
    looks = spending.schedule(START_RUNS, selection.max_runs_per_eval)
    alpha = cell.alpha
    levels = [
        spending.look_level(alpha, r, selection.max_runs_per_eval, START_RUNS, claim) for r in looks
    ]
    above, ever = [0] * len(looks), 0
    for t in range(cell.trials):
        # The same draws as bench/selection.py's equal children of this cell (its seed layout).
        tr = worlds.trial(
            cell.world, cell.n_evals, 0.0, claim == "tasks", (cell.seed, cell.n_evals, 1000, t)
        )
        crossed = False
        for k, (r, level) in enumerate(zip(looks, levels, strict=True)):
            test = sequential.score_test(
                tr.child[:, :r].tolist(), tr.parent[:, :r].tolist(), level, claim
            )
            if test.low > 0:
                above[k] += 1
                crossed = True
        ever += crossed
    return cell, claim, levels, above, ever


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=4000)
    p.add_argument("--worlds", nargs="*", default=list(worlds.PANEL), choices=worlds.WORLDS)
    p.add_argument("--evals", type=int, nargs="*", default=list(EVAL_COUNTS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--alpha", type=float, default=round(1 - Selection().confidence, 10))
    args = p.parse_args(argv)
    cells = [
        Cell(w, n, args.trials, args.seed, args.alpha) for w in args.worlds for n in args.evals
    ]
    started = time.perf_counter()
    if args.workers > 1:
        with ProcessPoolExecutor(args.workers) as pool:
            results = list(pool.map(run_cell, cells))
    else:
        results = [run_cell(c) for c in cells]
    alpha = args.alpha
    pct = ".2%" if alpha >= 0.01 else ".3%"
    print(
        f"Equal children, the claim made, {args.trials} trials a cell: the share whose bound "
        f"clears zero at each look (its level in brackets) and at any look with no futility "
        f"stop (`ever`, bounded by α = {alpha:g})."
    )
    print()
    looks = spending.schedule(START_RUNS, Selection().max_runs_per_eval)
    head = f"{'world':<12} {'evals':>5} {'claim':<7} | " + " ".join(
        f"{f'look {r}':>16}" for r in looks
    )
    print(head + f" | {'ever':>9}  {'ratio':>5}")
    print("-" * (len(head) + 20))
    worst: tuple[float, str] = (0.0, "")
    for cell, claim, levels, above, ever in results:
        cols = " ".join(
            f"{a / cell.trials:>7{pct}} [{lv:{pct}}]".rjust(16)
            for a, lv in zip(above, levels, strict=True)
        )
        rate = ever / cell.trials
        ratio = max(
            (a / cell.trials / lv for a, lv in zip(above, levels, strict=True) if lv > 0),
            default=0.0,
        )
        worst = max(worst, (rate, f"{cell.world}, {cell.n_evals} evals"))
        flag = "ok" if rate <= alpha else "NO"
        print(
            f"{cell.world:<12} {cell.n_evals:>5} {claim:<7} | {cols} | {rate:>6{pct}} {flag}"
            f"  {ratio:>5.2f}"
        )
    print()
    print(
        f"Worst `ever`: {worst[0]:{pct}} ({worst[1]}). `ratio`: the largest per-look rate over "
        f"its level. {len(results) * args.trials} trials in {time.perf_counter() - started:.0f} s."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
