"""Selection quality of the promotion rule, simulated (no model calls): false promotions and power.
Never a timed test and never a model call: it prints a table and the target ratios.

    .venv/bin/python bench/selection.py [--trials 500] [--min-effect X] [--majority X] ...
"""

# The world of one trial: each eval has a difficulty (the parent's true mean score, uniform in
# [0.15, 0.85]); the child's true mean is the parent's plus Δ_true plus a per-eval heterogeneity
# (sd 0.05). A run's true quality is its mean plus run noise (sd 0.12) and the judge adds its own
# noise (sd 0.09): observed scores have sd ≈ 0.15, clipped to [0, 1]. The comparator answers "A"
# with probability position_bias whatever it sees; otherwise it perceives each output's true
# quality with noise (sd 0.07) and says TIE when the two look within 0.02 of each other.
#
# Rules, side by side:
#   default  optimizer.select.decide with the selection settings, from 3 runs per eval, adding a
#            run to both versions while it says needs_more_runs (as the loop does);
#   point    promote when the mean child score is above the mean parent score (3 runs);
#   3 votes  promote when the child wins ≥ 2 of 3 single-order comparator votes (random order).

from __future__ import annotations

import argparse
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from optimizer.config import Selection
from optimizer.search import select as select_module
from optimizer.search.select import ComparisonTally, decide

DELTAS = (-0.05, 0.0, 0.05, 0.10, 0.20)
EVAL_COUNTS = (5, 10, 20)
START_RUNS = 3
RUN_SD, JUDGE_SD, HETERO_SD = 0.12, 0.09, 0.05
COMPARATOR_SD, COMPARATOR_TIE = 0.07, 0.02


@dataclass(frozen=True)
class Cell:
    n_evals: int
    delta: float
    trials: int
    seed: int
    selection: Selection
    position_bias: float
    min_verdicts: int


@dataclass
class CellResult:
    cell: Cell
    default: int = 0
    point: int = 0
    votes: int = 0
    by_comparator: int = 0
    runs_used: int = 0


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


class World:
    """One trial's evals, with runs drawn lazily so the adaptive rule can ask for more."""

    def __init__(self, n_evals: int, delta: float, rng: random.Random) -> None:
        self.rng = rng
        self.parent_mean = [rng.uniform(0.15, 0.85) for _ in range(n_evals)]
        self.child_mean = [m + delta + rng.gauss(0, HETERO_SD) for m in self.parent_mean]
        # per eval: list of (true quality, observed score)
        self.child: list[list[tuple[float, float]]] = [[] for _ in range(n_evals)]
        self.parent: list[list[tuple[float, float]]] = [[] for _ in range(n_evals)]

    def _run(self, mean: float) -> tuple[float, float]:
        quality = mean + self.rng.gauss(0, RUN_SD)
        return quality, _clip(quality + self.rng.gauss(0, JUDGE_SD))

    def ensure_runs(self, runs: int) -> None:
        for e in range(len(self.parent_mean)):
            while len(self.child[e]) < runs:
                self.child[e].append(self._run(self.child_mean[e]))
                self.parent[e].append(self._run(self.parent_mean[e]))

    def scores(self, runs: int) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
        child = {e: [s for _, s in self.child[e][:runs]] for e in range(len(self.child))}
        parent = {e: [s for _, s in self.parent[e][:runs]] for e in range(len(self.parent))}
        return child, parent

    def judge(self, quality_a: float, quality_b: float, bias: float) -> str:
        if self.rng.random() < bias:
            return "A"
        a = quality_a + self.rng.gauss(0, COMPARATOR_SD)
        b = quality_b + self.rng.gauss(0, COMPARATOR_SD)
        if abs(a - b) < COMPARATOR_TIE:
            return "TIE"
        return "A" if a > b else "B"


def _side(verdict: str, child_is_a: bool) -> str:
    if verdict == "TIE":
        return "tie"
    return "child" if (verdict == "A") == child_is_a else "parent"


def _pair_verdict(world: World, e: int, r: int, bias: float) -> str:
    qc, qp = world.child[e][r][0], world.parent[e][r][0]
    first = _side(world.judge(qc, qp, bias), True)
    second = _side(world.judge(qp, qc, bias), False)
    return first if first == second else "inconsistent"


