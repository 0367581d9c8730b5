"""The adoption rule on bench/selection.py's panel of noise worlds (no model calls): how often a version
that is not better is certified (the bound is adopt.alpha = 5 %, per world), how often a real
+0.10 is certified (power), and what one adoption costs in fresh runs, at 4, 7, 10 and 20 evals.
Never a timed test; prints a table and the target's line.

    .venv/bin/python bench/adoption.py [--trials 400] [--evals 4 7 10 20] [--worlds ...]
        [--usd-per-run 0.036] [--missing count|drop|refuse] [--order interleaved|sides]
        [--ask-again K] [--failure-rate P]

Each trial draws fresh runs of the candidate and of the version the user has (bench/_worlds.py,
with the per-eval advantages centred: the claim is "better on these tasks", so an equal
candidate is equal on these evals) and asks optimizer.decide.adopt.decide, the product's rule
with the default settings, at each look of its schedule (3, 4, 6, 9, 12 fresh runs an eval) until
it decides. The cost is both sides' fresh runs; in dollars at --usd-per-run (csv-report's measured
price of one run, executor and grader, in the simulator: $0.036).
Two worlds beside the panel's (docs/design.md §7), both `continuous` underneath:
- output-failures  the judge fails on the candidate's worst outputs: a run scoring ≤ 0.4 stays
                   unscored (after its retries) with probability 0.5
- batch-shift      runs go out in batches (as many runs as one side sends at a look), and each
                   batch shares a shift N(0, 0.05) of its scores (provider load, a cache)
and, asked for by name, random-failures: 5 % (--failure-rate) of each side's runs unscored at
random, a judge or provider that fails persistently (what counting costs when failures do not
depend on the output).
How a claim treats them: --missing count (the product: a candidate's unscored run scores 0, its
base's 1), drop (before: left out) or refuse (left out, but the claim refused when the
candidate's unscored share exceeds the base's beyond chance, one-sided z at 5 %); --order
interleaved (the product: both sides' runs of a look in one seeded random order) or sides
(before: the candidate's runs, then the base's). --ask-again K measures an equal candidate asked
about up to K times: the product goes on with the same claim from its next look; "before" opened
a new adoption on new samples at full α each time.
The last line is the worst false certification (Δ ≤ 0) of any cell, with its Wilson 95 % interval."""

from __future__ import annotations

import argparse
import math
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
CLAIM_WORLDS = ("output-failures", "batch-shift")
# Asked for by name: what counting costs when failures do not depend on the output.
RANDOM_FAILURES, RANDOM_P = "random-failures", 0.05
FAIL_BELOW, FAIL_P = 0.4, 0.5
SHIFT_SD = 0.05
REFUSE_Z = 1.645  # one-sided 5 %


