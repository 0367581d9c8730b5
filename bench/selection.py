"""Selection quality of the promotion rule, simulated (no model calls): false promotions and power.
Never a timed test and never a model call: it prints a table and the target ratios.

    .venv/bin/python bench/selection.py [--trials 500] [--rules sequential bootstrap] [--hetero X] ...
"""

# The world of one trial: each eval has a difficulty (the parent's true mean score, uniform in
# [0.15, 0.85]); the child's true mean is the parent's plus Δ_true plus a per-eval heterogeneity
# (sd 0.05, --hetero). A run's true quality is its mean plus run noise (sd 0.12) and the judge adds its own
# noise (sd 0.09): observed scores have sd ≈ 0.15, clipped to [0, 1]. The comparator answers "A"
# with probability position_bias whatever it sees; otherwise it perceives each output's true
# quality with noise (sd 0.07) and says TIE when the two look within 0.02 of each other.
# --levels K (0: off) rounds every observed score to one of K+1 levels (0, 1/K, …, 1), as an eval
# graded on K binary expectations is: with K = 1 or 2 many evals have all runs identical (an
# expectation passed every time), the case selection.runs_to = informative skips.
#
# Rules, side by side:
#   sequential, bootstrap  optimizer.select.decide with the selection settings and that
#            selection.rule (the new default and the earlier rule), from 3 runs per eval, adding
#            a run to both versions while it says needs_more_runs, to the evals that
#            optimizer.search.allot picks (selection.runs_to, --runs-to), as the loop does;
#   point    promote when the mean child score is above the mean parent score (3 runs);
#   3 votes  promote when the child wins ≥ 2 of 3 single-order comparator votes (random order).

from __future__ import annotations

import argparse
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from optimizer.config import Selection
from optimizer.search import select as select_module
from optimizer.search.allot import allot
from optimizer.search.select import ComparisonTally, Decision, decide

DELTAS = (-0.05, 0.0, 0.05, 0.10, 0.20)
EVAL_COUNTS = (3, 5, 8, 10, 20, 50)
RULES = ("sequential", "bootstrap")
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
    rules: tuple[str, ...] = RULES
    hetero: float = HETERO_SD
    levels: int = 0


@dataclass
class RuleResult:
    won: int = 0
    by_comparator: int = 0
    runs_used: float = 0.0  # summed over trials: mean runs per eval of each


@dataclass
class CellResult:
    cell: Cell
    point: int = 0
    votes: int = 0
    rules: dict[str, RuleResult] = field(default_factory=dict)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


class World:
    """One trial's evals, with runs drawn lazily so the adaptive rule can ask for more."""

    def __init__(self, n_evals: int, delta: float, rng: random.Random, hetero: float,
                 levels: int = 0) -> None:
        self.rng, self.levels = rng, levels
        self.parent_mean = [rng.uniform(0.15, 0.85) for _ in range(n_evals)]
        self.child_mean = [m + delta + rng.gauss(0, hetero) for m in self.parent_mean]
        # each pair judged once in each order, remembered: every rule sees the same verdicts
        self.verdicts: dict[tuple[int, int], str] = {}
        # per eval: list of (true quality, observed score)
        self.child: list[list[tuple[float, float]]] = [[] for _ in range(n_evals)]
        self.parent: list[list[tuple[float, float]]] = [[] for _ in range(n_evals)]

    def _run(self, mean: float) -> tuple[float, float]:
        quality = mean + self.rng.gauss(0, RUN_SD)
        score = _clip(quality + self.rng.gauss(0, JUDGE_SD))
        return quality, round(score * self.levels) / self.levels if self.levels else score

    def ensure_runs(self, runs: int | dict[int, int]) -> None:
        for e in range(len(self.parent_mean)):
            wanted = runs if isinstance(runs, int) else runs[e]
            while len(self.child[e]) < wanted:
                self.child[e].append(self._run(self.child_mean[e]))
                self.parent[e].append(self._run(self.parent_mean[e]))

    def scores(self, runs: int | dict[int, int]) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
        n = {e: runs if isinstance(runs, int) else runs[e] for e in range(len(self.child))}
        child = {e: [s for _, s in self.child[e][:n[e]]] for e in range(len(self.child))}
        parent = {e: [s for _, s in self.parent[e][:n[e]]] for e in range(len(self.parent))}
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
    if (e, r) not in world.verdicts:
        qc, qp = world.child[e][r][0], world.parent[e][r][0]
        first = _side(world.judge(qc, qp, bias), True)
        second = _side(world.judge(qp, qc, bias), False)
        world.verdicts[e, r] = first if first == second else "inconsistent"
    return world.verdicts[e, r]


