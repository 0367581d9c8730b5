"""The adoption rule (docs/design.md §16, ../shared/DESIGN.md §18): the one claim the user acts on.
A version is adopted when fresh runs of it and of the version the user has now show it better,
under the sequential rule at adopt.alpha with the claim's scope, once for every step since the
last adoption. Steps spend none of this α; their evidence never enters the test (the runs are
fresh: samples no step drew). Pure functions: the caller runs the versions and records the result."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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
    and at every look the rule may take, at a measured price per run (executor and grader)."""

    evals: int
    looks: tuple[int, ...]
    per_run_usd: float
    # Above 1: an upper bound, the measured price and a margin for dearer runs, which the
    # adoption stops at (nightly/adopt.py): what it spends never passes what it printed.
    margin: float = 1.0

    def usd(self, runs: int) -> float:
        return 2 * self.evals * runs * self.per_run_usd * self.margin

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
        return (
            f"{self.evals} evals × {first} fresh runs each side at the first look: "
            f"{bound}${self.first_usd:.2f}; {bound}${self.most_usd:.2f} if every look is needed "
            f"(up to {most} runs an eval{priced})"
        )


def what_would_decide(
    decision: RuleDecision, *, adopt: Adopt, evals: int, estimate: Estimate | None
) -> str:
    """One sentence for a version that was not certified: what would decide the claim."""
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
        f"more evals (with {evals}, a +{power.effect():.2f} gain is certified on {claim} "
        f"{found:.0%} of the time; `optimizer evals suggest` or `mine` grow them)"
    )
    if decision.delta is not None and decision.delta > 0 and estimate:
        # Runs an eval at which this Δ, with this spread, would reach the level: the interval's
        # half-width shrinks as 1/√runs.
        half = (decision.interval.high or 0) - decision.delta
        runs = decision.runs_per_eval
        if half > 0 and runs:
            wanted = math.ceil(runs * (half / max(decision.delta - adopt.min_effect, 1e-9)) ** 2)
            if wanted > adopt.max_runs:
                return (
                    f"Not decided at {runs} fresh runs an eval. About {wanted} runs an eval would "
                    f"decide a Δ of {decision.delta:+.3f} (`--set adopt.max_runs={wanted}`, about "
                    f"${estimate.usd(wanted):.2f} in all), or {more_evals}."
                )
    return f"Not decided on fresh runs: what would decide it is {more_evals}."


def last_certified(adoptions: Sequence[Adoption]) -> Adoption | None:
    """The adoption that gave the user the version they have, from adoptions oldest first."""
    return next((a for a in reversed(adoptions) if a.certified), None)


def base_of(adoptions: Sequence[Adoption]) -> str:
    """The version the user has now: the last certified adoption's, else v0."""
    have = last_certified(adoptions)
    return have.version if have else "v0"
