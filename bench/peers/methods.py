"""The searches of bench/peers.py, each a function (skill dir, run dir, settings, budget) → Outcome:
our engine as `optimizer run` runs it (and its nights followed by `optimizer adopt`), the greedy
baseline, the original skill, and the two peers (bench/peers/gepa_peer.py, skillopt_peer.py).
Every one spends from its own arena and is measured on the sealed test the same way (the world's
expected score of its final skill); none of them sees the sealed test while it searches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from optimizer.errors import BadInput
from optimizer.search import adoption as adopting
from peers.arena import Arena, BudgetSpent, best_over_spend, mean_over_evals, start_run
from peers.ceiling import ceiling

# Our loop's nights: the product's defaults ("ours"), and the same loop with settings it already
# has. Never the verdict's "ours", which is the product as shipped.
NIGHTS = {
    "ours": [],
    # A cheap step under the guarded rule's own knobs: one run per eval to start and at most
    # three, a one-sided 75% bound on each decision alone (no LORD family over the night) and no
    # blind comparator: a step is a move, not a claim; the adoption makes the claim.
    "ours-cheap": [
        "selection.step=guarded",
        "evals.runs_per_eval=1",
        "selection.max_runs_per_eval=3",
        "selection.confidence=0.75",
        "selection.night=none",
        "selection.compare_pairs=none",
    ],
    # The guarded step (the selection section as set: 3 to 12 runs per eval, 95% bounds under
    # LORD, the comparator), the product's default before selection.step = cheap.
    "ours-guarded": ["selection.step=guarded"],
    # The plateau stop after one iteration without a win instead of three: what the spend after
    # a night's last win costs the gain per dollar.
    "ours-patience-1": ["loop.patience=1"],
    # The night with no stop rule: the budget or the deadline ends it.
    "ours-spend-all": ["loop.spend_all=true"],
    # Parents from the per-eval Pareto front of the decided versions instead of the best.
    "ours-pareto": ["loop.parent=pareto"],
    # Every proposal of an iteration judged, not only until the first win.
    "ours-judge-all": ["loop.judge_proposals=all"],
    # A parent read at its child's runs only (selection.parent_runs = 0), the default before
    # parents were measured again as their children are judged.
    "ours-parent-0": ["selection.parent_runs=0"],
    "ours-parent-6": ["selection.parent_runs=6"],
    # The cheap step's bound and knobs, with every child measured at two runs an eval instead of
    # one: a run whose structural gate fails scores near 0, so one run an eval reads a better
    # child as worse whenever its one run on an eval draws a gate failure.
    "ours-runs-2": [
        "selection.step=guarded",
        "selection.first_runs=2",
        "selection.max_runs_per_eval=2",
        "selection.confidence=0.6",
        "selection.min_effect=0",
        "selection.night=none",
        "selection.compare_pairs=none",
        "selection.v0_runs=1",
    ],
}
# A night, then `optimizer adopt`: its best certified against v0 on fresh runs (the adopt.*
# settings, whatever the night's evals.runs_per_eval), paid from the method's dollars; the final
# skill is the adopted version, v0 when nothing was certified.
ADOPTED = {"ours+adopt": "ours", "ours-cheap+adopt": "ours-cheap"}
# A night that confirms its best before it ends (measured here before the engine does it): fresh
# runs of the best and v0 on train, evals.runs_per_eval each, paid from the method's dollars; the
# night ends on its best when its fresh train mean is above v0's, else on v0.
CONFIRMED = {"ours+confirm": "ours"}
# The methods that go on in a night's folder after the night: each with its night.
AFTER_NIGHT = {**ADOPTED, **CONFIRMED}
CONFIRM_FIRST = 3001  # run numbers past the adoption's fresh samples (1000 on)


@dataclass
class Outcome:
    method: str
    final: str  # the label of the skill the method ends with, in its arena
    sealed: float | None  # the world's expected score of `final` on the sealed evals
    usd: float
    calls: int
    runs: int
    wall_s: float
    ceiling: float
    ceiling_source: str
    note: str = ""
    usd_at_last_win: float | None = None  # our engine's nights only (Arena.usd_at_last_win)
    # The method's current choice over its spend, as (dollars, sealed score of the choice) after
    # each choice (v0 before the first); None where the search's choice is not observable.
    trace: list[tuple[float, float]] | None = None
    # Whether `final` is worse than v0 in the world (Arena.worse_than_v0); None: no sealed evals.
    worse: bool | None = None
    certified: bool | None = None  # the adoption methods: whether the night's best was certified
    adopt_usd: float = 0.0  # the adoption methods: what the adoption cost (within usd)


Search = Callable[[Arena, float], Awaitable[tuple[str, str]]]  # → (final label, note)


def run_method(
    name: str,
    skill_dir: Path,
    run_dir: Path,
    overrides: list[str],
    budget_usd: float,
    *,
    night: Outcome | None = None,
) -> Outcome:
    """One method on one (skill, seed); the peers' arenas are set up (folder created, v0 graded
    on train by the engine's start) before their clock and their spending begin. An adoption
    method runs in its night's folder: `night` is that night's outcome when it already ran there
    (measuring it wrote nothing), else the night runs first."""
    started = time.perf_counter()
    if name in NIGHTS:
        settings = [*overrides, *NIGHTS[name]]
        flags = {"budget.usd": budget_usd + sealed_reserve(skill_dir, settings)}
        start_run(skill_dir, run_dir, settings, flags)
        return asyncio.run(_measured(name, run_dir, budget_usd, None, started))
    if name in AFTER_NIGHT:
        if night is None:
            settings = [*overrides, *NIGHTS[AFTER_NIGHT[name]]]
            flags = {"budget.usd": budget_usd + sealed_reserve(skill_dir, settings)}
            start_run(skill_dir, run_dir, settings, flags)
            night_s = time.perf_counter() - started
        else:
            night_s = night.wall_s
        return asyncio.run(_adopted(name, run_dir, budget_usd, night_s))
    start_run(skill_dir, run_dir, overrides, {"loop.max_iterations": 0})
    return asyncio.run(_measured(name, run_dir, budget_usd, SEARCHES[name], None))


def sealed_reserve(skill_dir: Path, overrides: list[str]) -> float:
    """What our engine keeps from its search for its own sealed test (the preview's reserve). The
    bench measures every method's sealed score for free (the world's expected score), so ours
    gets it on top of the budget and its search spends the budget, as a peer's does; a reserve
    the engine raises at v0's measured cost per run still comes out of ours' search."""
    from optimizer import config
    from optimizer.budget import estimate
    from optimizer.inputs.evals import load_evals

    evalset = load_evals(skill_dir)
    settings = config.load(
        None, eval_config=evalset.eval_config, env={}, overrides=overrides
    ).settings
    est = estimate.for_start(settings, evalset, skill_dir)
    return float(est.get("reserve_usd", 0.0)) if est else 0.0


async def _measured(
    name: str, run_dir: Path, budget_usd: float, search: Search | None, started: float | None
) -> Outcome:
    arena = Arena(run_dir)
    try:
        if search is None:  # ours: the whole `optimizer run` was the search
            arena.begin(budget_usd, from_start=True)
            final, note = arena.run.best(), ""
            chosen = best_over_spend(arena.store)
        else:
            arena.begin(budget_usd)
            started = time.perf_counter()
            final, note = await search(arena, budget_usd)
            chosen = arena.trace if search is greedy else None
        assert started is not None
        wall = time.perf_counter() - started
        used = arena.usage()
        sealed = arena.measure(final)
        top, source = ceiling(arena)
        return Outcome(
            name,
            final,
            sealed,
            used.usd,
            used.calls,
            used.runs,
            wall,
            top,
            source,
            note,
            arena.usd_at_last_win() if search is None else None,
            _scored(arena, chosen),
            arena.worse_than_v0(final),
        )
    finally:
        await arena.aclose()


async def _adopted(name: str, run_dir: Path, budget_usd: float, night_s: float) -> Outcome:
    arena = Arena(run_dir)
    try:
        arena.begin(budget_usd, from_start=True)
        before = arena.usage().usd
        started = time.perf_counter()
        confirm = confirm_best if name in CONFIRMED else adopt_best
        final, note, certified = await confirm(arena)
        wall = night_s + time.perf_counter() - started
        used = arena.usage()
        top, source = ceiling(arena)
        return Outcome(
            name,
            final,
            arena.measure(final),
            used.usd,
            used.calls,
            used.runs,
            wall,
            top,
            source,
            note,
            # The user has v0 until the adoption certifies: one step, at the whole spend.
            trace=_scored(arena, [(used.usd, final)]),
            worse=arena.worse_than_v0(final),
            certified=certified,
            adopt_usd=used.usd - before,
        )
    finally:
        await arena.aclose()


async def adopt_best(arena: Arena) -> tuple[str, str, bool | None]:
    """`optimizer adopt` on the night's best: (the adopted version, a note, whether certified);
    v0 when the best is v0 (nothing to adopt, None) or the adoption did not certify it."""
    try:
        claim = adopting.claim_for(arena.run, None)
    except BadInput:
        return "v0", "nothing to adopt (the best is v0)", None
    found = await adopting.certify(arena.run, arena.target, claim)
    if found.certified:
        return found.version, f"{found.version} certified (${found.cost_usd:.2f})", True
    return "v0", f"{found.version} not certified ({found.status}, ${found.cost_usd:.2f})", False


async def confirm_best(arena: Arena) -> tuple[str, str, bool | None]:
    """The night's best against v0 on fresh train runs: (the version the night ends on, a note,
    whether the best held); v0 and None when the best is v0."""
    best = arena.run.best()
    if best == "v0":
        return "v0", "nothing to confirm (the best is v0)", None
    runs = arena.settings.evals.runs_per_eval
    order = [
        (label, e, CONFIRM_FIRST + k)
        for label in (best, "v0")
        for e in arena.train
        for k in range(runs)
    ]
    got = await arena.target.fresh(order, scope="confirm")
    means = {label: mean_over_evals(results) or 0.0 for label, results in got.items()}
    delta = means[best] - means["v0"]
    held = delta > 0
    return (best if held else "v0"), f"{best} {delta:+.3f} on fresh runs", held


def _scored(
    arena: Arena, chosen: list[tuple[float, str]] | None
) -> list[tuple[float, float]] | None:
    if chosen is None:
        return None
    return [(usd, arena.measure(label) or 0.0) for usd, label in chosen]


async def original(arena: Arena, budget_usd: float) -> tuple[str, str]:
    return "v0", "no search"


async def _climb(arena: Arena, judge: Callable[[str], Awaitable[float]]) -> tuple[str, str]:
    """Propose from the current skill and move to a child whose `judge` score rises above the
    current one's, until the budget is spent."""
    current = arena.add(arena.skill_md("v0"))
    accepted = 0
    try:
        score = await judge(current)
        while not arena.spent():
            child = await arena.propose(current, arena.train)
            if child is None or child == current:
                continue
            child_score = await judge(child)
            if child_score > score:
                current, score, accepted = child, child_score, accepted + 1
            arena.chose(current)
    except BudgetSpent:
        pass
    return current, f"{accepted} accepted"


