"""The sealed test as the product scores it (`bench/peers.py --sealed product`): every method's
final SKILL.md run afresh on the sealed evals in one measuring arena, the world's, and scored as
the product scores a run (structural checks and their gate, judged expectations, the rubric).

Why a second ruler: the world's expected score (Arena.measure) counts judged expectations only,
while every method searches on the product's score, which also counts the structural checks the
user marked critical (a lost title heading gates a run) and the rubric. A version that drops the
title heading in half its runs keeps its judged score and loses half of what the user's evals
check. The same text gets the same runs (the arena labels texts by content), so v0 measured for
every method is one number and two finals differ by their texts and the runs' draws only."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from optimizer.store.files import Workspace
from peers.arena import Arena
from peers.methods import Outcome


def remeasure(cell: dict[str, Outcome], dirs: dict[str, Path], runs: int) -> dict[str, Outcome]:
    """`cell`'s outcomes with `sealed` and `worse` read by the product's score at `runs` fresh
    runs a sealed eval, measured in the "original" method's arena; traces dropped (only the final
    choice is measured)."""
    return asyncio.run(_remeasure(cell, dirs, runs))


async def _remeasure(
    cell: dict[str, Outcome], dirs: dict[str, Path], runs: int
) -> dict[str, Outcome]:
    arena = Arena(dirs["original"])
    try:
        base_text = arena.skill_md("v0")
        base = await arena.product("v0", runs)
        out = {}
        for method, o in cell.items():
            text = (Workspace(dirs[method]).skill(o.final) / "SKILL.md").read_text(encoding="utf-8")
            label = "v0" if text == base_text else arena.add(text)
            score = base if label == "v0" else await arena.product(label, runs)
            worse = None if score is None or base is None else label != "v0" and score < base
            out[method] = replace(
                o,
                sealed=score,
                worse=worse,
                trace=None,
                ceiling=1.0,
                ceiling_source="the score's maximum (the product's score of fresh runs)",
            )
        return out
    finally:
        await arena.aclose()
