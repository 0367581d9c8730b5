"""How likely a run is to find a real +0.10 gain with a given number of evals, read from the
selection bench's table (optimizer/data/power.json). Never extrapolate past the measured counts."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, Literal

Scope = Literal["tasks", "general"]


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(
        resources.files("optimizer.data").joinpath("power.json").read_text(encoding="utf-8")
    )


def effect() -> float:
    return float(table()["effect"])


def claim(n_evals: int, scope: str = "auto", few_evals: int = 10) -> Scope:
    """The claim a promotion over n_evals evals makes (selection.scope; "auto" is `tasks` below
    selection.few_evals evals, where `general` has too few units to find anything, and
    `general` from there on). decide/step.claim_scope decides by this one rule."""
    if scope == "auto":
        return "tasks" if n_evals < few_evals else "general"
    if scope not in ("tasks", "general"):
        raise ValueError(f"unknown scope {scope!r}: use tasks, general or auto")
    return "tasks" if scope == "tasks" else "general"


def power_at(n_evals: int, scope: str = "auto", *, few_evals: int = 10) -> float:
    """The measured power at n_evals for the claim made there, linear between measured counts,
    clamped outside them."""
    points = sorted(
        (int(k), float(v)) for k, v in table()["scope"][claim(n_evals, scope, few_evals)].items()
    )
    if n_evals <= points[0][0]:
        return points[0][1]
    for (n0, p0), (n1, p1) in zip(points, points[1:], strict=False):
        if n_evals <= n1:
            return p0 + (p1 - p0) * (n_evals - n0) / (n1 - n0)
    return points[-1][1]


_CLAIMS = {"tasks": "better on these tasks", "general": "better in general"}


def line(
    n_now: int,
    n_next: int | None = None,
    *,
    scope: str = "auto",
    few_evals: int = 10,
    what: str = "train evals",
) -> str:
    """One sentence: the power now and, when the count will change, with the new count; each
    names the claim a promotion would make at that count."""
    gain = f"+{effect():.2f}"

    def found(n: int) -> str:
        return (
            f"{power_at(n, scope, few_evals=few_evals):.0%} of the time "
            f"({_CLAIMS[claim(n, scope, few_evals)]})"
        )

    now = f"with {n_now} {what} a {gain} gain is found {found(n_now)}"
    if n_next is None or n_next == n_now:
        return now
    was, will = claim(n_now, scope, few_evals), claim(n_next, scope, few_evals)
    if was == will:
        return f"{now}; with {n_next}, {found(n_next)}"
    # Past few_evals a run makes the stronger claim, which is harder to find: a lower figure
    # there is a harder question, not fewer evals' worth; the same claim's figure says so.
    same = power_at(n_next, was, few_evals=few_evals)
    return (
        f"{now}; with {n_next}, {found(n_next)}, a stronger claim than with {n_now} "
        f"({_CLAIMS[was]} at {n_next}: {same:.0%})"
    )
