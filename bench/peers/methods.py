"""The searches of bench/peers.py, each a function (skill dir, run dir, settings, budget) → Outcome:
our engine as `optimizer run` runs it, the greedy baseline, the original skill, and the two peers
(bench/peers/gepa_peer.py, skillopt_peer.py). Every one spends from its own arena and is measured
on the sealed test the same way; none of them sees the sealed test while it searches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from peers.arena import Arena, BudgetSpent, start_run
from peers.ceiling import ceiling

# Runs per sealed test eval when a final skill is measured (the engine's own sealed test uses
# evals.runs_per_eval; more runs make the gain less noisy, and cost no method anything).
MEASURE_RUNS = 10
# Our loop with settings it already has, measured beside the defaults: one run per eval to start
# and at most three (the defaults: three, up to twelve), the cost of a decision cut where the peers
# win on price. Never the verdict's "ours", which is the product as shipped.
VARIANTS = {
    "ours-lean": ["evals.runs_per_eval=1", "selection.max_runs_per_eval=3"],
    # The plateau stop after one iteration without a win instead of three: what the spend after
    # a night's last win costs the gain per dollar.
    "ours-patience-1": ["loop.patience=1"],
}


@dataclass
class Outcome:
    method: str
    final: str  # the label of the skill the method ends with, in its arena
    sealed: float | None
    usd: float
    calls: int
    runs: int
    wall_s: float
    ceiling: float
    ceiling_source: str
    note: str = ""
    usd_at_last_win: float | None = None  # our engine's runs only (Arena.usd_at_last_win)


Search = Callable[[Arena, float], Awaitable[tuple[str, str]]]  # → (final label, note)


def run_method(
    name: str, skill_dir: Path, run_dir: Path, overrides: list[str], budget_usd: float
) -> Outcome:
    """One method on one (skill, seed); the peers' arenas are set up (folder created, v0 graded
    on train by the engine's start) before their clock and their spending begin."""
    started = time.perf_counter()
    if name == "ours" or name in VARIANTS:
        start_run(
            skill_dir, run_dir, [*overrides, *VARIANTS.get(name, [])], {"budget.usd": budget_usd}
        )
        return asyncio.run(_measured(name, run_dir, budget_usd, None, started))
    start_run(skill_dir, run_dir, overrides, {"loop.max_iterations": 0})
    return asyncio.run(_measured(name, run_dir, budget_usd, SEARCHES[name], None))


async def _measured(
    name: str, run_dir: Path, budget_usd: float, search: Search | None, started: float | None
) -> Outcome:
    arena = Arena(run_dir)
    try:
        if search is None:  # ours: the whole `optimizer run` was the search
            arena.begin(budget_usd, from_start=True)
            final, note = arena.run.best(), ""
        else:
            arena.begin(budget_usd)
            started = time.perf_counter()
            final, note = await search(arena, budget_usd)
        assert started is not None
        wall = time.perf_counter() - started
        used = arena.usage()
        sealed = await arena.measure(final, MEASURE_RUNS)
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
        )
    finally:
        await arena.aclose()


async def original(arena: Arena, budget_usd: float) -> tuple[str, str]:
    return "v0", "no search"


async def greedy(arena: Arena, budget_usd: float) -> tuple[str, str]:
    """Our proposer, and accept a child when its train mean (evals.runs_per_eval runs per eval)
    rises above the current one's: no interval, no comparator, no screening."""
    runs = arena.settings.evals.runs_per_eval
    current = arena.add(arena.skill_md("v0"))
    accepted = 0
    try:
        score = await arena.evaluate_mean(current, arena.train, runs)
        while not arena.spent():
            child = await arena.propose(current, arena.train)
            if child is None or child == current:
                continue
            child_score = await arena.evaluate_mean(child, arena.train, runs)
            if child_score > score:
                current, score, accepted = child, child_score, accepted + 1
    except BudgetSpent:
        pass
    return current, f"{accepted} accepted"


def _peer(module: str, fn: str) -> Search:
    async def search(arena: Arena, budget_usd: float) -> tuple[str, str]:
        import importlib

        return await getattr(importlib.import_module(f"peers.{module}"), fn)(arena, budget_usd)

    return search


SEARCHES: dict[str, Search] = {
    "original": original,
    "greedy": greedy,
    "gepa": _peer("gepa_peer", "gepa_merge_off"),
    "gepa+merge": _peer("gepa_peer", "gepa_merge_on"),
    "skillopt": _peer("skillopt_peer", "skillopt"),
}
METHODS = ["ours", *VARIANTS, *SEARCHES]
PEERS = ("gepa", "gepa+merge", "skillopt")
