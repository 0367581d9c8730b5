"""Certify a version for the user (docs/design.md §16, ../shared/DESIGN.md §18): fresh runs of it and
of the version the user has now, looks of the adoption rule (decide/adopt.py) until it decides or
reaches adopt.max_runs, and the outcome recorded in state.db. Every look's runs commit before
the rule reads them, so a killed adoption resumes from the ledger and pays for nothing twice."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

import structlog

from optimizer.decide import adopt as rule
from optimizer.decide import fdr
from optimizer.errors import BadInput, RunStopped
from optimizer.grade.unit import Scored, eval_means, judge_errors, unscored_within
from optimizer.schemas import Adoption
from optimizer.search.events import Activity
from optimizer.search.state import RunState
from optimizer.store import adoptions, versions

log = structlog.get_logger()


@runtime_checkable
class Measures(Protocol):
    """What an adoption needs of a target: fresh runs of a version on some evals."""

    async def fresh(
        self, label: str, evals: list[int], runs: int, *, first: int, scope: str
    ) -> dict[int, list[Scored]]: ...


@dataclass(frozen=True)
class Claim:
    """What an adoption would claim and on which evals, decided before anything is paid."""

    version: str
    base: str
    scope: str
    evals: list[int]


def claim_for(run: RunState, version: str | None) -> Claim:
    """The claim `optimizer adopt` would make; one sentence (BadInput) when there is none to make."""
    s = run.settings.adopt
    label = version or run.best()
    row = versions.find(run.store, label)
    if row is None:
        raise BadInput(
            f"{run.ws.root}: has no version {label}; `optimizer lineage {run.ws.root}` lists them."
        )
    if row.get("stage") not in (None, "baseline", "benchmark"):
        raise BadInput(
            f"{run.ws.root}: {label} is a {row.get('stage')} version; an adoption certifies the "
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
    return Claim(label, base, s.scope, list(evals))


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
    return rule.Estimate(
        len(claim.evals), rule.looks(run.settings.adopt), per_run, margin=RESERVE_MARGIN
    )


async def certify(run: RunState, target: Measures, claim: Claim) -> Adoption:
    """Run the adoption rule's looks on fresh runs and record the outcome."""
    s = run.settings
    estimate = estimate_for(run, claim)
    opened = adoptions.open_for(
        run.store,
        claim.version,
        claim.base,
        claim.scope,
        claim.evals,
        estimate.most_usd if estimate else 0.0,
    )
    scope = adoptions.scope(opened.number)
    first = rule.first_sample(opened.number)
    level = s.adopt.model_copy(update={"alpha": alpha_of(run, opened.number)})
    for runs in rule.looks(s.adopt):
        run.emit(
            Activity(
                f"adoption {opened.number}: {claim.version} and {claim.base}, {runs} fresh runs an eval"
            )
        )
        mine = await target.fresh(claim.version, claim.evals, runs, first=first, scope=scope)
        theirs = await target.fresh(claim.base, claim.evals, runs, first=first, scope=scope)
        errors, total = judge_errors(mine, theirs)
        lost = unscored_within(
            (mine, theirs),
            s.selection.max_unscored_rate,
            runs_of=f"fresh runs of adoption {opened.number}",
            then=f"nothing was adopted. Fix the cause, then `optimizer adopt {run.ws.root} "
            f"{claim.version}` continues it.",
        )
        decision = rule.decide(
            eval_means(mine),
            eval_means(theirs),
            selection=s.selection,
            adopt=level,
            look=runs,
            rng=run.rng("adoption", opened.number, runs),
            judge_errors=errors,
            total_runs=total,
            unscored=len(lost),
        )
        log.info("adoption.look", number=opened.number, runs=runs, decision=decision.decision)
        if not decision.needs_more_runs:
            break
    next_step = rule.what_would_decide(
        decision, adopt=s.adopt, evals=len(claim.evals), estimate=estimate
    )
    return adoptions.finish(run.store, opened.number, decision, next_step)


RESERVE_MARGIN = 1.25  # a version's runs cost more than v0's, as the sealed test's reserve says


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