def _shifted(
    child: np.ndarray,
    parent: np.ndarray,
    looks: tuple[int, ...],
    rng: np.random.Generator,
    interleaved: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Each look's new runs in the order they go out, cut into batches of one side's share of a
    look, each batch's scores moved by one shared N(0, SHIFT_SD). The same draws either order."""
    child, parent = child.copy(), parent.copy()
    n, before = child.shape[0], 0
    for runs in looks:
        jobs = [(side, e, k) for side in (0, 1) for e in range(n) for k in range(before, runs)]
        size = n * (runs - before)
        perm = rng.permutation(len(jobs))
        shifts = rng.normal(0, SHIFT_SD, 2)
        order = perm if interleaved else np.arange(len(jobs))
        for i, j in enumerate(order):
            side, e, k = jobs[j]
            arr = child if side == 0 else parent
            arr[e, k] = min(1.0, max(0.0, arr[e, k] + shifts[i // size]))
        before = runs
    return child, parent


def draws(world: str, n: int, delta: float, seed: tuple[int, ...], order: str):
    """(candidate, base) scores (evals, CAP), NaN where a run stayed unscored."""
    underneath = "continuous" if world in (*CLAIM_WORLDS, RANDOM_FAILURES) else world
    tr = worlds.trial(underneath, n, delta, True, seed)
    child, parent = tr.child.astype(float), tr.parent.astype(float)
    rng = np.random.default_rng([29, *seed])
    if world == "output-failures":
        fails = (child <= FAIL_BELOW) & (rng.random(child.shape) < FAIL_P)
        child = np.where(fails, np.nan, child)
    if world == RANDOM_FAILURES:
        child = np.where(rng.random(child.shape) < RANDOM_P, np.nan, child)
        parent = np.where(rng.random(parent.shape) < RANDOM_P, np.nan, parent)
    if world == "batch-shift":
        child, parent = _shifted(child, parent, rule.looks(Adopt()), rng, order == "interleaved")
    return child, parent


def _refused(c: np.ndarray, p: np.ndarray) -> bool:
    """The candidate's unscored share above the base's beyond chance (pooled two-proportion z)."""
    kc, kp, m = int(np.isnan(c).sum()), int(np.isnan(p).sum()), c.size
    pooled = (kc + kp) / (2 * m)
    if pooled in (0.0, 1.0):
        return False
    z = (kc - kp) / m / math.sqrt(pooled * (1 - pooled) * 2 / m)
    return z > REFUSE_Z


def _side(a: np.ndarray, runs: int, missing: str, worst: float) -> dict[int, list[float]]:
    if missing == "count":
        return {e: list(np.nan_to_num(a[e, :runs], nan=worst)) for e in range(a.shape[0])}
    return {e: [x for x in a[e, :runs] if not math.isnan(x)] for e in range(a.shape[0])}


def claim(
    child: np.ndarray, parent: np.ndarray, missing: str, looks: tuple[int, ...], start: int = 0
) -> tuple[bool, int, int]:
    """(certified, fresh runs an eval at the last look taken, index of that look) of one
    adoption taking looks[start:] until the rule stops."""
    adopt, selection = Adopt(), Selection()
    n = child.shape[0]
    for i in range(start, len(looks)):
        runs = looks[i]
        if missing == "refuse" and _refused(child[:, :runs], parent[:, :runs]):
            return False, runs, i
        c, p = _side(child, runs, missing, 0.0), _side(parent, runs, missing, 1.0)
        if any(not c[e] or not p[e] for e in range(n)):
            c = {e: v for e, v in c.items() if v and p[e]}
            p = {e: p[e] for e in c}
        decided = rule.decide(
            c, p, selection=selection, adopt=adopt, look=runs, rng=random.Random(0)
        )
        if not decided.needs_more_runs:
            break
    return decided.decision == "won", runs, i


def one(world: str, n: int, delta: float, t: int, missing: str, order: str) -> tuple[bool, int]:
    """(certified, fresh runs an eval it took) of one adoption."""
    child, parent = draws(world, n, delta, (17, n, round(delta * 1000) + 1000, t), order)
    won, runs, _ = claim(child, parent, missing, rule.looks(Adopt()))
    return won, runs


def asked_again(world: str, n: int, t: int, k: int, missing: str, order: str) -> tuple[bool, bool]:
    """An equal candidate asked about up to k times: (certified by going on with one claim,
    certified by k new adoptions on new samples at full α each)."""
    looks = rule.looks(Adopt())
    child, parent = draws(world, n, 0.0, (31, n, t), order)
    start, again = 0, False
    for _ in range(k):
        won, _, i = claim(child, parent, missing, looks, start)
        if won:
            again = True
            break
        start = i + 1
        if start >= len(looks):
            break
    anew = False
    for ask in range(k):
        child, parent = draws(world, n, 0.0, (31, n, t, ask), order)
        if claim(child, parent, missing, looks)[0]:
            anew = True
            break
    return again, anew


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if not n:
        return 0.0, 1.0
    p, d = k / n, 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=400)
    p.add_argument("--evals", type=int, nargs="*", default=list(EVAL_COUNTS))
    p.add_argument(
        "--worlds",
        nargs="*",
        default=[*worlds.PANEL, *CLAIM_WORLDS],
        choices=[*worlds.WORLDS, *CLAIM_WORLDS, RANDOM_FAILURES],
    )
    p.add_argument("--usd-per-run", type=float, default=0.036)
    p.add_argument("--missing", choices=("count", "drop", "refuse"), default="count")
    p.add_argument("--order", choices=("interleaved", "sides"), default="interleaved")
    p.add_argument("--ask-again", type=int, default=0, metavar="K")
    p.add_argument(
        "--failure-rate",
        type=float,
        default=RANDOM_P,
        help="the share of each side's runs random-failures leaves unscored (default 0.05)",
    )
    args = p.parse_args(argv)
    globals()["RANDOM_P"] = args.failure_rate  # read by draws() for random-failures
    print(
        f"adoption rule: α {Adopt().alpha}, looks {rule.looks(Adopt())}, claim: better on these "
        f"tasks; unscored runs: {args.missing}; order: {args.order}; {args.trials} trials a cell\n"
    )
    if args.ask_again:
        ask(args)
        return
    print(
        "| world | evals | certified at Δ −0.05 | at Δ 0 | power at +0.10 | fresh runs an eval "
        "(mean, +0.10) | runs per adoption | $ per adoption |"
    )
    print("|---|---|---|---|---|---|---|---|")
    worst = (-1.0, 0, "")
    powers: dict[int, list[float]] = {n: [] for n in args.evals}
    costs: dict[int, list[float]] = {n: [] for n in args.evals}
    for world in args.worlds:
        for n in args.evals:
            rates, runs_at = {}, {}
            for delta in DELTAS:
                got = [
                    one(world, n, delta, t, args.missing, args.order) for t in range(args.trials)
                ]
                hits = sum(c for c, _ in got)
                rates[delta] = hits / args.trials
                runs_at[delta] = float(np.mean([r for _, r in got]))
                if delta <= 0 and rates[delta] > worst[0]:
                    worst = (rates[delta], hits, f"{world}, {n} evals, Δ {delta:+.2f}")
            mean_runs = float(np.mean(list(runs_at.values())))
            per = 2 * n * mean_runs
            powers[n].append(rates[0.10])
            costs[n].append(per * args.usd_per_run)
            print(
                f"| {world} | {n} | {rates[-0.05]:.1%} | {rates[0.0]:.1%} | {rates[0.10]:.0%} | "
                f"{runs_at[0.10]:.1f} | {per:.0f} | ${per * args.usd_per_run:.2f} |",
                flush=True,
            )
    print("\nby evals, over the worlds: power at +0.10 (min–max), $ per adoption (mean)")
    for n in args.evals:
        print(
            f"  {n} evals: power {min(powers[n]):.0%}–{max(powers[n]):.0%}, "
            f"${float(np.mean(costs[n])):.2f}"
        )
    lo, hi = wilson(worst[1], args.trials)
    print(f"\nworst cell: {worst[2]} (bound {Adopt().alpha:.0%})")
    print(
        f"adoption: worst false certification {worst[0]:.1%} [{lo:.1%}, {hi:.1%}] over "
        f"{len(args.worlds)} worlds"
    )


def ask(args: argparse.Namespace) -> None:
    """An equal candidate asked about up to K times, per world and suite size."""
    k = args.ask_again
    print(f"| world | evals | certified within {k} asks: one claim going on | {k} new adoptions |")
    print("|---|---|---|---|")
    worst = (-1.0, 0)
    for world in args.worlds:
        for n in args.evals:
            got = [
                asked_again(world, n, t, k, args.missing, args.order) for t in range(args.trials)
            ]
            again = sum(a for a, _ in got)
            anew = sum(b for _, b in got)
            worst = max(worst, (again / args.trials, again))
            print(
                f"| {world} | {n} | {again / args.trials:.1%} | {anew / args.trials:.1%} |",
                flush=True,
            )
    lo, hi = wilson(worst[1], args.trials)
    print(
        f"\nadoption asked again: worst false certification {worst[0]:.1%} [{lo:.1%}, {hi:.1%}] "
        f"over {len(args.worlds)} worlds"
    )


if __name__ == "__main__":
    main()
