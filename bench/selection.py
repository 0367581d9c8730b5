"""Selection quality of the promotion rule on a panel of noise worlds (no model calls): false
promotions, power, runs per eval, and the power of an oracle at the same runs. Never a timed test
and never a model call: it prints tables and the issue's targets, per world and per claim.

    .venv/bin/python bench/selection.py [--trials 400] [--quick] [--worlds ...] [--evals ...]
        [--write-power optimizer/data/power.json]

The worlds are described in bench/_worlds.py. Each trial starts at 3 runs per eval and asks
optimizer.decide.step.decide (the product's rule, with the default selection settings) again at
the runs per eval it names (decision.next_runs) while it says needs_more_runs, with the claim of
the column: `made` is the claim the rule makes by default for that suite size (selection.scope =
auto: tasks below selection.few_evals evals), `tasks` and `general` force one.

Oracle: a fixed-sample one-sided z test at α = 0.05 that knows the true variances, at the rule's
mean runs per eval for that cell (`oracle`), and at the cap of 12 runs per eval (`oracle@cap`):
when even that is below 80%, no rule finds +0.10 with 80% power at this budget. For `tasks` its
variance is Σ(σ²_child + σ²_parent)/(r·E²); for `general` (τ² + mean(σ²_child + σ²_parent)/r)/E,
τ² the spread of the true per-eval advantage. `t 1 look`: the rule's own score test for the claim
(which must estimate the variance) in one look at the whole α = 0.05, at the same runs rounded:
the gap between it and the oracle is the price of not knowing the variance (few evals for
`general`), the gap between it and the rule the price of looking several times and stopping
early."""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist, median

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _worlds as worlds  # noqa: E402

from optimizer.config import Selection  # noqa: E402
from optimizer.decide import sequential  # noqa: E402
from optimizer.decide.comparison import Asked, ComparisonTally, Measured  # noqa: E402
from optimizer.decide.step import claim_scope, compared_runs, decide  # noqa: E402
from optimizer.schemas import RuleDecision  # noqa: E402

DELTAS = (-0.05, 0.0, 0.10)
EVAL_COUNTS = (3, 5, 8, 10, 20, 50)
START_RUNS = 3
ORACLE_TRIALS = 100
# Kept for bench/comparator.py, which draws from this file's earlier single world.
RUN_SD, JUDGE_SD, HETERO_SD = 0.12, 0.09, 0.05
COMPARATOR_SD, COMPARATOR_TIE = 0.07, 0.02
_Z95 = NormalDist().inv_cdf(0.95)
_RNG = random.Random(0)  # decide's rng: the sequential rule never draws from it


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


class World:  # the earlier single world, for bench/comparator.py
    """One trial's evals, with runs drawn lazily so the adaptive rule can ask for more."""

    def __init__(
        self, n_evals: int, delta: float, rng: random.Random, hetero: float, levels: int = 0
    ) -> None:
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

    def scores(
        self, runs: int | dict[int, int]
    ) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
        n = {e: runs if isinstance(runs, int) else runs[e] for e in range(len(self.child))}
        child = {e: [s for _, s in self.child[e][: n[e]]] for e in range(len(self.child))}
        parent = {e: [s for _, s in self.parent[e][: n[e]]] for e in range(len(self.parent))}
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


@dataclass(frozen=True)
class Cell:
    world: str
    n_evals: int
    delta: float
    claim: str  # "tasks" or "general"
    trials: int
    seed: int


@dataclass
class CellResult:
    cell: Cell
    won: int = 0
    by_comparator: int = 0
    runs: float = 0.0  # summed mean runs per eval
    oracle: float = float("nan")  # at the rule's mean runs per eval
    oracle_cap: float = float("nan")  # at the cap
    one_look: float = float("nan")  # the rule's own t test, one look at α, at the same runs

    @property
    def rate(self) -> float:
        return self.won / self.cell.trials

    @property
    def mean_runs(self) -> float:
        return self.runs / self.cell.trials


def _tally(verdict: np.ndarray) -> ComparisonTally:
    wins, losses = (verdict > 0).sum(1), (verdict < 0).sum(1)
    tally = ComparisonTally(
        child_wins=int(wins.sum()), parent_wins=int(losses.sum()), pairs=verdict.size
    )
    tally.per_eval = {
        e: {"child_wins": int(w), "parent_wins": int(lost)}
        for e, (w, lost) in enumerate(zip(wins, losses, strict=True))
    }
    return tally


def adaptive(tr: worlds.Trial, claim: str, selection: Selection) -> tuple[int, RuleDecision]:
    """The rule from START_RUNS runs per eval, at each look it names, as the loop runs it."""
    runs = START_RUNS
    while True:
        child = dict(enumerate(tr.child[:, :runs].tolist()))
        parent = dict(enumerate(tr.parent[:, :runs].tolist()))
        measured = Measured(
            child,
            parent,
            # The pairs the loop has the comparator judge at this look (select.compared_runs).
            _tally(tr.verdict[:, : compared_runs(selection, runs)]),
            total_runs=2 * runs * len(child),
        )
        asked = Asked(first_runs=START_RUNS, look=runs, scope=claim)
        decision = decide(measured, asked, selection=selection, rng=_RNG)
        if not decision.needs_more_runs or decision.next_runs is None:
            return runs, decision
        runs = min(decision.next_runs, worlds.CAP)


