"""Cost preview: model calls, tokens and money per iteration and for a whole run, from the eval set,
the settings and the price table, with and without batch mode; and, after a run, the estimate
against what the ledger says was spent. Never calls a model and never writes (but `record`).

The model of one run (every number an assumption, listed under "assumptions" in the estimate):
- setup: the without_skill baseline (when evals.baseline_comparison, each train eval ×
  runs_per_eval runs) and v0 (selection.v0_runs runs, of its step preset); the sealed test: v0
  and the final best on the test evals × runs_per_eval runs.
- per iteration, for each of loop.proposals_per_iteration candidates (an iteration that ends at
  its first winner, loop.judge_proposals, asks fewer: the estimate leans high): one proposer
  call; the screening minibatch (loop.screen_evals runs, when 0 < screen_evals < train evals); the child's
  train evals × runs_per_eval runs; two comparator calls (both orders) per run pair compared
  (step.compared_runs: the first pair of each eval under the sequential rule; the second order
  is skipped after a first-order tie, selection.second_order: the estimate leans high); one
  analyzer call. "Typical" assumes every candidate passes screening and no runs are added;
  "at most" adds runs for child and parent up to selection.max_runs_per_eval, with their
  comparisons.
- a run is an agent loop of a typical number of turns (fewer on the simulator, which answers in
  two or three), each turn re-sending the conversation so far; its grader call carries the
  transcript and outputs; runs whose structural gate fails would skip the grader (not modelled:
  the estimate leans high).
- tokens are characters / 4 (the simulator counts the same way); with llm.prompt_caching the
  system prompt and tool definitions of each call are priced as cache reads.
- batch mode prices the grader, comparator and analyzer calls at 50% (model/batch.py); the
  executor and proposer calls are never batched.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import structlog

from optimizer.budget.cost_model import CHARS_PER_TOKEN, CostPart, Estimate, PriceModel, Tally
from optimizer.config import Settings
from optimizer.decide import adopt, step
from optimizer.inputs.evals import Eval, EvalSet, split
from optimizer.model.cost import BATCH_PRICE_FACTOR, unpriced
from optimizer.schemas import JsonObject
from optimizer.store import iterations, money, readonly, runs
from optimizer.store.files import Workspace
from optimizer.store.runs import Run, record_estimate

log = structlog.get_logger()

VERSION = 1
# The sealed test's share kept from the search: its estimate and a quarter more, since the final
# best may be a longer skill than the one the estimate read (docs/design.md §9).
RESERVE_MARGIN = 1.25


@dataclass(frozen=True)
class _Looks:
    """How a step looks at a child under selection.step: runs an eval (the sealed test's, a
    child's first look, v0's, at most), the run pairs compared at the first look, and whether a
    later look compares more."""

    runs: int
    step_runs: int
    v0_runs: int
    max_runs: int
    pairs: int
    more_pairs: bool
    parent_runs: int  # selection.parent_runs under the step's preset


def _looks(s: Settings) -> _Looks:
    sel = step.for_steps(s.selection)  # what a step is decided under (selection.step)
    runs = s.evals.runs_per_eval
    step_runs = sel.first_runs or runs
    max_runs = max(step_runs, sel.max_runs_per_eval)
    pairs = step.compared_runs(sel, step_runs)
    more = step.compared_runs(sel, max_runs) > pairs
    return _Looks(runs, step_runs, sel.v0_runs or runs, max_runs, pairs, more, sel.parent_runs)


def estimate(
    settings: Settings,
    evalset: EvalSet,
    skill_dir: Path | None = None,
    *,
    train: list[int] | None = None,
    test: list[int] | None = None,
) -> Estimate:
    """The estimate as a JSON-ready dict (stored in state.db when a run starts)."""
    if train is None or test is None:
        parts = split(evalset, test_fraction=settings.evals.test_fraction, seed=settings.loop.seed)
        train, test = parts.train, parts.test
    by_id = {e.id: e for e in evalset.evals}
    train_evals = [by_id[i] for i in train if i in by_id]
    test_evals = [by_id[i] for i in test if i in by_id]
    m, s, looks = PriceModel(settings, skill_dir, evalset), settings, _looks(settings)
    proposals = s.loop.proposals_per_iteration
    setup = _setup(m, s, train_evals, looks)
    one = _proposal(m, s, train_evals, looks)
    extra = Tally()  # one more run per eval for child and parent, and its comparisons if compared
    for ev in train_evals:
        extra.add(m.run(ev, True), 2)
        extra.add(m.comparison(ev), 2 * looks.more_pairs)
    judged = expected_judged(proposals, s.loop.judge_proposals, s.selection.step)
    iteration = Tally().add(one, judged)
    most = Tally().add(one, proposals).add(extra, proposals * (looks.max_runs - looks.step_runs))
    sealed = Tally()
    for ev in test_evals:
        sealed.add(m.run(ev, True), 2 * looks.runs)
    adoption = Tally()  # its first looks, both sides, kept from the search (adopt.at_end)
    for ev in train_evals if s.adopt.scope == "tasks" else test_evals:
        adoption.add(m.run(ev, True), 2 * adopt.reserved_runs(s.adopt))
    iterations = s.loop.max_iterations
    if iterations is None:  # no limit (the default): what the budget covers past the reserves
        reserves = mode_usd(sealed.summary(), s.llm.batch) + (s.adopt.at_end != "never") * mode_usd(
            adoption.summary(), s.llm.batch
        )
        iterations = _fitting(
            s.budget.usd,
            mode_usd(setup.summary(), s.llm.batch),
            reserves * RESERVE_MARGIN,
            mode_usd(iteration.summary(), s.llm.batch),
        )
    turns = int(m.profile["turns_with_skill"])
    est: Estimate = {
        "version": VERSION,
        "provider": s.llm.provider,
        "batch": s.llm.batch,
        "iterations": iterations,
        "iteration_limit": s.loop.max_iterations,
        "spend_all": s.loop.spend_all,
        "budget_usd": s.budget.usd,
        "train_evals": len(train_evals),
        "test_evals": len(test_evals),
        "setup": setup.summary(),
        "per_iteration": iteration.summary(),
        "per_proposal": one.summary(),
        "call_headroom_usd": round(m.longest_answer(len(train_evals) * looks.step_runs, turns), 4),
        "per_iteration_max": most.summary(),
        "sealed_test": sealed.summary(),
        "run": Tally().add(setup).add(iteration, iterations).add(sealed).summary(),
        "run_max": Tally().add(setup).add(most, iterations).add(sealed).summary(),
        "assumptions": _assumptions(m, s, f"{judged:g} of {proposals}", looks.max_runs),
    }
    return _with_reserves(est, s, adoption)


def _setup(m: PriceModel, s: Settings, train: list[Eval], looks: _Looks) -> Tally:
    """v0's runs on train (and the no-skill baseline's), once a run."""
    setup = Tally()
    for ev in train:
        if s.evals.baseline_comparison:
            setup.add(m.run(ev, False), looks.runs)
        setup.add(m.run(ev, True), looks.v0_runs)
    return setup


def _proposal(m: PriceModel, s: Settings, train: list[Eval], looks: _Looks) -> Tally:
    """One candidate, typical: the proposal, its screen, its first look (runs and comparisons),
    the parent measured again, the analysis."""
    one = Tally().add(m.proposal())
    screen = s.loop.screen_evals if 0 < s.loop.screen_evals < len(train) else 0
    for ev in sorted(train, key=lambda e: e.id)[:screen]:
        one.add(m.run(ev, True))
    for ev in train:
        one.add(m.run(ev, True), looks.step_runs)
        one.add(m.comparison(ev), 2 * looks.pairs)
    if looks.parent_runs > looks.step_runs:
        for ev in train:  # a run an eval until the parent holds parent_runs (leans high)
            one.add(m.run(ev, True))
    return one.add(m.analysis(len(train) * looks.step_runs, int(m.profile["turns_with_skill"])))


def _assumptions(m: PriceModel, s: Settings, judged: str, max_runs: int) -> JsonObject:
    return {
        **{k: v for k, v in m.profile.items()},
        "chars_per_token": CHARS_PER_TOKEN,
        "prompt_caching": s.llm.prompt_caching,
        "batch_price_factor": BATCH_PRICE_FACTOR,
        "screening_passes": True,
        "proposals_judged": f"{judged} (an iteration ends at its first step)",
        "runs_added": f"none (typical); up to {max_runs} per eval (at most)",
    }


def _with_reserves(est: Estimate, s: Settings, adoption: Tally) -> Estimate:
    """The reserves kept from the budget, the iterations it buys and the models priced as
    another (the dearest listed), so the preview and status can say so."""
    est["reserve_usd"] = round(mode_usd(est["sealed_test"], s.llm.batch) * RESERVE_MARGIN, 4)
    if s.adopt.at_end != "never":
        held = mode_usd(adoption.summary(), s.llm.batch) * RESERVE_MARGIN
        est["adoption_reserve_usd"] = round(held, 4)
    est["iterations_in_budget"] = _iterations_in_budget(est)
    roles = ("executor", "grader", "comparator", "analyzer", "proposer")
    models = sorted({getattr(s.models, role) for role in roles})
    est["unpriced"] = {m: f for m in models if (f := unpriced(s, m)) is not None}
    return est


# How often a step takes a child: cheap steps took 15 of 29 children at csv-report (sim.seed 0-11,
# two iterations); the guarded rule steps rarely, so an iteration judges all its proposals.
STEP_RATE = {"cheap": 0.5, "guarded": 0.0}


def expected_judged(proposals: int, judge: str, step_rule: str) -> float:
    """Proposals an iteration judges: all of them, or under judge_proposals = first the first,
    then each next one only while none stepped."""
    if judge != "first":
        return float(proposals)
    miss = 1 - STEP_RATE.get(step_rule, 0.0)
    return sum(miss**k for k in range(proposals))


def mode_usd(part: CostPart, batch: bool) -> float:
    return part["usd_batch"] if batch else part["usd"]


def per_iteration_usd(est: Estimate) -> float | None:
    """The preview's cost of one iteration in the run's mode, None for a run without one."""
    return (
        mode_usd(est["per_iteration"], bool(est.get("batch"))) if "per_iteration" in est else None
    )


def reserves_usd(est: Estimate) -> float:
    """What the estimate keeps from the search: the sealed test's and an adoption's at the end."""
    return est.get("reserve_usd", 0.0) + est.get("adoption_reserve_usd", 0.0)


def _iterations_in_budget(est: Estimate) -> int | None:
    budget, batch = est["budget_usd"], est["batch"]
    per = mode_usd(est["per_iteration"], batch)
    if not budget or per <= 0:
        return None
    return _fitting(budget, mode_usd(est["setup"], batch), reserves_usd(est), per)


def _fitting(budget: float | None, setup: float, reserve: float, per: float) -> int:
    """Whole iterations a budget pays for after the setup and the reserves (the sealed test's
    and, when the run adopts at its end, the adoption's)."""
    if not budget or per <= 0:
        return 0
    return max(0, int(math.floor((budget - setup - reserve) / per + 1e-9)))


def reserve(est: Estimate | None, *, per_run_usd: float | None, runs: int) -> float:
    """What the search leaves for the sealed test of `runs` runs: the estimate's reserve, or more
    once the runs measured so far (per_run_usd) say they cost more than it assumed."""
    planned = 0.0
    if est and "sealed_test" in est:
        planned = est.get(
            "reserve_usd", mode_usd(est["sealed_test"], bool(est.get("batch"))) * RESERVE_MARGIN
        )
    return max(planned, (per_run_usd or 0.0) * runs * RESERVE_MARGIN)


def for_start(
    settings: Settings, evalset: Any, skill_dir: Path, target: str = "body"
) -> Estimate | None:
    """The estimate of a run about to start from skill_dir; None for a description run (its
    trigger probes are not modelled) or when the preview itself fails (it never stops a run)."""
    if target != "body" or not isinstance(evalset, EvalSet):
        return None
    try:
        return estimate(settings, evalset, skill_dir)
    except Exception as exc:  # noqa: BLE001 - a preview must never stop an overnight run
        log.warning("preview.failed", error=str(exc))
        return None


def for_workspace(ws: Workspace, settings: Settings) -> Estimate | None:
    """The estimate of a resumed run, from its own inputs, split and current best: what remains
    plus what the ledger says was already spent (see `resumed`)."""
    from optimizer.inputs.evals import load_evals

    try:
        row = runs.read(ws.state_db) or Run()
        if (row.target or "body") != "body":
            return None
        evalset = load_evals(ws.root / "inputs")
        parts = row.split
        best = row.best
        whole = estimate(
            settings, evalset, ws.skill(best), train=parts.get("train"), test=parts.get("test")
        )
        with readonly.View(ws.state_db) as db:
            spent = money.account(db).budgeted_usd
            done, begun = iterations.counts(db)
        return resumed(whole, spent_usd=spent, iterations_done=done, setup_done=begun > 0)
    except Exception as exc:  # noqa: BLE001 - a preview never stops a resume
        log.warning("preview.failed", error=str(exc))
        return None


def resumed(est: Estimate, *, spent_usd: float, iterations_done: int, setup_done: bool) -> Estimate:
    """A whole-run estimate turned into one of a resumed run: the iterations left, the sealed test
    and, when no iteration began yet, the unspent part of the setup; plus the money already spent.
    The ledger answers every call already paid for again for free, so nothing is counted twice."""
    left = max(0, est["iterations"] - iterations_done)

    def setup_left(mode: Literal["usd", "usd_batch"]) -> float:
        return 0.0 if setup_done else max(0.0, est["setup"][mode] - spent_usd)

    def ahead(per: CostPart, spent: float) -> CostPart:
        test = est["sealed_test"]
        return {
            "calls": per["calls"] * left + test["calls"],
            "tokens": per["tokens"] * left + test["tokens"],
            "usd": round(per["usd"] * left + test["usd"] + setup_left("usd") + spent, 4),
            "usd_batch": round(
                per["usd_batch"] * left + test["usd_batch"] + setup_left("usd_batch") + spent, 4
            ),
        }

    out: Estimate = {
        **est,
        "iterations": left,
        "resume": {
            "iterations_done": iterations_done,
            "spent_usd": round(spent_usd, 4),
            "remaining": ahead(est["per_iteration"], 0.0),
        },
        # What is paid before the next iteration: the budget note's floor.
        "setup": {
            **est["setup"],
            "usd": round(spent_usd + setup_left("usd"), 4),
            "usd_batch": round(spent_usd + setup_left("usd_batch"), 4),
        },
        "run": ahead(est["per_iteration"], spent_usd),
        "run_max": ahead(est["per_iteration_max"], spent_usd),
    }
    out["iterations_in_budget"] = _iterations_in_budget(out)
    return out


def record(ws: Workspace, est: Estimate) -> None:
    """Keep the estimate shown at the start in state.db (runs.estimate_json)."""
    from optimizer.store.db import Store

    store = Store(ws.state_db)
    try:
        record_estimate(store, ws.root.name, json.dumps(est))
    finally:
        store.close()
