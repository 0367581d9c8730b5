"""The adoption rule (docs/design.md §16, ../shared/DESIGN.md §18): the one claim the user acts on.
A version is adopted when fresh runs of it and of the version the user has now show it better,
under the sequential rule at adopt.alpha with the claim's scope, once for every step since the
last adoption. Steps spend none of this α; their evidence never enters the test (the runs are
fresh: samples no step drew). Pure functions: the caller runs the versions and records the result."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from optimizer.config import Adopt, Selection
from optimizer.decide import power, spending, step
from optimizer.schemas import Adoption, RuleDecision

# Fresh runs of adoption k use samples from k·FRESH_SAMPLES + 1: a step's runs use 1..max_runs
# (at most 999 by config), so no adoption ever reads a run a step drew or another adoption drew.
FRESH_SAMPLES = 1000


def first_sample(number: int) -> int:
    """The first sample (run number) of adoption `number` (1-based)."""
    return number * FRESH_SAMPLES + 1


def rule(selection: Selection, adopt: Adopt) -> Selection:
    """The step's settings with the adoption's level, cap and threshold: one sequential rule
    serves both (docs/design.md §16), only the claim's numbers differ."""
    return selection.model_copy(
        update={
            "rule": "sequential",
            "confidence": 1 - adopt.alpha,
            "max_runs_per_eval": adopt.max_runs,
            "min_effect": adopt.min_effect,
            "scope": adopt.scope,
        }
    )


def looks(adopt: Adopt) -> tuple[int, ...]:
    """Fresh runs an eval, each side, at each look the rule may take."""
    return spending.schedule(adopt.first_runs, adopt.max_runs)


# The looks an adoption at a run's end is sure to afford: the first two (3 and then 4 fresh runs an
# eval by default). A claim that needs more is left unfinished for `optimizer adopt` to continue.
RESERVED_LOOKS = 2


def reserved_runs(adopt: Adopt) -> int:
    """Fresh runs an eval, each side, that a run adopting at its end keeps money for."""
    schedule = looks(adopt)
    return schedule[min(RESERVED_LOOKS, len(schedule)) - 1]


def decide(
    candidate: Mapping[int, list[float]],
    base: Mapping[int, list[float]],
    *,
    selection: Selection,
    adopt: Adopt,
    look: int,
    rng: random.Random,
    judge_errors: int = 0,
    total_runs: int = 0,
    unscored: int = 0,
) -> RuleDecision:
    """certified ("won"), refused ("lost": below zero or futile) or undecided ("tie", more fresh
    runs may decide it while `needs_more_runs`). No comparator: its verdicts are a step's aid,
    and a claim the user acts on rests on the scores alone."""
    return step.decide(
        candidate,
        base,
        None,
        selection=rule(selection, adopt),
        rng=rng,
        judge_errors=judge_errors,
        total_runs=total_runs,
        unscored=unscored,
        first_runs=adopt.first_runs,
        look=look,
        scope=adopt.scope,
        alpha=adopt.alpha,
        certifies=True,
    )


@dataclass(frozen=True)
class Estimate:
    """What certifying costs, shown before it is paid: both sides' fresh runs at the first look
    and at every look the rule may take, at a measured price per run (executor and grader).
    `paid`: fresh runs an eval a claim asked again already drew (only the runs beyond are paid)."""

    evals: int
    looks: tuple[int, ...]
    per_run_usd: float
    # Above 1: an upper bound, the measured price and a margin for dearer runs, which the
    # adoption stops at (nightly/adopt.py): what it spends never passes what it printed.
    margin: float = 1.0
    paid: int = 0  # fresh runs an eval a claim asked again already has

    def usd(self, runs: int) -> float:
        return 2 * self.evals * max(0, runs - self.paid) * self.per_run_usd * self.margin

    @property
    def first_usd(self) -> float:
        return self.usd(self.looks[0])

    @property
    def most_usd(self) -> float:
        return self.usd(self.looks[-1])

    def line(self) -> str:
        first, most = self.looks[0], self.looks[-1]
        bound = "at most " if self.margin > 1 else ""
        priced = (
            f", at the measured price per run and {self.margin - 1:.0%} more"
            if self.margin > 1
            else ""
        )
        again = f"goes on from its {self.paid} fresh runs an eval; " if self.paid else ""
        return (
            f"{again}{self.evals} evals × {first} fresh runs each side at the "
            f"{'next' if self.paid else 'first'} look: {bound}${self.first_usd:.2f}; "
            f"{bound}${self.most_usd:.2f} if every look is needed (up to {most} runs an eval"
            f"{priced})"
        )


def what_would_decide(
    decision: RuleDecision,
    *,
    adopt: Adopt,
    evals: int,
    estimate: Estimate | None,
    again: str = "optimizer adopt",
) -> str:
    """One sentence for a version that was not certified: what would decide the claim. Never a
    route that resets its α: asking again (`again`) goes on from the claim's next look, and once
    its looks are spent only a later version (or a claim on more evals) can be certified."""
    if decision.decision == "won":
        return ""
    if decision.decision == "lost" and (decision.delta or 0) < 0:
        return (
            "Its fresh runs score below the version you have: more runs would not certify it; "
            "go on searching (`optimizer resume`) and adopt a later version."
        )
    claim = "these tasks" if adopt.scope == "tasks" else "evals like these"
    found = power.power_at(max(1, evals), adopt.scope)
    more_evals = (
        f"more evals for the next claim (with {evals}, a +{power.effect():.2f} gain is certified "
        f"on {claim} {found:.0%} of the time; `optimizer evals suggest` or `mine` grow them)"
    )
    runs = decision.runs_per_eval
    left = [k for k in looks(adopt) if k > runs]
    if left:
        more = replace(estimate, paid=runs).usd(left[-1]) if estimate else 0.0
        cost = f", about ${more:.2f} more if every look is needed" if estimate else ""
        return (
            f"Not decided at {runs} fresh runs an eval. Asking again (`{again}`) goes on with this "
            f"claim from its next look ({left[0]} runs an eval{cost}) and the α it has left; or "
            f"{more_evals}."
        )
    return (
        f"Not decided at {runs} fresh runs an eval, the claim's last look: its α is spent, so "
        f"asking again cannot certify it. Go on searching (`optimizer resume`) and adopt a later "
        f"version; {more_evals}."
    )


def last_certified(adoptions: Sequence[Adoption]) -> Adoption | None:
    """The adoption that gave the user the version they have, from adoptions oldest first."""
    return next((a for a in reversed(adoptions) if a.certified), None)


def base_of(adoptions: Sequence[Adoption]) -> str:
    """The version the user has now: the last certified adoption's, else v0."""
    have = last_certified(adoptions)
    return have.version if have else "v0"