KEYS = {"child": "child_wins", "parent": "parent_wins", "tie": "ties",
        "inconsistent": "inconsistent"}


def _adaptive(world: World, cell: Cell, rule: str, rng: random.Random) -> tuple[float, Decision]:
    """One rule from START_RUNS runs per eval, adding a run (to the evals allot picks) while it
    asks for more; returns the mean runs per eval and the decision."""
    selection = replace_rule(cell.selection, rule)
    cap = max(START_RUNS, selection.max_runs_per_eval)
    tally = ComparisonTally()
    runs = START_RUNS
    want = dict.fromkeys(range(cell.n_evals), START_RUNS)
    judged = dict.fromkeys(range(cell.n_evals), 0)
    while True:
        world.ensure_runs(want)
        child, parent = world.scores(want)
        for e in range(cell.n_evals):
            for r in range(judged[e], want[e]):
                key = KEYS[_pair_verdict(world, e, r, cell.position_bias)]
                counts = tally.per_eval.setdefault(e, dict.fromkeys(KEYS.values(), 0))
                counts[key] += 1
                setattr(tally, key, getattr(tally, key) + 1)
                tally.pairs += 1
            judged[e] = want[e]
        tally.swap_consistency = 1 - tally.inconsistent / tally.pairs
        decision = decide(child, parent, tally, selection=selection, rng=rng, judge_errors=0,
                          total_runs=2 * sum(want.values()), first_runs=START_RUNS, look=runs)
        used = sum(want.values()) / cell.n_evals
        if not decision.needs_more_runs or runs >= cap:
            return used, decision
        more = allot(child, parent, want, look=runs, mode=selection.runs_to,
                     share=selection.runs_share)
        if not more.to:
            return used, decision
        want.update(more.to)
        runs += 1


def replace_rule(selection: Selection, rule: str) -> Selection:
    return selection.model_copy(update={"rule": rule})


def run_cell(cell: Cell) -> CellResult:
    select_module.MIN_CONSISTENT_VERDICTS = cell.min_verdicts  # a module constant, per worker
    result = CellResult(cell)
    for trial in range(cell.trials):
        # One world per trial, seeded by the trial alone: every rule and every setting sees the
        # same evals and the same first runs (common random numbers make columns comparable).
        rng = random.Random(f"{cell.seed}:{cell.n_evals}:{cell.delta}:{trial}")
        world = World(cell.n_evals, cell.delta, rng, cell.hetero, cell.levels)
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

        # the rules, each with adaptive runs; every pair is judged once in each order
        for rule in cell.rules:
            runs, decision = _adaptive(world, cell, rule, rng)
            got = result.rules.setdefault(rule, RuleResult())
            got.runs_used += runs
            if decision.decision == "won":
                got.won += 1
                got.by_comparator += "comparator" in decision.reason
    return result


def _rate(results: list[CellResult], rule: str, n_evals: int | None, pick) -> float:
    """The worst promotion rate of `rule` over the cells picked (max: a bound must hold in each)."""
    rates = [r.rules[rule].won / r.cell.trials for r in results
             if (n_evals is None or r.cell.n_evals == n_evals) and pick(r.cell.delta)]
    return max(rates) if rates else float("nan")


def _runs(results: list[CellResult], rule: str, n_evals: int, delta: float) -> float:
    found = [r.rules[rule].runs_used / r.cell.trials for r in results
             if r.cell.n_evals == n_evals and abs(r.cell.delta - delta) < 1e-9]
    return found[0] if found else float("nan")


def _power(results: list[CellResult], rule: str, n_evals: int, delta: float) -> float:
    found = [r.rules[rule].won / r.cell.trials for r in results
             if r.cell.n_evals == n_evals and abs(r.cell.delta - delta) < 1e-9]
    return found[0] if found else float("nan")


# (what, target, how to read it off the results, True when a higher figure is better)
TARGETS = [
    ("runs/eval, equal child, 10 evals", 4.0, lambda rs, rule: _runs(rs, rule, 10, 0.0), False),
    ("runs/eval, −0.05 child, 10 evals", 3.5, lambda rs, rule: _runs(rs, rule, 10, -0.05), False),
    ("false promotions, equal child, worst eval count", 0.05,
     lambda rs, rule: _rate(rs, rule, None, lambda d: abs(d) < 1e-9), False),
    ("false promotions, −0.05 child, worst eval count", 0.01,
     lambda rs, rule: _rate(rs, rule, None, lambda d: d < -1e-9), False),
    ("power at +0.10, 10 evals", 0.80, lambda rs, rule: _power(rs, rule, 10, 0.10), True),
    ("power at +0.05, 20 evals", 0.35, lambda rs, rule: _power(rs, rule, 20, 0.05), True),
]


