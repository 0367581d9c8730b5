"""The adoption rule (docs/design.md §16): the one claim the user acts on.
A version is adopted when fresh runs of it and of the version the user has now show it better,
under the sequential rule at adopt.alpha with the claim's scope, once for every step since the
last adoption. Steps spend none of this α; their evidence never enters the test (the runs are
fresh: samples no step drew). Pure functions: the caller runs the versions and records the result."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from optimizer.config import Adopt, Selection
from optimizer.decide import power, spending, step
from optimizer.decide.comparison import Asked, Measured
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


class AdoptionRule(Protocol):
    """A claim the user acts on, decided at one look on fresh runs of both sides: certified
    ("won"), refused ("lost") or undecided ("tie"; more fresh runs may decide it while the
    decision says `needs_more_runs`). A pure function of what was measured and a seeded random."""

    def decide(self, measured: Measured[int], look: int, rng: random.Random) -> RuleDecision: ...


@dataclass(frozen=True)
class FreshRuns:
    """The adoption rule: the sequential step rule at the adoption's level, cap, threshold and
    scope (rule()). No comparator: its verdicts are a step's aid, and a claim the user acts on
    rests on the scores alone."""

    selection: Selection
    adopt: Adopt

    def decide(self, measured: Measured[int], look: int, rng: random.Random) -> RuleDecision:
        scores = replace(measured, tally=None)
        asked = Asked(
            first_runs=self.adopt.first_runs,
            look=look,
            scope=self.adopt.scope,
            alpha=self.adopt.alpha,
            certifies=True,
        )
        return step.Sequential(rule(self.selection, self.adopt)).decide(scores, asked, rng)


def decide(
    candidate: Mapping[int, list[float]],
    base: Mapping[int, list[float]],
    *,
    selection: Selection,
    adopt: Adopt,
    look: int,
    rng: random.Random,
) -> RuleDecision:
    """FreshRuns(selection, adopt) over both sides' fresh scores at `look` runs an eval, every run
    scored. Runs that could not be scored are counted in a Measured handed to FreshRuns.decide, as
    search/adoption.py does."""
    return FreshRuns(selection, adopt).decide(Measured(candidate, base), look, rng)


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


@dataclass(frozen=True)
class NextStep:
    """What would decide a claim that was not certified, as data (words.what_would_decide says it).
    Never a route that resets its α: asking again goes on from the claim's next look, and once its
    looks are spent only a later version (or a claim on more evals) can be certified."""

    below: bool  # its fresh runs score below the version the user has: more runs cannot help
    runs: int  # fresh runs an eval the claim reached
    next_look: int | None  # the next look's fresh runs an eval; None: its looks are spent
    more_usd: float | None  # what every look left would cost; None without an estimate
    evals: int
    scope: spending.Scope
    found: float  # how often a real gain of `effect` is certified with `evals` evals
    effect: float


def next_step(
    decision: RuleDecision, *, adopt: Adopt, evals: int, estimate: Estimate | None
) -> NextStep | None:
    """What would decide the claim; None when it was certified."""
    if decision.decision == "won":
        return None
    runs = decision.runs_per_eval
    left = [k for k in looks(adopt) if k > runs]
    more = replace(estimate, paid=runs).usd(left[-1]) if estimate and left else None
    return NextStep(
        below=decision.decision == "lost" and (decision.delta or 0) < 0,
        runs=runs,
        next_look=left[0] if left else None,
        more_usd=more,
        evals=evals,
        scope=adopt.scope,
        found=power.power_at(max(1, evals), adopt.scope),
        effect=power.effect(),
    )


def last_certified(adoptions: Sequence[Adoption]) -> Adoption | None:
    """The adoption that gave the user the version they have, from adoptions oldest first."""
    return next((a for a in reversed(adoptions) if a.certified), None)


def base_of(adoptions: Sequence[Adoption]) -> str:
    """The version the user has now: the last certified adoption's, else v0."""
    have = last_certified(adoptions)
    return have.version if have else "v0"