def _oracle(cell: Cell, runs: float) -> tuple[float, float]:
    """(power at `runs`, power at the cap) of the known-variance fixed-sample z test."""
    n, found = cell.n_evals, []
    for t in range(min(cell.trials, ORACLE_TRIALS)):
        tr = worlds.trial(
            cell.world,
            n,
            cell.delta,
            cell.claim == "tasks",
            (cell.seed, n, round(cell.delta * 1000) + 1000, t, 7),
            oracle=True,
        )
        found.append((tr.true_d, tr.var_sum))
    normal = NormalDist()
    out = []
    for r in (runs, float(worlds.CAP)):
        if cell.claim == "tasks":
            out.append(
                float(
                    np.mean(
                        [
                            normal.cdf(d.mean() / np.sqrt(v.sum() / (r * n * n)) - _Z95)
                            for d, v in found
                        ]
                    )
                )
            )
        else:
            delta = float(np.mean([d.mean() for d, _ in found]))
            tau2 = float(np.mean([d.var(ddof=1) for d, _ in found])) if n > 1 else 0.0
            var = float(np.mean([v.mean() for _, v in found]))
            out.append(normal.cdf(delta / np.sqrt((tau2 + var / r) / n) - _Z95))
    return out[0], out[1]


def _one_look(cell: Cell, runs: float) -> float:
    """Power of the rule's score test for the claim in one look at the whole α (0.05), at the
    cell's mean runs per eval rounded: what estimating the variance costs, without the looks."""
    r, won = max(2, round(runs)), 0
    trials = min(cell.trials, 2 * ORACLE_TRIALS)
    for t in range(trials):
        tr = worlds.trial(
            cell.world,
            cell.n_evals,
            cell.delta,
            cell.claim == "tasks",
            (cell.seed, cell.n_evals, round(cell.delta * 1000) + 1000, t),
        )
        test = sequential.score_test(
            tr.child[:, :r].tolist(),
            tr.parent[:, :r].tolist(),
            0.05,
            "tasks" if cell.claim == "tasks" else "general",
        )
        won += test.low > 0
    return won / trials


def run_cell(cell: Cell) -> CellResult:
    selection = Selection()
    result = CellResult(cell)
    for t in range(cell.trials):
        tr = worlds.trial(
            cell.world,
            cell.n_evals,
            cell.delta,
            cell.claim == "tasks",
            (cell.seed, cell.n_evals, round(cell.delta * 1000) + 1000, t),
        )
        runs, decision = adaptive(tr, cell.claim, selection)
        result.runs += runs
        if decision.decision == "won":
            result.won += 1
            # Won with the comparator's agreement: the bound above zero, Δ below min_effect.
            result.by_comparator += "below the minimum effect" in decision.reason
    if cell.delta > 0:
        result.oracle, result.oracle_cap = _oracle(cell, result.mean_runs)
        result.one_look = _one_look(cell, result.mean_runs)
    return result


def _find(
    results: list[CellResult], world: str, n: int, delta: float, claim: str
) -> CellResult | None:
    return next(
        (
            r
            for r in results
            if r.cell.world == world
            and r.cell.n_evals == n
            and abs(r.cell.delta - delta) < 1e-9
            and r.cell.claim == claim
        ),
        None,
    )


def _fmt(x: float | None, bound: float | None = None, higher: bool = False) -> str:
    if x is None or x != x:
        return "–"
    ok = "" if bound is None else (" ok" if (x >= bound if higher else x <= bound) else " NO")
    return f"{x:.1%}{ok}"