def main(argv: list[str] | None = None) -> int:
    defaults = Selection()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=500)
    p.add_argument("--evals", type=int, nargs="*", default=list(EVAL_COUNTS))
    p.add_argument("--deltas", type=float, nargs="*", default=list(DELTAS))
    p.add_argument("--rules", nargs="*", default=list(RULES), choices=RULES)
    p.add_argument("--hetero", type=float, default=HETERO_SD,
                   help="sd of the per-eval spread of the child's true advantage")
    p.add_argument("--levels", type=int, default=0,
                   help="round observed scores to K+1 levels (0: continuous); 1 = pass/fail")
    p.add_argument("--runs-to", default=defaults.runs_to, choices=("informative", "all"))
    p.add_argument("--runs-share", type=float, default=defaults.runs_share)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--position-bias", type=float, default=0.3)
    p.add_argument("--min-effect", type=float, default=defaults.min_effect)
    p.add_argument("--majority", type=float, default=defaults.comparator_majority)
    p.add_argument("--max-runs", type=int, default=defaults.max_runs_per_eval)
    p.add_argument("--confidence", type=float, default=defaults.confidence)
    p.add_argument("--samples", type=int, default=defaults.bootstrap_samples)
    p.add_argument("--futility", type=float, default=defaults.futility)
    p.add_argument("--min-verdicts", type=int, default=select_module.MIN_CONSISTENT_VERDICTS)
    args = p.parse_args(argv)
    selection = Selection(
        min_effect=args.min_effect, comparator_majority=args.majority,
        max_runs_per_eval=args.max_runs, confidence=args.confidence,
        bootstrap_samples=args.samples, futility=args.futility,
        max_judge_error_rate=defaults.max_judge_error_rate, screen_margin=defaults.screen_margin,
        runs_to=args.runs_to, runs_share=args.runs_share,
    )
    rules = tuple(args.rules)
    cells = [
        Cell(n, d, args.trials, args.seed, selection, args.position_bias, args.min_verdicts,
             rules, args.hetero, args.levels)
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
        f"Selection rules, simulated (no model calls): min_effect={selection.min_effect} "
        f"confidence={selection.confidence} max_runs={selection.max_runs_per_eval} "
        f"futility={selection.futility} (sequential); majority={selection.comparator_majority} "
        f"samples={selection.bootstrap_samples} (bootstrap); min_verdicts={args.min_verdicts} "
        f"position_bias={args.position_bias}; start {START_RUNS} runs/eval; "
        f"score sd≈{(RUN_SD**2 + JUDGE_SD**2) ** 0.5:.2f}; per-eval spread sd {args.hetero}; "
        f"runs_to={selection.runs_to} runs_share={selection.runs_share}; "
        f"score levels {args.levels or 'continuous'}"
    )
    head = " | ".join(f"{rule[:10]:>10} {'(by cmp)':>8} {'runs/eval':>9}" for rule in rules)
    header = f"{'evals':>5} {'Δ_true':>7} {'trials':>6} | {head} | {'point':>6} | {'3 votes':>7}"
    print(header)
    print("-" * len(header))
    for res in results:
        c, t = res.cell, res.cell.trials
        kind = "false" if c.delta <= 0 else "power"
        cols = " | ".join(
            f"{res.rules[rule].won / t:>10.1%} {res.rules[rule].by_comparator / t:>8.1%} "
            f"{res.rules[rule].runs_used / t:>9.2f}" for rule in rules)
        print(f"{c.n_evals:>5} {c.delta:>+7.2f} {t:>6} | {cols} | {res.point / t:>6.1%} | "
              f"{res.votes / t:>7.1%}   {kind}")
    print()
    width = max(len(what) for what, *_ in TARGETS)
    print(f"{'target':<{width}} {'bound':>6} | " + " | ".join(f"{rule:>10}" for rule in rules))
    for what, bound, read, higher in TARGETS:
        figures = []
        for rule in rules:
            x = read(results, rule)
            ok = x >= bound if higher else x <= bound
            shown = f"{x:.2f}" if bound > 1 else f"{x:.1%}"
            figures.append(f"{shown + (' ok' if ok else ' NO'):>10}")
        sign = "≥" if higher else "≤"
        shown_bound = f"{bound:.1f}" if bound > 1 else f"{bound:.0%}"
        print(f"{what:<{width}} {sign}{shown_bound:>5} | " + " | ".join(figures))
    print(f"{len(results) * args.trials} trials per rule in {elapsed:.1f} s (figures read off "
          "the cells above; a missing cell shows nan).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
