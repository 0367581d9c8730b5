"""What a 5% promotion test must pay in bench/peers.py's worlds: the run-to-run standard deviation
of a score (within one eval, pooled over every version with 3 or more runs on it) from our
engine's runs, and the runs per eval a fixed-sample one-sided test at α = 5% that knew that
variance would need to find +0.10 with 80% power: 2σ²(z₀.₉₅ + z₀.₈)² / (Δ² · train evals).
Never a timed test; prints one table.

    PYTHONPATH=. .venv/bin/python bench/run_noise.py [--seeds 151-160] [--skills csv-report,release-notes]

Each world is `optimizer run` on the simulator with the peers bench's settings for that seed
(bench/peers/arena.py run_settings) and its $4 budget; docs/peers.md quotes the figures."""

from __future__ import annotations

import argparse
import importlib.util
import math
import sqlite3
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from statistics import NormalDist, fmean, variance

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from peers.arena import run_settings, start_run  # noqa: E402 - the bench runs from a checkout

# bench/peers.py shares its name with the bench/peers/ package: loaded by path for its skills.
_spec = importlib.util.spec_from_file_location("peers_bench", BENCH / "peers.py")
assert _spec is not None and _spec.loader is not None
peers_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peers_bench)

DELTA, ALPHA, POWER = 0.10, 0.05, 0.80


def run_variances(state_db: Path) -> tuple[list[float], int]:
    """Within-eval variances of each (version, train eval) with 3 or more scored runs, and the
    number of train evals."""
    conn = sqlite3.connect(state_db)
    try:
        scores: dict[tuple[str, int], list[float]] = defaultdict(list)
        rows = conn.execute(
            "select prefix, eval_id, score from gradings where configuration = 'with_skill' "
            "and score is not null and prefix like 'v%' order by prefix, eval_id, run_number"
        )
        for prefix, eval_id, score in rows:
            scores[(prefix.split("/")[0], eval_id)].append(score)
    finally:
        conn.close()
    return [variance(v) for v in scores.values() if len(v) >= 3], len({e for _, e in scores})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="151-160", help="A-B: one world per seed and skill")
    parser.add_argument("--skills", default=",".join(peers_bench.DEFAULT_SKILLS))
    args = parser.parse_args(argv)
    z = NormalDist().inv_cdf(1 - ALPHA) + NormalDist().inv_cdf(POWER)
    print(
        f"skill | worlds | train evals | run sd | runs per eval of each version (+{DELTA:.2f}, "
        f"α {ALPHA:.0%}, power {POWER:.0%}) | runs for one child"
    )
    with tempfile.TemporaryDirectory(prefix="run-noise-") as tmp:
        for skill in args.skills.split(","):
            pooled, evals = [], 0
            seeds = peers_bench.parse_seeds(args.seeds)
            skill_dir = peers_bench.SKILLS[skill]
            for seed in seeds:
                run_dir = Path(tmp) / f"{skill}-{seed}"
                start_run(skill_dir, run_dir, run_settings(skill_dir, seed, []), {"budget.usd": 4})
                found, evals = run_variances(run_dir / "state.db")
                pooled += found
            s2 = fmean(pooled)
            runs = 2 * s2 * z * z / (DELTA**2 * evals)
            print(
                f"{skill} | {len(seeds)} | {evals} | {math.sqrt(s2):.3f} | {runs:.1f} | "
                f"{runs * evals:.0f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