def report(results: list[CellResult], worlds_run: list[str], evals: list[int]) -> list[str]:
    """Per world and eval count, for the claim made by default: the targets of issue 27."""
    made = Selection()
    lines, failures = [], []
    head = (
        f"{'world':<12} {'evals':>5} {'claim':<7} | {'equal':>9} {'−0.05':>9} {'runs eq':>8} | "
        f"{'+0.10':>7} {'runs':>5} {'oracle':>7} {'gap':>9} {'t 1 look':>8} {'oracle@cap':>10} | "
        f"{'other claim +0.10':>17}"
    )
    lines += [head, "-" * len(head)]
    for world in worlds_run:
        for n in evals:
            claim = claim_scope(made, n)
            other = "general" if claim == "tasks" else "tasks"
            eq, worse = _find(results, world, n, 0.0, claim), _find(results, world, n, -0.05, claim)
            up, up_other = (
                _find(results, world, n, 0.10, claim),
                _find(results, world, n, 0.10, other),
            )
            gap = up.oracle - up.rate if up else float("nan")
            runs_eq = eq.mean_runs if eq else float("nan")
            row = (
                f"{world:<12} {n:>5} {claim:<7} | {_fmt(eq.rate if eq else None, 0.05):>9} "
                f"{_fmt(worse.rate if worse else None, 0.01):>9} "
                f"{runs_eq:>5.2f}{' ok' if runs_eq <= 4.0 else ' NO':>3} | "
                f"{_fmt(up.rate if up else None):>7} {up.mean_runs if up else float('nan'):>5.2f} "
                f"{_fmt(up.oracle if up else None):>7} "
                f"{(f'{gap:+.1%}' + (' ok' if gap <= 0.10 else ' NO')) if up else '–':>9} "
                f"{_fmt(up.one_look if up else None):>8} "
                f"{_fmt(up.oracle_cap if up else None):>10} | "
                f"{other} {_fmt(up_other.rate if up_other else None):>9}"
            )
            lines.append(row)
            if up and up.oracle_cap < 0.80:
                failures.append(
                    f"{world}, {n} evals, {claim}: the oracle at the cap of "
                    f"{worlds.CAP} runs per eval reaches {up.oracle_cap:.0%}"
                )
    lines.append("")
    lines.append(
        "Cells where +0.10 cannot be found with 80% power by any rule at this budget "
        "(even a test that knew the true variances, at 12 runs per eval, falls short):"
    )
    lines += [f"  {f}" for f in failures] or ["  none"]
    return lines


def power_table(results: list[CellResult], evals: list[int], worlds_run: list[str]) -> dict:
    scope: dict[str, dict[str, float]] = {"tasks": {}, "general": {}}
    for claim in scope:
        for n in evals:
            found = [r.rate for w in worlds_run if (r := _find(results, w, n, 0.10, claim))]
            if found:
                scope[claim][str(n)] = round(median(found), 3)
    return scope


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=400)
    p.add_argument(
        "--quick",
        action="store_true",
        help="a CI-sized smoke: 60 trials, 3 and 10 evals, three worlds",
    )
    p.add_argument("--worlds", nargs="*", default=list(worlds.PANEL), choices=worlds.WORLDS)
    p.add_argument("--evals", type=int, nargs="*", default=list(EVAL_COUNTS))
    p.add_argument("--deltas", type=float, nargs="*", default=list(DELTAS))
    p.add_argument(
        "--claims", nargs="*", default=["tasks", "general"], choices=("tasks", "general")
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument(
        "--write-power",
        type=Path,
        default=None,
        help="write the +0.10 power per claim and eval count (median over the worlds)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.trials, args.evals = 60, [3, 10]
        args.worlds = ["continuous", "pass/fail", "taste"]
    cells = [
        Cell(w, n, d, c, args.trials, args.seed)
        for w in args.worlds
        for n in args.evals
        for d in args.deltas
        for c in args.claims
    ]
    started = time.perf_counter()
    if args.workers > 1:
        with ProcessPoolExecutor(args.workers) as pool:
            results = list(pool.map(run_cell, cells, chunksize=4))
    else:
        results = [run_cell(c) for c in cells]
    elapsed = time.perf_counter() - started
    s = Selection()
    print(
        f"Promotion rule on a panel of worlds (no model calls): rule={s.rule} "
        f"confidence={s.confidence} min_effect={s.min_effect} futility={s.futility} "
        f"(tasks {s.futility_tasks}) "
        f"runs {START_RUNS}→{s.max_runs_per_eval} per eval; {args.trials} trials a cell "
        f"(standard error of a 5% rate ≈ {np.sqrt(0.05 * 0.95 / args.trials):.1%})."
    )
    print(
        "Targets for the claim made: equal child promoted ≤ 5%, −0.05 child ≤ 1%, runs/eval "
        "for an equal child ≤ 4.0, power at +0.10 within 10 points of the oracle."
    )
    print()
    for line in report(results, args.worlds, args.evals):
        print(line)
    print()
    print(
        "Every claim, every cell (promoted / of which with the comparator's agreement / runs per "
        "eval; oracle at the same runs):"
    )
    for r in results:
        c = r.cell
        extra = (
            f"  oracle {r.oracle:.1%}  t 1 look {r.one_look:.1%}  oracle@cap {r.oracle_cap:.1%}"
            if c.delta > 0
            else ""
        )
        print(
            f"  {c.world:<12} {c.n_evals:>3} evals {c.delta:+.2f} {c.claim:<7} "
            f"{r.rate:>6.1%} {r.by_comparator / c.trials:>6.1%} {r.mean_runs:>5.2f}{extra}"
        )
    print(f"{len(results) * args.trials} trials in {elapsed:.0f} s.")
    if args.write_power:
        cmd = "bench/selection.py " + " ".join(argv if argv is not None else sys.argv[1:])
        data = {
            "effect": 0.10,
            "source": f".venv/bin/python {cmd.strip()}",
            "worlds": f"the median over the panel's {len(args.worlds)} worlds "
            f"({', '.join(args.worlds)}), {args.trials} trials a cell",
            "scope": power_table(results, args.evals, args.worlds),
        }
        args.write_power.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.write_power.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        tmp.replace(args.write_power)
        print(f"wrote {args.write_power}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
