"""A run's promotions as a family (docs/design.md §16, docs/selection.md): online false-discovery control by
LORD++ (Ramdas, Yang, Wainwright and Jordan 2017). Decision t may spend

    α_t = γ_t·W0 + (α − W0)·γ_(t − τ1) + α·Σ_(j ≥ 2) γ_(t − τj),   W0 = α/2,

τj the places of the earlier promotions, γ a fixed sequence summing to 1. Then the expected share
of false promotions among all of a run's promotions (the FDR) is at most α whatever the number of
children, when the decisions' errors are independent of each other (each child is judged on its
own runs; they share the parent's). Every promotion earns later decisions α; a run of failures
spends the initial wealth W0 more and more thinly.

Pure: the state is a function of the recorded decisions, read in a stated order (the version
number), so a resumed run gives the child in flight the α it had before the crash."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from optimizer.words import plural

# γ_j ∝ j^−GAMMA_POWER: heavier early than the 1/j² family, so the first children of a night are
# not starved, and summable. ZETA normalises it (ζ(1.5)).
GAMMA_POWER = 1.5
ZETA = 2.612375348685488
# Decisions the promotion rule makes; a screened-out child never reached it and spends nothing.
RULE_PHASES = ("benchmark", "probe")


def gamma(j: int) -> float:
    return 0.0 if j < 1 else 1 / (ZETA * j**GAMMA_POWER)


class NightJson(TypedDict):
    method: Literal["lord"]
    fdr: float
    decision_index: int
    earlier_promotions: int


@dataclass(frozen=True)
class Night:
    """The α of the next decision and the family it belongs to."""

    alpha: float  # the next decision's whole false-promotion budget
    fdr: float  # the bound on the expected share of false promotions among the run's
    index: int  # 1-based place of the next decision
    promotions: int  # won decisions before it

    def as_json(self) -> NightJson:
        """As selection.json keeps it (schemas.NightControl)."""
        return {
            "method": "lord",
            "fdr": self.fdr,
            "decision_index": self.index,
            "earlier_promotions": self.promotions,
        }


def lord(outcomes: Sequence[bool], fdr: float) -> Night:
    """The next decision's α after `outcomes` (True: promoted), in the order they were made."""
    t = len(outcomes) + 1
    wins = [i + 1 for i, won in enumerate(outcomes) if won]
    w0 = fdr / 2
    alpha = gamma(t) * w0
    if wins:
        alpha += (fdr - w0) * gamma(t - wins[0])
        alpha += fdr * math.fsum(gamma(t - tau) for tau in wins[1:])
    return Night(alpha, fdr, t, len(wins))


def _number(label: str) -> tuple[int, str]:
    digits = label[1:] if label[:1] == "v" else ""
    return (int(digits), label) if digits.isdigit() else (10**9, label)


class RuleRow(TypedDict):
    """A decision as the family counts it (store/decisions.rule_rows)."""

    version: str
    phase: str | None
    decision: str


def night_of(rows: Sequence[RuleRow], label: str, fdr: float) -> Night:
    """The Night for `label` from the decisions rows (version, phase, decision) of the run
    (store/decisions.rule_rows): the rule's decisions of versions numbered before it, in
    version-number order."""
    mine = _number(label)
    made = sorted(
        (r for r in rows if r["phase"] in RULE_PHASES and _number(r["version"]) < mine),
        key=lambda r: _number(r["version"]),
    )
    return lord([r["decision"] == "won" for r in made], fdr)


def for_decision(rows: Sequence[RuleRow], selection: Any, label: str) -> Night | None:
    """The Night of `label` under selection.night = lord (FDR = 1 − confidence), else None: each
    decision then keeps the whole 1 − confidence."""
    if selection.night != "lord" or selection.rule != "sequential":
        return None
    return night_of(rows, label, 1 - selection.confidence)


def summary(rows: Sequence[RuleRow], fdr: float | None, alpha: float = 0.05) -> str:
    """The sentence status and the report show: how many promotions, and what bounds them (fdr
    None: no family control, each decision at `alpha`)."""
    decided = [r for r in rows if r["phase"] in RULE_PHASES]
    won = sum(r["decision"] == "won" for r in decided)
    noun = "promotion" if won == 1 else "promotions"
    if fdr is None:
        # What α × decisions counts: promotions by chance had every child been no better than
        # its parent, an upper bound on the false ones among those made only when it is smaller.
        chance = alpha * len(decided)
        bound = (
            f"so on average at most {chance:.1f} of these {won} are false"
            if chance < won
            else f"more than the {won} made, so this bounds nothing: any of them may be false"
        )
        return (
            f"{won} {noun} in {plural(len(decided), 'decision')}, each at most {alpha:.0%} likely to "
            f"promote a child no better than its parent; had all {len(decided)} children been "
            f"no better, {chance:.1f} promotions would be expected by chance, {bound} "
            "(the night's promotions are not held to a false-discovery rate: selection.night "
            "= none)."
        )
    return (
        f"{won} {noun} in {plural(len(decided), 'decision')}; at most {fdr:.0%} of such promotions are "
        "false on average (online false-discovery control, LORD++)."
    )
