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
    return json.loads(resources.files("optimizer.data").joinpath("power.json").read_text(encoding="utf-8"))


def effect() -> float:
    return float(table()["effect"])


def power_at(n_evals: int, scope: Scope = "general") -> float:
    """The measured power at n_evals, linear between measured counts, clamped outside them."""
    points = sorted((int(k), float(v)) for k, v in table()["scope"][scope].items())
    if n_evals <= points[0][0]:
        return points[0][1]
    for (n0, p0), (n1, p1) in zip(points, points[1:], strict=False):
        if n_evals <= n1:
            return p0 + (p1 - p0) * (n_evals - n0) / (n1 - n0)
    return points[-1][1]


def line(n_now: int, n_next: int | None = None, *, scope: Scope = "general", what: str = "train evals") -> str:
    """One sentence: the power now and, when the count will change, with the new count."""
    gain = f"+{effect():.2f}"
    now = f"with {n_now} {what} a {gain} gain is found {power_at(n_now, scope):.0%} of the time"
    if n_next is None or n_next == n_now:
        return now
    return f"{now}; with {n_next}, {power_at(n_next, scope):.0%}"
