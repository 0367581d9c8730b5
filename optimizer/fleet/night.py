"""A fleet night's loop (docs/design.md §18): every member opened under the fleet's lock, one
Budget over all their clients (each member's sealed test kept from the start), each member's
baseline and first look in name order, then each next iteration to the member fleet/allocate.py
chooses from the ledgers, until every member's own stop rule has fired or an urgent stop (the
budget, the deadline, a signal, a stop file) ends them all; then each member's sealed test and its
finish, in name order. Members work one at a time, so the fleet keeps one concurrency limit, and
what a member is asked never depends on another's timing."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from rich.console import Console

from optimizer.budget import stops
from optimizer.errors import ProviderUnavailable, RunStopped, WorkFailed
from optimizer.fleet import allocate
from optimizer.model.budget import Budget
from optimizer.report.live import Reporter
from optimizer.search import engine
from optimizer.search.runfolder import OpenRun
from optimizer.search.state import RunState, loop_state
from optimizer.search.target import Target
from optimizer.store import fleetdb, iterations, money, runs
from optimizer.store.files import Workspace

T = TypeVar("T")


@dataclass
class Live:
    """A member at work: its run and target, and why its search ended (None: it goes on)."""

    name: str
    run: RunState
    target: Target
    reason: str | None = None
    failed: str | None = None  # a failure of this member alone ("failed: …")


def seen(m: Live, share_usd: float | None) -> allocate.Seen:
    s = loop_state(m.run)
    kept = m.run.client.budget.kept_for(m.name).usd
    return allocate.Seen(
        name=m.name,
        iterations_done=s.iterations_done,
        open_iteration=iterations.open_number(m.run.store),
        proposals=s.proposals,
        search_usd=s.search_usd,
        judged=s.judged,
        headroom=max(0.0, 1.0 - s.best_score),
        spent_usd=s.spent_usd + kept,
        share_usd=share_usd,
    )


def share_one_budget(opened: Sequence[OpenRun], ceiling_usd: float | None) -> Budget:
    """One Budget for every member's client, counting what each member's ledger spent."""
    counted = math.fsum(sorted(money.account(o.store).budgeted_usd for o in opened))
    shared = Budget(ceiling_usd, counted)
    for o in opened:
        o.client.budget = shared
    return shared


async def run_fleet(
    root: Path,
    opened: Sequence[OpenRun],
    ceiling_usd: float | None,
    flag: stops.SignalFlag,
    console: Console | None,
) -> dict[str, str]:
    """The night from where the members' ledgers say it is; each member's reason for stopping."""
    budget = share_one_budget(opened, ceiling_usd)
    fleet_stop = stops.StopFile(Workspace(root).stop_file)
    night, _ = fleetdb.night(root)
    finished = fleetdb.done(root, night)
    with ExitStack() as stack:
        lives: list[Live] = []
        for o in sorted(opened, key=lambda o: o.ws.root.name):
            ui = stack.enter_context(
                Reporter(None, o.store, simulated=o.client.simulated, settings=o.settings)
            )
            rules = engine.stop_rules(o.ws, o.settings, flag, budget, also=(fleet_stop,))
            run = RunState(o.ws, o.store, o.client, o.settings, ui.on, rules)
            target = stack.enter_context(o.open_target(run))
            lives.append(Live(o.ws.root.name, run, target, finished.get(o.ws.root.name)))
        halted = None
        try:
            for m in lives:  # every sealed test kept before any member pays for its v0
                engine.keep_for_test(m.run, flag)
            for m in lives:
                _say(console, f"{m.name}: v0 and its baseline")
                started = await _guarded(m, engine.begin(m.run, m.target, flag))
                if started and m.reason is None:
                    m.reason = started
                    fleetdb.mark_done(root, night, m.name, started)
            value = fleet_value(lives, ceiling_usd)
            for m in lives:
                m.run.go_on_under(m.run.settings, _rules_at(m, value, flag, budget, fleet_stop))
                m.run.plateau_from = fleetdb.counts_from(root, night, m.name, _plateau_from(m))
            share = ceiling_usd / len(lives) if ceiling_usd and lives else None
            halted = await _search(root, night, lives, console, share)
        except RunStopped as exc:  # the budget, or an urgent stop inside a stage
            halted = str(exc)
        for m in lives:
            if m.failed:
                runs.failed(m.run.store, m.name, m.failed)
                continue
            _say(console, f"{m.name}: sealed test and finish ({m.reason or halted})")
            await _guarded(m, engine.end(m.run, m.target, flag, m.reason or halted or "stopped"))
            if m.failed:
                runs.failed(m.run.store, m.name, m.failed)
    if halted is None:  # every member's own rule ended it; a stop's resume goes on with it
        fleetdb.finish_night(root, night)
    return {m.name: m.failed or m.reason or halted or "stopped" for m in lives}


async def _guarded(m: Live, step: Awaitable[T]) -> T | None:
    """A member's step; a failure of that member alone (its probes all failing, its state.db
    broken) ends its search and is recorded on it, never on its siblings. An outage of the
    provider stops the fleet: every member would meet it, and a resume retries."""
    try:
        return await step
    except ProviderUnavailable:
        raise
    except WorkFailed as exc:
        m.failed = m.reason = f"failed: {exc}"
        return None


def _plateau_from(m: Live) -> int:
    """Where the member's stop rules start counting at a night's start: a night searches again
    where a plateau rule would stop the member at once, as a resumed run does (fleet.db keeps it,
    so a resume of a night a kill interrupted counts from where that night did)."""
    state = loop_state(m.run)
    return state.iterations_done if stops.first(m.run.stops.plateaus, state) else 0


def fleet_value(lives: Sequence[Live], ceiling_usd: float | None) -> float | None:
    """The score a dollar must buy for a member's search to go on, the fleet's own (stops.py's
    default for one night, over the fleet): the headroom every member's v0 left, summed, over the
    fleet's budget. A member stops where its next proposal buys less than the fleet's money would
    buy on average, as it would in a night of its own at its share; None without a budget."""
    if not ceiling_usd:
        return None
    headroom = [1.0 - s for m in lives if (s := loop_state(m.run).v0_score) is not None]
    return math.fsum(sorted(max(0.0, h) for h in headroom)) / ceiling_usd


def _rules_at(
    m: Live, value: float | None, flag: stops.SignalFlag, budget: Budget, fleet_stop: stops.StopFile
) -> stops.StopRules:
    """The member's stop rules with the fleet's value of a point (unless the user named one)."""
    s = m.run.settings
    if value is not None and s.loop.min_gain_per_usd is None:
        s = s.model_copy(update={"loop": s.loop.model_copy(update={"min_gain_per_usd": value})})
    return engine.stop_rules(m.run.ws, s, flag, budget, also=(fleet_stop,))


async def _search(
    root: Path, night: int, lives: list[Live], console: Console | None, share: float | None
) -> str | None:
    """Iterations, each to the member allocate.choose names, until none is left; the urgent
    reason that ended them all, or None when each member's own rule did."""
    while True:
        for m in lives:
            if m.reason is not None:
                continue
            state = loop_state(m.run)
            urgent = m.run.stops.now(state)
            if urgent:
                return urgent
            own = m.run.stops.any(state)
            if own:
                m.reason = own
                fleetdb.mark_done(root, night, m.name, own)
                _say(console, f"{m.name}: its search ended: {own}")
        active = [m for m in lives if m.reason is None]
        choice = allocate.choose([seen(m, share) for m in active])
        if choice is None:
            return None
        m = next(m for m in active if m.name == choice.name)
        n = engine.next_iteration(m.run)
        fleetdb.record(root, m.name, n, choice.why, choice.expected)
        _say(console, f"{m.name}: iteration {n}, {choice.why}")
        await _guarded(m, engine.iterate(m.run, m.target, n))
        if m.failed:
            fleetdb.mark_done(root, night, m.name, m.failed)


def _say(console: Console | None, text: str) -> None:
    if console is not None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)
