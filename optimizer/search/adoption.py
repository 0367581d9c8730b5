"""Certify a version for the user (docs/design.md §16): fresh runs of it and
of the version the user has now, looks of the adoption rule (decide/adopt.py) until it decides or
reaches adopt.max_runs, and the outcome recorded in state.db. Every look's runs commit before
the rule reads them, so a killed adoption resumes from the ledger and pays for nothing twice.
A claim (docs/design.md §7) has one α: asked again, it goes on from its last look; its two
sides' runs go out interleaved; and a run it could not score counts against its side."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

import structlog

from optimizer import words
from optimizer.budget.estimate import RESERVE_MARGIN
from optimizer.config import Adopt
from optimizer.decide import adopt as rule
from optimizer.decide import fdr, spending
from optimizer.decide.comparison import Measured
from optimizer.errors import BadInput, RunStopped
from optimizer.events import Activity
from optimizer.grade.unit import (
    MISSING_AGAINST,
    MISSING_CLAIMED,
    Scored,
    claim_means,
    graded_again,
    judge_errors,
    unscored_within,
)
from optimizer.schemas import Adoption
from optimizer.search.state import RunState
from optimizer.store import adoptions, versions

log = structlog.get_logger()


# A run a claim could not score after its retries counts against its side (grade/unit.claim_means):
# the worst score a run can have for the version claimed better, the best for the one it is
# claimed against, so a failure that depends on the output can only make the claim harder.
Order = list[tuple[str, int, int]]  # (version, eval, run number) in the order the runs go out


@runtime_checkable
class Measures(Protocol):
    """What an adoption needs of a target: fresh runs of versions on evals, in the order given,
    back per version and eval by run number."""

    async def fresh(self, order: Order, *, scope: str) -> dict[str, dict[int, list[Scored]]]: ...


@dataclass(frozen=True)
class Claim:
    """What an adoption would claim and on which evals, decided before anything is paid: a new
    adoption (`status` "new", `number` the next one) or the one that made this claim before and
    certified nothing ("running" after a kill, "not certified" when asked again), which goes on
    with the looks and α it was opened with (`kept`): one α per claim."""

    version: str
    base: str
    scope: str
    evals: list[int]
    kept: adoptions.Kept
    number: int
    status: str = "new"

    @property
    def looks(self) -> tuple[int, ...]:
        return spending.schedule(self.kept.first_runs, self.kept.max_runs)

    @property
    def left(self) -> tuple[int, ...]:
        """The looks still to take: after a kill the last one taken again (its runs are in the
        ledger, its outcome was not), asked again the ones after it."""
        last = self.kept.looked
        if self.status == "not certified":
            return tuple(k for k in self.looks if k > last)
        return tuple(k for k in self.looks if k >= last)

    def rule(self, adopt: Adopt) -> Adopt:
        """The adoption settings this claim is decided under: the schedule and α it was opened
        with, whatever adopt.first_runs, max_runs or alpha say now."""
        return adopt.model_copy(
            update={
                "alpha": self.kept.alpha,
                "first_runs": self.kept.first_runs,
                "max_runs": self.kept.max_runs,
            }
        )


def claim_for(run: RunState, version: str | None) -> Claim:
    """The claim `optimizer adopt` would make; one sentence (BadInput) when there is none to make,
    or when this claim took every look before: its α is spent."""
    s = run.settings.adopt
    label = version or run.best()
    found = versions.find(run.store, label)
    if found is None:
        raise BadInput(
            f"{run.ws.root}: has no version {label}; `optimizer lineage {run.ws.root}` lists them."
        )
    if found.phase not in (None, "baseline", "benchmark"):
        raise BadInput(
            f"{run.ws.root}: {label} is a {found.phase} version; an adoption certifies the "
            "body of a skill (a description is checked by its trigger evals)."
        )
    base = adoptions.adopted(run.store)
    if label == base:
        raise BadInput(
            f"{run.ws.root}: {label} is the version you have already; nothing to adopt. "
            f"`optimizer resume {run.ws.root}` searches on from it."
        )
    evals = run.train if s.scope == "tasks" else run.test
    if not evals:
        raise BadInput(
            f"{run.ws.root}: adopt.scope = general needs sealed evals, which this run has none "
            "of (a general claim is never certified on the evals that chose the version); use "
            "--set adopt.scope=tasks, or a run with evals.test_fraction above 0."
        )
    prior = adoptions.claim_of(run.store, label, base, s.scope)
    number = prior.number if prior else adoptions.next_number(run.store)
    now = adoptions.Kept(s.first_runs, s.max_runs, alpha_of(run, number), 0)
    if prior is None:
        return Claim(label, base, s.scope, list(evals), now, number)
    claim = Claim(
        label, base, s.scope, prior.evals, adoptions.kept(run.store, number, now), number,
        prior.status,
    )  # fmt: skip
    if not claim.left:
        raise BadInput(
            f"{run.ws.root}: adoption {number} took every look of {label} against {base} (up to "
            f"{claim.looks[-1]} fresh runs an eval) and did not certify it: its α is spent, and "
            f"asking again cannot certify it. `optimizer resume {run.ws.root}` searches on; adopt "
            "a later version."
        )
    return claim


def alpha_of(run: RunState, number: int) -> float:
    """Adoption `number`'s α: adopt.alpha, or under adopt.fdr = "lord" its LORD++ level given the
    run's finished adoptions before it (certified or not), in the order they were made."""
    s = run.settings.adopt
    if s.fdr == "none":
        return s.alpha
    earlier = [
        a.certified for a in adoptions.all_of(run.store) if a.number < number and a.finished_at
    ]
    return fdr.lord(earlier, s.alpha).alpha


