"""Comparator calls saved by judging the second order only after a decisive first order, and what
it does to swap consistency and to the sign test. Never a timed test; prints two tables.

    .venv/bin/python bench/comparator.py [--trials 300] [--iterations 3] [--no-runs]

1. The noise model of bench/selection.py (its World: per-run quality, a comparator with position
   bias that says TIE when two outputs look within --tie of each other), every pair of 10 evals x
   6 runs judged in both orders, then counted both ways: `always` (both orders, the earlier
   protocol) and `decisive` (the second order only when the first is a child or parent verdict).
   The sign test (comparison.comparator_test) reads only decisive swap-consistent verdicts, which
   need a decisive first order, so its wins, losses and p must come out identical; the bench
   checks that on every trial rather than trusting the argument.
2. The simulator provider end to end: `optimizer run examples/csv-report --provider sim` with
   selection.second_order = always and = decisive; comparator calls from the ledger, swap
   consistency from every assignment.json, and whether the two lineages decided alike.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import selection as noise  # noqa: E402  (bench/selection.py: the World of its noise model)

from optimizer.decide.comparison import comparator_test  # noqa: E402

RUNS = 6


def _judge(world: noise.World, qa: float, qb: float, bias: float, tie: float) -> str:
    if world.rng.random() < bias:
        return "A"
    a = qa + world.rng.gauss(0, noise.COMPARATOR_SD)
    b = qb + world.rng.gauss(0, noise.COMPARATOR_SD)
    if abs(a - b) < tie:
        return "TIE"
    return "A" if a > b else "B"


def noise_cell(n_evals: int, delta: float, bias: float, tie: float, trials: int) -> dict:
    out = {
        "pairs": 0,
        "calls_always": 0,
        "calls_decisive": 0,
        "agree_always": 0,
        "agree_decisive": 0,
        "both_decisive": 0,
        "first_ties": 0,
        "same_test": 0,
        "wins": 0,
        "losses": 0,
    }
    for trial in range(trials):
        rng = noise.random.Random(f"cmp:{n_evals}:{delta}:{bias}:{tie}:{trial}")
        world = noise.World(n_evals, delta, rng, noise.HETERO_SD)
        world.ensure_runs(RUNS)
        tallies = {"always": {}, "decisive": {}}
        for e in range(n_evals):
            for r in range(RUNS):
                qc, qp = world.child[e][r][0], world.parent[e][r][0]
                child_first = rng.random() < 0.5  # the first order is drawn per pair, as compare.py
                qa, qb = (qc, qp) if child_first else (qp, qc)
                first = noise._side(_judge(world, qa, qb, bias, tie), child_first)
                second = noise._side(_judge(world, qb, qa, bias, tie), not child_first)
                out["pairs"] += 1
                out["calls_always"] += 2
                decisive_first = first != "tie"
                out["calls_decisive"] += 1 + decisive_first
                out["first_ties"] += not decisive_first
                out["agree_always"] += first == second
                out["both_decisive"] += decisive_first
                out["agree_decisive"] += decisive_first and first == second
                for mode, seen in (("always", True), ("decisive", decisive_first)):
                    counts = tallies[mode].setdefault(e, {"child_wins": 0, "parent_wins": 0})
                    if seen and first == second and first != "tie":
                        counts[f"{first}_wins"] += 1
        tests = []
        for mode in ("always", "decisive"):
            per_eval = tallies[mode]
            w = sum(c["child_wins"] for c in per_eval.values())
            lo = sum(c["parent_wins"] for c in per_eval.values())
            tests.append(comparator_test(w, lo, per_eval, 3))
        out["same_test"] += tests[0] == tests[1]
        out["wins"] += tests[1].wins
        out["losses"] += tests[1].losses
    return out


def noise_table(trials: int) -> None:
    print(
        f"1. Noise model of bench/selection.py: 10 evals x {RUNS} runs, {trials} trials a row, "
        "every pair judged in a random first order"
    )
    head = (
        f"{'Δ_true':>6} {'bias':>5} {'tie':>5} | {'calls always':>12} {'decisive':>8} "
        f"{'saved':>6} | {'1st-order ties':>14} | {'swap cons. always':>17} {'decisive':>8} | "
        f"{'sign test same':>14} | {'wins/losses per trial':>21}"
    )
    print(head)
    print("-" * len(head))
    for tie in (noise.COMPARATOR_TIE, 0.10):
        for bias in (0.0, 0.3):
            for delta in (0.0, 0.10):
                c = noise_cell(10, delta, bias, tie, trials)
                saved = 1 - c["calls_decisive"] / c["calls_always"]
                print(
                    f"{delta:>+6.2f} {bias:>5.1f} {tie:>5.2f} | {c['calls_always'] / trials:>12.1f} "
                    f"{c['calls_decisive'] / trials:>8.1f} {saved:>6.1%} | "
                    f"{c['first_ties'] / c['pairs']:>14.1%} | "
                    f"{c['agree_always'] / c['pairs']:>17.1%} "
                    f"{c['agree_decisive'] / max(1, c['both_decisive']):>8.1%} | "
                    f"{c['same_test'] / trials:>14.1%} | "
                    f"{c['wins'] / trials:>10.1f} / {c['losses'] / trials:<9.1f}"
                )
    print(
        "swap cons. = pairs whose two orders agree / pairs judged in both orders (always: every "
        "pair; decisive: the pairs whose first order was decisive)."
    )
    print(
        "sign test same = trials where comparison.comparator_test gave the same wins, losses, z "
        "and p under both protocols (100% expected: a first-order tie is never a decisive "
        "swap-consistent verdict)."
    )
    print()


def _sim_run(root: Path, second_order: str, iterations: int) -> dict:
    from overhead import instrumented_run

    run_dir = root / second_order
    instrumented_run(
        run_dir, overrides=[f"selection.second_order={second_order}"], iterations=iterations
    )
    db = sqlite3.connect(run_dir / "state.db")
    calls = db.execute(
        "select count(*) from calls where role = 'comparator' and outcome = 'ok'"
    ).fetchone()[0]
    decisions = db.execute("select version, decision from decisions order by version").fetchall()
    db.close()
    tally = {"pairs": 0, "agree": 0, "judged": 0, "single": 0, "wins": 0, "losses": 0}
    for path in sorted(run_dir.glob("v*/comparison/assignment.json")):
        t = json.loads(path.read_text())["tally"]
        judged = t["pairs"] - t["errors"] - t.get("single_order", 0)
        tally["pairs"] += t["pairs"]
        tally["judged"] += judged
        tally["agree"] += t["child_wins"] + t["parent_wins"] + t["ties"]
        tally["single"] += t.get("single_order", 0)
        tally["wins"] += t["child_wins"]
        tally["losses"] += t["parent_wins"]
    return {"calls": calls, "decisions": decisions, **tally}


def sim_table(iterations: int) -> None:
    print(f"2. Simulator provider end to end: examples/csv-report, {iterations} iterations")
    with tempfile.TemporaryDirectory() as tmp:
        got = {mode: _sim_run(Path(tmp), mode, iterations) for mode in ("always", "decisive")}
    head = (
        f"{'second_order':>12} | {'comparator calls':>16} | {'pairs':>5} | "
        f"{'1st-order ties':>14} | {'swap consistency':>16} | {'wins/losses':>11}"
    )
    print(head)
    print("-" * len(head))
    for mode, g in got.items():
        consistency = g["agree"] / g["judged"] if g["judged"] else float("nan")
        print(
            f"{mode:>12} | {g['calls']:>16} | {g['pairs']:>5} | {g['single']:>14} | "
            f"{consistency:>16.1%} | {g['wins']:>5} / {g['losses']:<5}"
        )
    a, d = got["always"], got["decisive"]
    print(
        f"comparator calls saved: {1 - d['calls'] / a['calls']:.1%}; the same decisions in both "
        f"runs: {'yes' if a['decisions'] == d['decisions'] else 'NO'} "
        f"({', '.join(f'{v} {x}' for v, x in d['decisions'])})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--no-runs", action="store_true", help="skip the end-to-end simulator runs")
    args = parser.parse_args()
    noise_table(args.trials)
    if not args.no_runs:
        sim_table(args.iterations)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
