"""The world's ceiling for the headroom figure: the best sealed-test score any skill could reach.
A world that states its ceiling (the simulator's latent world, optimizer/sim/latent.py, where it
exists) is asked, with the world's own settings; else the score's maximum, 1.0, is the bound, and
the figure says which."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

SCALE_MAX = 1.0


def ceiling(arena: Any) -> tuple[float, str]:
    """(ceiling of the sealed test split, where it came from)."""
    try:
        latent = importlib.import_module("optimizer.sim.latent")
    except ImportError:
        return SCALE_MAX, "the score's maximum (this world states no ceiling)"
    fields = {f.name for f in dataclasses.fields(latent.World)}
    sim = arena.settings.sim.model_dump()
    world = latent.World(**{k: v for k, v in sim.items() if k in fields})
    evals = [(str(e), list(arena.target.evalset.by_id(e).expectations)) for e in arena.test]
    # Judged expectations only (the world's ceiling leaves structural checks and rubrics aside).
    return float(latent.ceiling(evals, world).mean), "the world's own ceiling (judged expectations)"