def estimate_for(run: RunState, claim: Claim) -> rule.Estimate | None:
    # Each side at its own measured price: a longer skill's runs cost more than v0's.
    prices = [adoptions.per_run_usd(run.store, v) for v in (claim.version, claim.base)]
    known = [p for p in prices if p is not None]
    if not known:
        return None
    per_run = sum(known) / len(known)
    paid = claim.kept.looked if claim.status != "new" else 0
    return rule.Estimate(
        len(claim.evals), claim.left or claim.looks, per_run, margin=RESERVE_MARGIN, paid=paid
    )


def interleaved(claim: Claim, runs: int, first: int, rng: random.Random) -> Order:
    """Both sides' fresh runs up to a look in one order drawn from `rng` (seeded by the run's
    seed, the adoption's number and the look): the sides go out mixed, batches included, so
    nothing a stretch of time or a batch shares (provider load, a cache) favours one side."""
    order = [
        (label, e, n)
        for label in (claim.version, claim.base)
        for e in claim.evals
        for n in range(first, first + runs)
    ]
    rng.shuffle(order)
    return order


async def _fresh(
    target: Measures, order: Order, scope: str, retries: int
) -> dict[str, dict[int, list[Scored]]]:
    """The runs of `order`; those our failures left unscored tried again, `retries` more passes."""
    return await graded_again(
        lambda: target.fresh(order, scope=scope), retries, lambda r: list(r.values())
    )


async def certify(run: RunState, target: Measures, claim: Claim) -> Adoption:
    """Run the adoption rule's looks on fresh runs and record the outcome: from the claim's first
    look, or, asked again, from where it stopped."""
    s = run.settings
    estimate = estimate_for(run, claim)
    opened = adoptions.open_for(
        run.store,
        claim.version,
        claim.base,
        claim.scope,
        claim.evals,
        estimate.most_usd if estimate else 0.0,
        claim.kept,
    )
    scope = adoptions.scope(opened.number)
    first = rule.first_sample(opened.number)
    level = claim.rule(s.adopt)
    decision = None
    criterion = rule.FreshRuns(s.selection, level)
    for runs in claim.left:
        run.emit(
            Activity(
                f"adoption {opened.number}: {claim.version} and {claim.base}, {runs} fresh runs an eval"
            )
        )
        order = interleaved(claim, runs, first, run.rng("adoption order", opened.number, runs))
        results = await _fresh(target, order, scope, s.evals.unscored_retries)
        mine, theirs = results.get(claim.version, {}), results.get(claim.base, {})
        errors, total = judge_errors(mine, theirs)
        lost = unscored_within(
            (mine, theirs),
            s.selection.max_unscored_rate,
            runs_of=f"fresh runs of adoption {opened.number}",
            then=f"nothing was adopted. Fix the cause, then `optimizer adopt {run.ws.root} "
            f"{claim.version}` continues it.",
        )
        scores = Measured(
            claim_means(mine, missing=MISSING_CLAIMED),
            claim_means(theirs, missing=MISSING_AGAINST),
            judge_errors=errors,
            total_runs=total,
            unscored=len(lost),
        )
        decision = criterion.decide(scores, runs, run.rng("adoption", opened.number, runs))
        adoptions.looked(run.store, opened.number, runs)
        log.info("adoption.look", number=opened.number, runs=runs, decision=decision.decision)
        if not decision.needs_more_runs:
            break
    assert decision is not None  # claim_for refuses a claim without a look left
    next_step = words.what_would_decide(
        rule.next_step(decision, adopt=level, evals=len(claim.evals), estimate=estimate),
        again=f"optimizer adopt {run.ws.root} {claim.version}",
    )
    if decision.decision != "won":
        next_step = " ".join(filter(None, [next_step, _lost_to_us(claim, mine, theirs)]))
    return adoptions.finish(run.store, opened.number, decision, next_step)


