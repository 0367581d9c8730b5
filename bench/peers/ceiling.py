"""The world's ceiling for the headroom figure: the best sealed-test score any skill could reach.
A world that states its ceiling (the simulator's own function, when it has one) is asked; else
the score's maximum, 1.0, is the bound, and the figure says which."""

from __future__ import annotations

from typing import Any

SCALE_MAX = 1.0


def ceiling(arena: Any) -> tuple[float, str]:
    """(ceiling of the sealed test split, where it came from)."""
    try:
        from optimizer.sim import ceiling as world_ceiling  # type: ignore[attr-defined]
    except ImportError:
        return SCALE_MAX, "the score's maximum (this world states no ceiling)"
    evals = [arena.target.evalset.by_id(e) for e in arena.test]
    return float(world_ceiling(evals, arena.settings)), "the world's own ceiling"
