"""Certify a version for the user (docs/design.md §16, ../shared/DESIGN.md §18): fresh runs of it and
of the version the user has now, looks of the adoption rule (decide/adopt.py) until it decides or
reaches adopt.max_runs, and the outcome recorded in state.db. Every look's runs commit before
the rule reads them, so a killed adoption resumes from the ledger and pays for nothing twice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import structlog

from optimizer.decide import adopt as rule
from optimizer.errors import BadInput
from optimizer.grade.unit import Scored, eval_means, judge_errors, unscored
from optimizer.schemas import Adoption
from optimizer.search.state import RunState
from optimizer.store import adoptions

log = structlog.get_logger()


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
    row = run.store.get("versions", label)
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


def estimate_for(run: RunState, claim: Claim) -> rule.Estimate | None:
    # Each side at its own measured price: a longer skill's runs cost more than v0's.
    prices = [adoptions.per_run_usd(run.store, v) for v in (claim.version, claim.base)]
    known = [p for p in prices if p is not None]
    if not known:
        return None
    per_run = sum(known) / len(known)
    return rule.Estimate(len(claim.evals), rule.looks(run.settings.adopt), per_run)


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
    for runs in rule.looks(s.adopt):
        run.show_activity(
            f"adoption {opened.number}: {claim.version} and {claim.base}, {runs} fresh runs an eval"
        )
        mine = await target.fresh(claim.version, claim.evals, runs, first=first, scope=scope)
        theirs = await target.fresh(claim.base, claim.evals, runs, first=first, scope=scope)
        errors, total = judge_errors(mine, theirs)
        decision = rule.decide(
            eval_means(mine),
            eval_means(theirs),
            selection=s.selection,
            adopt=s.adopt,
            look=runs,
            rng=run.rng("adoption", opened.number, runs),
            judge_errors=errors,
            total_runs=total,
            unscored=len(unscored(mine, theirs)),
        )
        log.info("adoption.look", number=opened.number, runs=runs, decision=decision.decision)
        if not decision.needs_more_runs:
            break
    next_step = rule.what_would_decide(
        decision, adopt=s.adopt, evals=len(claim.evals), estimate=estimate
    )
    return adoptions.finish(run.store, opened.number, decision, next_step)
