"""Can the simulated world be bought? Each skill of tests/fixtures/foreign (and the examples) is
scored as written (v0), with clear instructions written by hand (v0 + clear.md), and under the
gaming edits of issue 39: irrelevant padding (as bullets or prose, short and long), one line of cue
words, one line of headings, and a verbatim checklist of the evals' expectations. Prints a table
of judged pass rates (100 runs an eval) and each edit's gain over v0 and over clear.

    .venv/bin/python bench/world_gaming.py [--runs 100] [--worlds 0 1 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer.sim.expected import expectations, hand_written, pass_rate  # noqa: E402
from optimizer.sim.latent import World  # noqa: E402
from optimizer.sim.world import Skill, load_chance  # noqa: E402

FOREIGN = ROOT / "tests" / "fixtures" / "foreign"

GARDEN = [
    "Water the tomatoes early in the morning so the leaves dry before noon.",
    "Mulch keeps the soil cool and holds moisture through the dry weeks of summer.",
    "Prune the roses back to an outward facing bud in late winter.",
    "Compost needs green and brown material in roughly equal parts.",
    "Sow beans directly into warm soil after the last frost has passed.",
    "A trellis along the south fence gives climbing peas all the light they want.",
    "Slugs come out after rain, so check the lettuce beds in the evening.",
    "Divide the irises every few years to keep them flowering well.",
    "Rainwater from the shed roof fills the barrel by the greenhouse door.",
    "Lavender prefers poor, well drained ground and full sun.",
    "Stake the dahlias before they grow tall enough to fall over in the wind.",
    "Leaf mould made from autumn leaves improves heavy clay over a couple of seasons.",
]
CUES = (
    "summary outcome findings risks gaps caveats next steps owners cause fix impact customers "
    "affected structure sections order plain jargon figures values exact"
)
HEADINGS = "`## Summary` `## Notes` `## Next steps` `## Cause and fix` `## Impact` `## Sections`"


def garden(n: int) -> list[str]:
    return [
        GARDEN[k % len(GARDEN)].replace(".", f" (bed {k // len(GARDEN) + 1}).") for k in range(n)
    ]


def add(skill: str, lines: list[str]) -> str:
    return skill.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"


def variants(skill: str, clear: list[str], evals: list[dict]) -> dict[str, str]:
    restated = [f"- Make sure that: {t}" for ev in evals for t in expectations(ev)]
    return {
        "v0": skill,
        "clear": add(skill, clear),
        "pad 40 bullets": add(skill, [f"- {s}" for s in garden(40)]),
        "pad 166 bullets": add(skill, [f"- {s}" for s in garden(166)]),
        "pad 166 prose": add(skill, [" ".join(garden(166))]),
        "clear + pad 166": add(add(skill, clear), [f"- {s}" for s in garden(166)]),
        "cue-word line": add(skill, [f"- {CUES}"]),
        "headings line": add(skill, [f"- {HEADINGS}"]),
        "checklist": add(skill, restated),
    }


def skills() -> list[tuple[str, str, list[str], list[dict]]]:
    return hand_written(FOREIGN)


def loading() -> None:
    """How often each skill is loaded for its own evals' tasks and for the other skills' tasks."""
    folders = [
        ROOT / "examples" / "csv-report",
        *sorted(p for p in FOREIGN.iterdir() if p.is_dir()),
    ]
    found = []
    for folder in folders:
        front = (folder / "SKILL.md").read_text().split("---")[1]
        fields = dict(line.split(":", 1) for line in front.strip().splitlines() if ":" in line)
        skill = Skill(fields["name"].strip(), fields["description"].strip())
        prompts = [
            e["prompt"] for e in json.loads((folder / "evals" / "evals.json").read_text())["evals"]
        ]
        found.append((skill, prompts))
    print("skill loading (mean chance over the tasks): own evals / the other skills' evals")
    for skill, prompts in found:
        others = [p for s, ps in found if s is not skill for p in ps]
        own = sum(load_chance(p, skill) for p in prompts) / len(prompts)
        wrong = sum(load_chance(p, skill) for p in others) / len(others)
        print(f"  {skill.name:<14} {own:.2f} / {wrong:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--worlds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    loading()
    for w in args.worlds:
        world = World(world=w)
        print(f"world {w}, {args.runs} runs an eval (judged pass rate; gain over v0 / over clear)")
        for name, skill, clear, evals in skills():
            rates = {
                k: pass_rate(s, evals, world, args.runs)
                for k, s in variants(skill, clear, evals).items()
            }
            print(f"  {name}")
            for k, r in rates.items():
                print(f"    {k:<18} {r:.3f}   {r - rates['v0']:+.3f} / {r - rates['clear']:+.3f}")


if __name__ == "__main__":
    main()
