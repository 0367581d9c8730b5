"""What the user has adopted, in one wording for status, lineage, summary and the report: the adopted
version, each adoption's claim with its scope and evidence, and what to do when nothing is
adopted yet (docs/design.md §16). A step of the search is never worded as a claim here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from optimizer import words
from optimizer.decide import adopt as rule
from optimizer.report.format import money
from optimizer.report.info import Adopted
from optimizer.schemas import Adoption


def evidence(a: Adoption) -> str:
    d = a.decision
    if d is None:
        return "its fresh runs are under way"
    if d.delta is None:
        return d.reason
    return (
        f"Δ {d.delta:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}] {words.ci(d.confidence)}, the "
        f"adoption's, on {d.evals} evals × {d.runs_per_eval} fresh runs"
    )


def line(a: Adoption) -> str:
    """'#1 v3 better than v0 on these tasks: certified (Δ …, on 4 evals × 6 fresh runs), $0.84'."""
    outcome = {"certified": "certified", "not certified": "not certified"}.get(a.status, "running")
    return f"#{a.number} {a.claim}: {outcome} ({evidence(a)}), {money(a.cost_usd)}"


def adopted_line(adoptions: list[Adoption], best: str | None, run_dir: str) -> str:
    """The version the user has and, when the search's best is another, how to claim it."""
    have = rule.last_certified(adoptions)
    now = (
        f"{have.version} (certified {have.claim.removeprefix(have.version + ' ')})"
        if have
        else "v0, the skill as it was"
    )
    if best and best != (have.version if have else "v0"):
        return f"{now}; `optimizer adopt {run_dir}` certifies the search's best, {best}"
    return now


def spent_words(spent: float, budget: float | None, adoptions: Sequence[Mapping[str, Any]]) -> str:
    """What a run spent against its budget (spent_apart when it adopted)."""
    return spent_apart(spent, budget, adoptions) or (
        money(spent) + (f" of {money(budget)}" if budget else "")
    )


def spent_apart(
    spent: float, budget: float | None, adoptions: Sequence[Mapping[str, Any]]
) -> str | None:
    """Each adoption's spend apart, with the estimate it showed, None when none spent anything.
    An adoption `optimizer adopt` makes is approved on its own estimate, so the run's budget is
    never read as overspent ('$3.51: $1.05 of the $3.00 budget on the search and its sealed test,
    $2.46 on adoption #1 (its estimate: $4.55)')."""
    apart = [a for a in adoptions if (a.get("cost_usd") or 0.0) > 0]
    if not apart:
        return None
    search = max(0.0, spent - sum(a["cost_usd"] for a in apart))
    head = money(search) + (f" of the {money(budget)} budget" if budget else "")
    parts = [f"{head} on the search and its sealed test"] + [
        f"{money(a['cost_usd'])} on adoption #{a['number']} (its estimate: {money(a['estimate_usd'])})"
        for a in apart
    ]
    return f"{money(spent)}: " + ", ".join(parts)


def as_json(adoptions: list[Adoption]) -> Adopted:
    return {
        "adopted": rule.base_of(adoptions),
        "adoptions": [a.model_dump(mode="json") for a in adoptions],
    }


def estimate_line(est: rule.Estimate) -> str:
    """What certifying costs, said before it is paid: at the first look and if every look is
    needed; an upper bound when the estimate carries a margin."""
    first, most = est.looks[0], est.looks[-1]
    bound = "at most " if est.margin > 1 else ""
    priced = (
        f", at the measured price per run and {est.margin - 1:.0%} more" if est.margin > 1 else ""
    )
    again = f"goes on from its {est.paid} fresh runs an eval; " if est.paid else ""
    return (
        f"{again}{est.evals} evals × {first} fresh runs each side at the "
        f"{'next' if est.paid else 'first'} look: {bound}${est.first_usd:.2f}; "
        f"{bound}${est.most_usd:.2f} if every look is needed (up to {most} runs an eval"
        f"{priced})"
    )
