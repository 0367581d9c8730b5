"""`optimizer gate BASE HEAD`: both versions of a skill on the same evals, through the one grading
unit, and the non-inferiority test of HEAD against BASE (noninferiority.py). Never writes outside
its folder, never scores a failure of ours, and never lets the evals reach the agent.

Layout: <out>/base/ and <out>/head/ (the two skills as run, without evals/), <out>/eval-<id>/
{base,head}/run-<n>/ (each run, graded), <out>/state.db (the ledger and the gradings)."""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import structlog

from optimizer.config import Settings
from optimizer.decide import noninferiority
from optimizer.decide.comparison import paired_differences
from optimizer.decide.noninferiority import GateResult
from optimizer.errors import BudgetExhausted
from optimizer.grade.benchmark import Progress, counting, grading
from optimizer.grade.jobs import Side, jobs_for
from optimizer.grade.unit import (
    MISSING_AGAINST,
    MISSING_CLAIMED,
    Grader,
    Scored,
    claim_means,
    graded_again,
)
from optimizer.inputs import skill as skills
from optimizer.inputs.evals import EvalSet
from optimizer.model.port import Client
from optimizer.store.db import Store

log = structlog.get_logger()
SIDES = ("base", "head")
MISSING = {"base": MISSING_AGAINST, "head": MISSING_CLAIMED}  # HEAD claims not to be worse


@dataclass(frozen=True)
class GateRequest:
    """What `optimizer gate` compares and how: the two skills, the evals, the folder for the
    runs, the margin HEAD may be worse by, a progress callback and the scope of the claim
    (noninferiority.gate_rule)."""

    base: Path
    head: Path
    evalset: EvalSet
    out_dir: Path
    margin: float
    progress: Progress | None = None
    scope: str = "tasks"

    @property
    def out(self) -> Path:
        return Path(self.out_dir).absolute()


async def run_gate(
    settings: Settings, client: Client, store: Store, gate: GateRequest
) -> GateResult:
    """Run both skills on every eval (runs_per_eval each), then test HEAD against BASE. A budget
    that runs out leaves the gate without a test (note says so), never with a partial one."""
    broken = skills.check_skill(gate.head)
    if broken:  # a skill that cannot load cannot run: worse than any skill that can
        return _invalid_head(settings, gate, broken)
    copies = {
        side: _copy(src, gate.out / side)
        for side, src in zip(SIDES, (gate.base, gate.head), strict=True)
    }
    identical = skills.content_hash(copies["base"]) == skills.content_hash(copies["head"])
    runs = settings.evals.runs_per_eval
    result = GateResult(gate.base, gate.head, gate.evalset.source, identical, runs, None)
    if identical:  # nothing changed: nothing to measure, and nothing is spent
        result.note = "HEAD's skill files are identical to BASE's (evals/ aside); nothing was run."
        return result
    try:
        graded = await _measure(settings, client, store, gate, copies)
    except BudgetExhausted as exc:
        result.note = f"the budget ran out before both skills were measured: {exc}"
        result.cost_usd = _spent(store)
        return result
    scores = _by_side(graded)
    return _decide(result, gate.evalset, scores, settings, gate.margin, store, gate.scope)


def _invalid_head(settings: Settings, gate: GateRequest, broken: list[str]) -> GateResult:
    """The verdict on a HEAD that is not a valid skill: worse, with its problems named."""
    result = GateResult(
        gate.base,
        gate.head,
        gate.evalset.source,
        False,
        settings.evals.runs_per_eval,
        None,
        invalid_head=broken,
    )
    result.note = "HEAD is not a valid skill, so it is worse than BASE: " + " ".join(broken)
    return result


async def _measure(
    settings: Settings, client: Client, store: Store, gate: GateRequest, copies: dict[str, Path]
) -> dict[int, list[Scored]]:
    """Both sides' trials of every eval, graded; raises BudgetExhausted when the budget runs out."""
    runs = settings.evals.runs_per_eval
    evals = sorted(gate.evalset.ids)
    total = len(SIDES) * len(evals) * runs
    step = counting(gate.progress, total)

    # Both sides' runs in one order seeded by loop.seed, through one grader: an effect shared by
    # a stretch of time (provider load, a cache) falls on both alike (docs/selection.md).
    names = {side: skills.load_skill(copies[side]).name for side in SIDES}
    jobs = [
        replace(job, skill_name=names[side])
        for side in SIDES
        for job in jobs_for(
            evals, runs, prefix="", root=gate.out, side=Side(side, copies[side], side)
        )
    ]
    random.Random(f"{settings.loop.seed}:gate order").shuffle(jobs)
    with grading(
        settings,
        client,
        store,
        gate.evalset,
        skill_name=names["head"],  # each job names its own side's skill
        inputs_root=gate.base,  # eval files are relative to BASE, as loaded
        on_run=step,
    ) as grader:
        return await _grade(grader, jobs, settings.evals.unscored_retries)


