"""The verdict word beside an interval of Δ, for the decision and every view that prints one: one
function, so no view reads "tie" beside an interval wholly below zero."""

from __future__ import annotations

from typing import Literal

# A decision's verdict, the one definition every decision and view imports: the child won, lost,
# or neither was shown (a tie). An adoption reads the same three as certified, refused, undecided.
Verdict = Literal["won", "lost", "tie"]
Side = Literal["above", "below", "across"]


def side(low: float | None, high: float | None) -> Side | None:
    """Where the interval lies with respect to zero; None without one."""
    if low is None or high is None:
        return None
    if high < 0:
        return "below"
    if low > 0:
        return "above"
    return "across"


def word(decision: str | None, low: float | None, high: float | None) -> str | None:
    """The decision as a view prints it beside its interval: as made, except that a "tie" beside
    an interval wholly below zero is a loss at that interval's level (decisions made before the
    rule said so are read the way the rule reads them now). A tie above zero keeps its word: its
    reason says what it lacked (the minimum effect, the comparator)."""
    if decision == "tie" and side(low, high) == "below":
        return "lost"
    return decision
