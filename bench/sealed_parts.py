"""What a night's final gains or loses on the sealed evals, part by part, as the product scores a
run: the share of runs whose structural gate passed, the judged pass rate, the rubric and the
score, for v0 and the version ours' night ends with, on fresh runs (bench/peers/product.py's
Arena.product). Where the world's expected score (judged expectations only) and the product's score
part, this says which part moved.

    .venv/bin/python bench/sealed_parts.py --skill csv-report --seed 7906 --budget-usd 4 --runs 40
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

from peers.arena import Arena, run_settings  # noqa: E402 - the bench runs from a checkout
from peers.methods import run_method  # noqa: E402

SKILLS = {
    "csv-report": BENCH.parent / "examples" / "csv-report",
    "release-notes": BENCH / "peers" / "skills" / "release-notes",
}


Parts = tuple[str, float | None, float, float, float, str]


def _failed(arena: Arena, label: str) -> str:
    """The critical structural checks that failed, with how many runs each: 'S2 × 16'."""
    counts: dict[str, int] = {}
    for row in arena.store.query(
        "select structural_json from gradings where prefix = ? order by key", [f"measure/{label}/"]
    ):
        for check in json.loads(row["structural_json"] or "{}").get("expectations", []):
            if check.get("critical") and not check.get("passed"):
                counts[check["id"]] = counts.get(check["id"], 0) + 1
    return ", ".join(f"{k} × {n}" for k, n in sorted(counts.items())) or "none"


async def parts(run_dir: Path, runs: int) -> list[Parts]:
    """(label, score, gate passed, judged pass rate, rubric, critical checks failed) of v0 and the
    run's best."""
    arena = Arena(run_dir)
    try:
        out = []
        for label in dict.fromkeys(["v0", arena.run.best()]):
            score = await arena.product(label, runs)
            row = arena.store.query(
                "select avg(gate_passed) as gate, avg(pass_rate) as rate, "
                "avg(coalesce(rubric_normalized, 0)) as rubric from gradings where prefix = ?",
                [f"measure/{label}/"],
            )[0]
            out.append(
                (label, score, row["gate"], row["rate"], row["rubric"], _failed(arena, label))
            )
        return out
    finally:
        await arena.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skill", choices=sorted(SKILLS), default="csv-report")
    parser.add_argument("--seed", type=int, default=7906)
    parser.add_argument("--budget-usd", type=float, default=4.0)
    parser.add_argument("--runs", type=int, default=40, help="fresh runs a sealed eval")
    args = parser.parse_args(argv)
    if args.runs < 1 or not args.budget_usd > 0:
        print("--runs must be at least 1 and --budget-usd positive, e.g. --runs 40 --budget-usd 4.")
        return 2
    skill = SKILLS[args.skill]
    with tempfile.TemporaryDirectory(prefix="sealed-parts-") as tmp:
        run_dir = Path(tmp) / "ours"
        night = run_method(
            "ours", skill, run_dir, run_settings(skill, args.seed, []), args.budget_usd
        )
        rows = asyncio.run(parts(run_dir, args.runs))
    print(
        f"{args.skill} seed {args.seed}, ours at ${args.budget_usd:g} (${night.usd:.2f} spent), "
        f"{args.runs} fresh runs a sealed eval:"
    )
    print("| version | score | gate passed | judged pass rate | rubric | critical checks failed |")
    print("|---|---|---|---|---|---|")
    for label, score, gate, rate, rubric, failed in rows:
        shown = "-" if score is None else f"{score:.3f}"
        print(f"| {label} | {shown} | {gate:.0%} | {rate:.3f} | {rubric:.2f} | {failed} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