def run_cell(cell: Cell) -> CellResult:
    select_module.MIN_CONSISTENT_VERDICTS = cell.min_verdicts  # a module constant, per worker
    result = CellResult(cell)
    cap = max(START_RUNS, cell.selection.max_runs_per_eval)
    for trial in range(cell.trials):
        # One world per trial, seeded by the trial alone: every rule and every setting sees the
        # same evals and the same first runs (common random numbers make columns comparable).
        rng = random.Random(f"{cell.seed}:{cell.n_evals}:{cell.delta}:{trial}")
        world = World(cell.n_evals, cell.delta, rng)
        world.ensure_runs(START_RUNS)
        child, parent = world.scores(START_RUNS)

        # naive 1: the point estimate
        if sum(map(sum, child.values())) > sum(map(sum, parent.values())):
            result.point += 1

        # naive 2: three single-order votes on three random pairs, order drawn at random
        wins = 0
        for _ in range(3):
            e, r = rng.randrange(cell.n_evals), rng.randrange(START_RUNS)
            child_is_a = rng.random() < 0.5
            qc, qp = world.child[e][r][0], world.parent[e][r][0]
            qa, qb = (qc, qp) if child_is_a else (qp, qc)
            wins += _side(world.judge(qa, qb, cell.position_bias), child_is_a) == "child"
        result.votes += wins >= 2

        # the rule, with adaptive runs; every pair is judged once in each order
        tally = ComparisonTally()
        runs, judged = START_RUNS, 0
        while True:
            for r in range(judged, runs):
                for e in range(cell.n_evals):
                    verdict = _pair_verdict(world, e, r, cell.position_bias)
                    tally.pairs += 1
                    if verdict == "child":
                        tally.child_wins += 1
                    elif verdict == "parent":
                        tally.parent_wins += 1
                    elif verdict == "tie":
                        tally.ties += 1
                    else:
                        tally.inconsistent += 1
            judged = runs
            tally.swap_consistency = 1 - tally.inconsistent / tally.pairs
            decision = decide(
                child, parent, tally, selection=cell.selection, rng=rng,
                judge_errors=0, total_runs=2 * runs * cell.n_evals,
            )
            if not decision.needs_more_runs or runs >= cap:
                break
            runs += 1
            world.ensure_runs(runs)
            child, parent = world.scores(runs)
        result.runs_used += runs
        if decision.decision == "won":
            result.default += 1
            result.by_comparator += "comparator" in decision.reason
    return result


def main(argv: list[str] | None = None) -> int:
    defaults = Selection()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=500)
    p.add_argument("--evals", type=int, nargs="*", default=list(EVAL_COUNTS))
    p.add_argument("--deltas", type=float, nargs="*", default=list(DELTAS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--position-bias", type=float, default=0.3)
    p.add_argument("--min-effect", type=float, default=defaults.min_effect)
    p.add_argument("--majority", type=float, default=defaults.comparator_majority)
    p.add_argument("--max-runs", type=int, default=defaults.max_runs_per_eval)
    p.add_argument("--confidence", type=float, default=defaults.confidence)
    p.add_argument("--samples", type=int, default=defaults.bootstrap_samples)
    p.add_argument("--min-verdicts", type=int, default=select_module.MIN_CONSISTENT_VERDICTS)
    args = p.parse_args(argv)
    selection = Selection(
        min_effect=args.min_effect, comparator_majority=args.majority,
        max_runs_per_eval=args.max_runs, confidence=args.confidence,
        bootstrap_samples=args.samples,
        max_judge_error_rate=defaults.max_judge_error_rate, screen_margin=defaults.screen_margin,
    )
    cells = [
        Cell(n, d, args.trials, args.seed, selection, args.position_bias, args.min_verdicts)
        for n in args.evals for d in args.deltas
    ]
    started = time.perf_counter()
    if args.workers > 1:
        with ProcessPoolExecutor(args.workers) as pool:
            results = list(pool.map(run_cell, cells))
    else:
        results = [run_cell(c) for c in cells]
    elapsed = time.perf_counter() - started

    print(
        f"Selection rule, simulated (no model calls): min_effect={selection.min_effect} "
        f"majority={selection.comparator_majority} max_runs={selection.max_runs_per_eval} "
        f"confidence={selection.confidence} samples={selection.bootstrap_samples} "
        f"min_verdicts={args.min_verdicts} "
        f"position_bias={args.position_bias}; start {START_RUNS} runs/eval; "
        f"score sd≈{(RUN_SD**2 + JUDGE_SD**2) ** 0.5:.2f}"
    )
    header = (
        f"{'evals':>5} {'Δ_true':>7} {'trials':>6} | {'default':>7} {'(by cmp)':>8} "
        f"{'runs/eval':>9} | {'point':>6} | {'3 votes':>7}"
    )
    print(header)
    print("-" * len(header))
    for res in results:
        c, t = res.cell, res.cell.trials
        kind = "false" if c.delta <= 0 else "power"
        print(
            f"{c.n_evals:>5} {c.delta:>+7.2f} {t:>6} | {res.default / t:>7.1%} "
            f"{res.by_comparator / t:>8.1%} {res.runs_used / t:>9.2f} | {res.point / t:>6.1%} | "
            f"{res.votes / t:>7.1%}   {kind}"
        )
    def rate(n_evals: int | None, pick) -> float:
        rates = [r.default / r.cell.trials for r in results
                 if (n_evals is None or r.cell.n_evals == n_evals) and pick(r.cell.delta)]
        return max(rates) if rates else float("nan")

    false_10 = rate(10, lambda d: d <= 0)
    power_10 = rate(10, lambda d: abs(d - 0.2) < 1e-9)
    met = false_10 <= 0.05 and power_10 >= 0.8
    print(
        f"\ndefault rule at 10 evals: false promotions ≤ {false_10:.1%} (target ≤ 5%), power at "
        f"+0.20 {power_10:.1%} (target ≥ 80%): {'MET' if met else 'NOT MET'}. Worst false-promotion "
        f"rate over every eval count: {rate(None, lambda d: d <= 0):.1%}. "
        f"{len(results) * args.trials} trials per rule in {elapsed:.1f} s."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