async def greedy(arena: Arena, budget_usd: float) -> tuple[str, str]:
    """Our proposer, and accept a child when its train mean (evals.runs_per_eval runs per eval)
    rises above the current one's: no interval, no comparator, no screening."""
    runs = arena.settings.evals.runs_per_eval
    return await _climb(arena, lambda label: arena.evaluate_mean(label, arena.train, runs))


async def oracle(arena: Arena, budget_usd: float) -> tuple[str, str]:
    """The most any selection could make of our proposer at ours' price: greedy's loop, each
    child paid for at one run an eval (ours' cheap step; the runs are the proposer's feedback),
    and accepted exactly when the world's expected score on train rises. A bound, not a method:
    it reads what no search can see."""

    async def judge(label: str) -> float:
        await arena.evaluate_mean(label, arena.train, 1)
        return arena.expected(label, arena.train)

    return await _climb(arena, judge)


ORACLE_RUNS = 30  # fresh runs a train eval of the product oracle's free measurement


async def oracle_product(arena: Arena, budget_usd: float) -> tuple[str, str]:
    """The oracle by the product's score: greedy's loop at ours' price (one paid run an eval a
    child, the proposer's feedback), accepting a child when its product score on train, read
    free on ORACLE_RUNS fresh runs an eval (Arena.product), rises. A bound on what selection can
    make of our proposer by the ruler `--sealed product` reads; near, not exact, at 30 runs."""

    async def judge(label: str) -> float:
        await arena.evaluate_mean(label, arena.train, 1)
        return await arena.product(label, ORACLE_RUNS, arena.train) or 0.0

    return await _climb(arena, judge)


def _peer(module: str, fn: str) -> Search:
    async def search(arena: Arena, budget_usd: float) -> tuple[str, str]:
        import importlib

        return await getattr(importlib.import_module(f"peers.{module}"), fn)(arena, budget_usd)

    return search


SEARCHES: dict[str, Search] = {
    "original": original,
    "greedy": greedy,
    "oracle": oracle,
    "oracle-product": oracle_product,
    "gepa": _peer("gepa_peer", "gepa_merge_off"),
    "gepa+merge": _peer("gepa_peer", "gepa_merge_on"),
    "skillopt": _peer("skillopt_peer", "skillopt"),
}
METHODS = [
    "ours",
    "ours+adopt",
    "ours-cheap",
    "ours-cheap+adopt",
    "ours-guarded",
    "ours-patience-1",
    "ours-spend-all",
    "ours-pareto",
    "ours-judge-all",
    "ours-parent-0",
    "ours-parent-6",
    "ours-runs-2",
    "ours+confirm",
    *SEARCHES,
]
PEERS = ("gepa", "gepa+merge", "skillopt")
