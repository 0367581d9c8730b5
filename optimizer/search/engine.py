"""The search engine of docs/design.md §3, one for every target: start (v0), then iterations of choose a
parent → propose → judge (the target evaluates, compares and decides) → record, until a stop
condition; then the sealed test. Each step commits before the next, so a killed run resumes where
it was. Only this module knows the order of the steps, and it never knows what is varied."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress

import structlog

from optimizer.budget import estimate, stops
from optimizer.config import Settings
from optimizer.decide import parents
from optimizer.errors import BudgetExhausted, RunStopped, is_systemic
from optimizer.events import (
    Activity,
    Finished,
    Handler,
    Outlook,
    ProposalMade,
    ReserveKept,
    Stopping,
)
from optimizer.model import scoped
from optimizer.model.budget import Budget, Reserve
from optimizer.model.port import Client
from optimizer.search import adoption
from optimizer.search.proposal import Candidate
from optimizer.search.state import RunState, loop_state, record_decision, register
from optimizer.search.target import Target, proposal_sample
from optimizer.store import adoptions, iterations, runs, versions
from optimizer.store.db import Store
from optimizer.store.files import Workspace

log = structlog.get_logger()

# How a target is opened for a run: a context manager, since a target may hold resources (the
# body target's executor, a loopback simulator for the Claude Code CLI) for the run's length.
OpenTarget = Callable[[RunState], AbstractContextManager[Target]]


async def optimize(
    ws: Workspace,
    store: Store,
    client: Client,
    settings: Settings,
    *,
    open_target: OpenTarget,
    flag: stops.SignalFlag,
    listen: Handler,
) -> str:
    """The whole run from where state.db says it is; returns why it stopped. `listen` hears
    every event of the run (the daemon's live line)."""
    run = RunState(
        ws, store, client, settings, listen, stop_rules(ws, settings, flag, client.budget)
    )
    with open_target(run) as target:
        try:
            reason = await begin(run, target, flag)
            while reason is None and (reason := run.stops.any(loop_state(run))) is None:
                await iterate(run, target, next_iteration(run))
        except RunStopped as exc:  # the budget, or an urgent stop inside a stage
            reason = str(exc)
        await end(run, target, flag, reason)
    return reason


async def begin(run: RunState, target: Target, flag: stops.SignalFlag) -> str | None:
    """The run marked running, its reserves kept and v0 (with its baseline) measured; a reason
    when the start itself stopped. RunStopped from an urgent stop inside it."""
    _set_running(run)
    keep_for_test(run, flag)
    reason = await target.start()
    keep_for_test(run, flag)  # v0's runs are measured now: the reserve at their cost
    return reason


async def end(run: RunState, target: Target, flag: stops.SignalFlag, reason: str) -> None:
    """After the search, whatever stopped it: the sealed test (spending what was kept for it),
    the adoption at the end when asked for, and the run's stop recorded."""
    run.emit(Stopping(reason))
    keep_for_test(run, flag, 0.0)
    await seal_test(run, target)
    await adoption.at_end(run, target)
    _finish(run, target, reason)


def stop_rules(
    ws: Workspace,
    s: Settings,
    flag: stops.SignalFlag,
    budget: Budget,
    also: tuple[stops.StopRule, ...] = (),
) -> stops.StopRules:
    """The run's stop rules; `also`: more urgent ones (a fleet's own stop file)."""
    return stops.StopRules(
        urgent=(
            flag,
            stops.StopFile(ws.stop_file),
            *also,
            stops.OverBudget(budget),
            stops.Deadline(stops.parse_deadline(s.budget.deadline)),
        ),
        at_iteration_end=(
            stops.MaxIterations(s.loop.max_iterations),
            stops.Target(s.loop.target_score),
        ),
        plateaus=stops.plateaus(s.loop, s.budget.usd, stops.parse_deadline(s.budget.deadline)),
    )


def keep_for_test(run: RunState, flag: stops.SignalFlag, kept: float | None = None) -> None:
    """Hold the sealed test's cost back from the search (docs/design.md §9), and the first looks of
    an adoption the run makes at its end (adopt.at_end): the budget stop
    and the client's per-call guard see the budget less the reserves, so a budget stop leaves the
    money the sealed test needs. `kept` None: the estimate's reserves, or more at the measured
    cost of v0's runs; each is named where the budget stops the search."""
    if kept is None:
        est = run.row.estimate
        test = estimate.reserve(
            est,
            per_run_usd=adoptions.per_run_usd(run.store),
            runs=2 * len(run.test) * run.settings.evals.runs_per_eval,
        )
        held = Reserve(
            test if run.test else 0.0,
            adoption.reserve(run, (est or {}).get("adoption_reserve_usd", 0.0)),
            planned_test_usd=(est or {}).get("reserve_usd") if run.test else None,
        )
    else:
        held = Reserve(kept, 0.0)
    run.client.budget.keep(held, holder=run.ws.root.name)  # a fleet's members share one
    run.emit(ReserveKept(round(held.usd, 4)))


def next_iteration(run: RunState) -> int:
    open_ = iterations.open_number(run.store)
    return open_ if open_ is not None else iterations.last_number(run.store) + 1


async def iterate(run: RunState, target: Target, n: int) -> None:
    row = iterations.get(run.store, n) or _start_iteration(run, target, n)
    parent = row.parent
    for k in range(run.settings.loop.proposals_per_iteration):
        if run.interrupted():
            return  # the iteration stays open; a resume continues it with the same parent
        # Proposed after the previous sibling was judged: a resumed iteration asks exactly what
        # an uninterrupted one asked, and proposal k learns from the loss of proposal k-1.
        label = await candidate(run, target, n, k, parent)
        if label and not await _judge_safely(run, target, label, parent):
            return  # stopped before its decision: a resume judges it again from the ledger
        if label and run.settings.loop.judge_proposals == "first" and _won(run, label):
            # A sibling would be judged against a parent the winner has just beaten; the next
            # iteration chooses its parent from a lineage that holds the winner (docs/design.md §3).
            break
    iterations.finish(run.store, n)
    target.write_lineage(n)
    run.emit(Outlook(n, stops.outlook(loop_state(run), run.settings.loop.stop_window)))


def _won(run: RunState, label: str) -> bool:
    return versions.decision(run.store, label) == "won"


def _start_iteration(run: RunState, target: Target, n: int) -> iterations.Iteration:
    run.emit(Activity(f"iteration {n}: choosing a parent"))
    decided = [
        parents.VersionScores(v.label, run.per_eval(v.label), v.label == run.best())
        for v in versions.all_of(run.store)
        if v.phase == target.phase and v.decision
    ]
    parent = parents.select_parent(
        decided, strategy=run.settings.loop.parent, rng=run.rng("parent", n)
    )
    return iterations.start(run.store, n, parent)


async def candidate(run: RunState, target: Target, n: int, k: int, parent: str) -> str | None:
    """Proposal k of iteration n, as a new version label; None when rejected or a duplicate. Any
    failure of this one candidate (a bad answer, an edit that cannot be applied, a bug of ours
    on an odd file) is recorded as its rejection with the reason, and the loop goes on; a resume
    replays the same answer from the ledger and records the same outcome."""
    row = iterations.get(run.store, n)
    assert row is not None  # iterate() records iteration n before it asks for a proposal
    made = dict(row.candidates)
    if str(k) in made:
        return made[str(k)].get("label")
    run.emit(Activity(f"iteration {n}: proposal {k + 1} from {parent}"))
    scratch = run.ws.root / ".proposals" / f"{n}-{k}"
    outcome: dict
    try:
        with scoped(f"proposal {n}-{k}"):
            result = await target.propose(parent, scratch, proposal_sample(n, k))
        if isinstance(result, Candidate):
            outcome = register(run, n, parent, result)
        else:
            outcome = {"rejected": result.problems, "reasons": result.reasons}
    except Exception as exc:
        if is_systemic(exc):
            raise
        log.exception("proposal.failed", iteration=n, k=k)
        outcome = {
            "rejected": [f"internal error: {type(exc).__name__}: {exc}"[:500]],
            "reasons": ["internal error"],
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        with suppress(OSError):  # the scratch root goes too once no proposal is in it
            scratch.parent.rmdir()
    made[str(k)] = outcome
    iterations.record_candidates(run.store, n, made)
    refused = (outcome.get("rejected") or [""])[0]
    run.emit(ProposalMade(n, k, {key: str(v) for key, v in outcome.items()}, refused))
    return outcome.get("label")


async def _judge_safely(run: RunState, target: Target, label: str, parent: str) -> bool:
    """target.judge, with a failure of ours inside it recorded on the version (status failed,
    with the error) instead of stopping the run; the version stays undecided."""
    if versions.decision(run.store, label):
        return True
    try:
        verdict = await target.judge(label, parent)
        if verdict is None or not await target.learn(label, parent, verdict):
            return False
        for version in verdict.measured:
            target.record(version, verdict.phase)
        record_decision(run, label, parent, verdict.phase, dict(verdict.selection))
        return True
    except Exception as exc:
        if is_systemic(exc):
            raise
        log.exception("version.failed", version=label)
        versions.mark_failed(run.store, label, f"{type(exc).__name__}: {exc}"[:500])
        return True


async def seal_test(run: RunState, target: Target) -> None:
    """v0 and the final best on the sealed test split, whatever stopped the loop. A budget that
    runs out here is recorded, not raised. A night stopped before its best was scored on train
    (a stop right after the start, a deadline already near) has nothing to seal: it pays for no
    sealed test."""
    best = run.best()
    if not run.test or versions.score(run.store, best) is None:
        return
    result: dict = {"evals": run.test, "versions": {}}
    try:
        for label in dict.fromkeys(["v0", best]):
            run.emit(Activity(f"sealed test: {label}"))
            result["versions"][label] = await target.measure_test(label)
        scores = [result["versions"][lab]["score"] for lab in ("v0", best)]
        result.update(
            best=best, delta=round(scores[1] - scores[0], 4) if None not in scores else None
        )
    except BudgetExhausted as exc:
        result["incomplete"] = f"the budget ran out during the sealed test: {exc}"
    runs.record_test(run.store, run.ws.root.name, result)


def _finish(run: RunState, target: Target, reason: str) -> None:
    runs.stopped(run.store, run.ws.root.name, reason)
    target.write_lineage(loop_state(run).iterations_done)
    run.emit(Finished(reason, run.best()))


def _set_running(run: RunState) -> None:
    runs.running(run.store, run.ws.root.name)
