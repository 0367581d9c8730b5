"""A skill's judged pass rate in the simulated world, measured the way a run measures it (the
simulated agent writes, the simulated judge checks) but without the API round trip: what the
tests and benches compare skills by. Never reads the hidden causes to decide what to expect."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from optimizer.sim.compose import compose_output, instruction_lines, references
from optimizer.sim.latent import World
from optimizer.sim.support import support
from optimizer.sim.text import split_front_matter


def expectations(ev: Mapping[str, Any]) -> list[str]:
    """An eval's judged statements, in either seed form (strings, or assertions with text)."""
    found = ev.get("expectations") or [a["text"] for a in ev.get("assertions", [])]
    return [str(t) for t in found]


def pass_rate(
    skill: str,
    evals: Iterable[Mapping[str, Any]],
    world: World | None = None,
    runs: int = 100,
    folder: Path | None = None,
) -> float:
    """The share of judged expectations met over `runs` runs of every eval (seeds 0..runs-1),
    before judge noise: a skill's score in this world, up to sampling noise. With the skill's
    `folder`, the agent reads each eval's input files first, as in a run."""
    world = world or World()
    body = split_front_matter(skill)[1]
    passed = total = 0
    for ev in evals:
        texts = expectations(ev)
        lines = instruction_lines(body)
        for path in references(body, ev["prompt"]) if folder is not None else []:
            # The skill's own files the task needs are read, as in a run (sim/world.py).
            own = folder / path if folder is not None else None
            if own is not None and own.is_file():
                lines += instruction_lines(own.read_text(errors="replace"))
        read = "\n".join(
            (folder / f).read_text(errors="replace") for f in ev.get("files", []) if folder
        )
        for k in range(runs):
            output = compose_output(ev["prompt"], lines, random.Random(k), world, read)
            files = [{"path": "outputs/answer.md", "content": output}]
            passed += sum(support(t, files, ev["prompt"], world).passed for t in texts)
            total += len(texts)
    return passed / total if total else 0.0


def hand_written(root: Path) -> list[tuple[str, str, list[str], list[dict]]]:
    """The skills under `root` that come with hand-written clear instructions (tests/fixtures/
    foreign): (name, SKILL.md, the lines of clear.md, the evals), by name. What the world's tests
    and bench/world_gaming.py measure the world on; nothing in them is built from the world."""
    found = []
    for folder in sorted(p for p in root.iterdir() if (p / "clear.md").is_file()):
        clear = (folder / "clear.md").read_text().strip().splitlines()
        evals = json.loads((folder / "evals" / "evals.json").read_text())["evals"]
        found.append((folder.name, (folder / "SKILL.md").read_text(), clear, evals))
    return found
