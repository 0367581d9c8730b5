"""The world's ceiling for the headroom figure: the best sealed-test score any skill could reach.
A simulator that states its world's ceiling (`Simulator.ceiling`, where it exists) is asked, with
the run's own simulator settings; else the score's maximum, 1.0, is the bound. The figure says
which it used."""

from __future__ import annotations

from typing import Any

SCALE_MAX = 1.0


def ceiling(arena: Any) -> tuple[float, str]:
    """(ceiling of the sealed test split, where it came from)."""
    from optimizer.sim import Simulator

    if not hasattr(Simulator, "ceiling"):
        return SCALE_MAX, "the score's maximum (this world states no ceiling)"
    simulator = Simulator.from_settings(arena.settings.sim)
    evals = [(str(e), list(arena.target.evalset.by_id(e).expectations)) for e in arena.test]
    # The world's ceiling is of judged expectations (structural checks and rubrics aside).
    return (
        float(simulator.ceiling(evals).mean),
        "the world's own (Simulator.ceiling, judged expectations)",
    )