def _by_side(graded: dict[int, list[Scored]]) -> dict[str, dict[int, list[Scored]]]:
    """The graded trials back per side and eval, each eval's in run-number order."""
    scores: dict[str, dict[int, list[Scored]]] = {side: {} for side in SIDES}
    for e in sorted(graded):  # back per side by run number: the order decides nothing
        for one in sorted(graded[e], key=lambda r: r.run_number):
            scores[one.configuration].setdefault(e, []).append(one)
    return scores


async def _grade(grader: Grader, jobs: list, retries: int) -> dict[int, list[Scored]]:
    return await graded_again(lambda: grader.grade(jobs, scope="gate"), retries, lambda r: [r])


def _decide(
    result: GateResult,
    evalset: EvalSet,
    scores: dict[str, dict[int, list[Scored]]],
    settings: Settings,
    margin: float,
    store: Store,
    scope: str = "tasks",
) -> GateResult:
    """The test of HEAD against BASE from both sides' scored trials; when too many trials went
    unscored or too few evals were scored on both sides, a note says why no bound is made."""
    # A run left unscored after its retries counts against its side (docs/design.md §7): a
    # failure for HEAD, a pass for BASE, so a failure that depends on the output can only keep
    # "not worse" from being shown.
    means = {side: claim_means(scores[side], missing=MISSING[side]) for side in SIDES}
    diffs = paired_differences(means["head"], means["base"])
    _tally(result, scores, store)
    limit = settings.selection.max_unscored_rate
    if result.total_runs and result.unscored / result.total_runs > limit:
        # So many failures of ours say nothing about HEAD: no bound, and never "worse" for them.
        result.note = (
            f"{result.unscored} of {result.total_runs} runs could not be scored, more than "
            f"selection.max_unscored_rate = {limit}; no bound is made, so not worse is not shown. "
            "Fix the cause (optimizer.log) and run the gate again."
        )
        return result
    _fill_per_eval(result, evalset, means, diffs)
    if len(diffs) < 2:
        result.note = (
            f"only {len(diffs)} eval{'s' if len(diffs) != 1 else ''} had scored runs on both "
            f"sides ({result.unscored} runs unscored, {result.judge_errors} judge errors); "
            "no bound can be made, so not worse is not shown."
        )
        return result
    sizes = [min(len(means["base"][e]), len(means["head"][e])) for e in diffs]
    counts = {
        e: len(evalset.by_id(e).expectations) + len(evalset.by_id(e).structural) for e in diffs
    }
    step = noninferiority.resolution(min(sizes), counts)
    rule = noninferiority.gate_rule(
        scope, min(sizes), confidence=settings.selection.confidence, margin=margin
    )
    result.test = rule.check(
        {e: means["head"][e] for e in diffs}, {e: means["base"][e] for e in diffs}, step
    )
    log.info(
        "gate.decided",
        outcome=result.test.outcome,
        delta=round(result.test.delta, 4),
        low=round(result.test.low, 4),
        evals=len(diffs),
        unscored=result.unscored,
    )
    return result


def _tally(result: GateResult, scores: dict[str, dict[int, list[Scored]]], store: Store) -> None:
    """How many trials there were, how many went unscored or had judge errors, and the cost."""
    every = [s for side in SIDES for runs in scores[side].values() for s in runs]
    result.unscored = sum(s.status == "unscored" for s in every)
    result.judge_errors = sum(s.status == "judge_error" for s in every)
    result.total_runs = len(every)
    result.cost_usd = _spent(store)


def _fill_per_eval(
    result: GateResult,
    evalset: EvalSet,
    means: dict[str, dict[int, list[float]]],
    diffs: dict[int, float],
) -> None:
    """Each eval's mean on both sides, their difference and the trials behind them."""
    for e in sorted(evalset.ids):
        b, h = means["base"].get(e) or [], means["head"].get(e) or []
        result.per_eval[e] = {
            "name": evalset.by_id(e).name,
            "base": sum(b) / len(b) if b else None,
            "head": sum(h) / len(h) if h else None,
            "diff": diffs.get(e),
            "base_runs": len(b),
            "head_runs": len(h),
        }


def _copy(src: Path, dest: Path) -> Path:
    """The skill as it runs: its files without evals/, so the agent never reads expectations."""
    if dest.exists():
        shutil.rmtree(dest)
    skills.snapshot(src, dest)
    shutil.rmtree(dest / "evals", ignore_errors=True)
    return dest


def _spent(store: Store) -> float:
    return round(store.spent_usd(), 6)