def _lost_to_us(
    claim: Claim, mine: dict[int, list[Scored]], theirs: dict[int, list[Scored]]
) -> str:
    """What runs our failures (or the judge's) left unscored cost a claim that was not certified:
    each counted against its side (a failure for the version claimed, a pass for the one it is
    claimed against), so a real gain is certified less often; '' when every run was scored."""
    sides = []
    for label, side in ((claim.version, mine), (claim.base, theirs)):
        runs = [s for ss in side.values() for s in ss]
        lost = [s for s in runs if s.status in ("unscored", "judge_error")]
        sides.append((label, len(lost), len(runs), lost))
    if not any(n for _, n, _, _ in sides):
        return ""
    said = " and ".join(f"{n} of {total} of {label}'s" for label, n, total, _ in sides)
    last = next(
        (s.error for _, _, _, lost in reversed(sides) for s in reversed(lost) if s.error), None
    )
    cause = f" (the last cause: {last})" if last else ""
    return (
        f"{said} fresh runs could not be scored{cause} and counted against their side (a "
        f"failure for {claim.version}, a pass for {claim.base}), which lowers the chance a real "
        "gain is certified: fix what failed them (the provider, the judge model, or a larger "
        "llm.max_tokens when the judge's answers were cut) and ask again."
    )


def wanted(run: RunState) -> bool:
    """Whether this run adopts at its end tonight (adopt.at_end)."""
    when = run.settings.adopt.at_end
    if when == "never":
        return False
    if when == "always":
        return True
    made = adoptions.all_of(run.store)
    if not made:
        return True
    last = datetime.fromisoformat(made[-1].started_at.replace("Z", "+00:00"))
    return datetime.now(UTC) - last >= timedelta(days=7) - timedelta(hours=12)


def reserve(run: RunState, planned: float = 0.0) -> float:
    """What the search leaves for the adoption at the run's end: its first looks, both sides, at
    the estimate's price per run (`planned`, shown when the run started), or more once v0's
    measured price says they cost more (0 when the run adopts nothing at its end)."""
    if not wanted(run):
        return 0.0
    per_run = adoptions.per_run_usd(run.store) or 0.0
    evals = run.train if run.settings.adopt.scope == "tasks" else run.test
    runs = rule.reserved_runs(run.settings.adopt)
    return max(planned, 2 * len(evals) * runs * per_run * RESERVE_MARGIN)


async def at_end(run: RunState, target: Measures | object) -> Adoption | None:
    """The adoption a run makes after its sealed test when asked (adopt.at_end); None when there is
    nothing to adopt. A budget that runs out leaves it unfinished, for `optimizer adopt` to
    continue from the ledger; never raises for that."""
    if not wanted(run) or not isinstance(target, Measures):
        return None
    try:
        claim = claim_for(run, None)
    except BadInput as exc:  # the best is the version the user has: nothing to claim
        log.info("adoption.skipped", reason=exc.problems[0])
        return None
    try:
        return await certify(run, target, claim)
    except RunStopped as exc:  # the budget, the deadline, a stop: the runs so far are kept
        log.info("adoption.unfinished", reason=str(exc))
        return None
