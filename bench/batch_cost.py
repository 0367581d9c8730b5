"""Money per iteration with batch mode against without, on the simulator: the same optimizer run
(csv-report, same seed) twice through the command line, once with --batch. Never a timed test;
prints a table. The batch discount (50%) covers the grader, comparator and analyzer calls only;
the executor and proposer calls cost the same either way, so the ratio is above one half."""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from optimizer.report import spend

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "csv-report"
COVERED = ("grader", "comparator", "analyzer")


def run(run_dir: Path, iterations: int, batch: bool) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPTIMIZER_", "ANTHROPIC_"))}
    args = [
        sys.executable,
        "-m",
        "optimizer",
        "run",
        str(EXAMPLE),
        "--provider",
        "sim",
        "--max-iterations",
        str(iterations),
        "--run-dir",
        str(run_dir),
        "--fresh",
    ]
    if batch:  # the simulator answers at once; poll it often so the wall time stays comparable
        args += ["--batch", "--set", "llm.batch_poll_s=0.01", "--set", "llm.batch_settle_s=0.02"]
    started = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, text=True, env=env, cwd=ROOT)
    return time.perf_counter() - started


def by_role(run_dir: Path) -> dict[str, float]:
    conn = sqlite3.connect(f"file:{run_dir / 'state.db'}?mode=ro", uri=True)
    try:
        return {
            role: cost
            for role, cost in conn.execute(
                "select role, sum(cost_usd) from calls where outcome = 'ok' group by role"
            )
        }
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    rows = {}
    try:
        for mode in ("direct", "batch"):
            folder = tmp / mode
            wall = run(folder, args.iterations, mode == "batch")
            info = spend.estimate_vs_actual(folder)
            roles = by_role(folder)
            rows[mode] = {
                "wall": wall,
                **info["actual"],
                "estimate": info["expected_per_iteration_usd"],
                "covered": sum(roles.get(r, 0.0) for r in COVERED),
                "other": sum(v for r, v in roles.items() if r not in COVERED),
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"csv-report on the simulator, {args.iterations} iterations, seed 0\n")
    print(
        "| mode | total $ | setup $ | per iteration $ | estimated per iteration $ | "
        "grader+comparator+analyzer $ | executor+proposer $ | batched calls / calls | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, r in rows.items():
        print(
            f"| {mode} | {r['usd']:.3f} | {r['setup_usd']:.3f} | {r['usd_per_iteration']:.3f} | "
            f"{r['estimate']:.3f} | {r['covered']:.3f} | {r['other']:.3f} | "
            f"{r['batched_calls']} / {r['calls']} | {r['wall']:.1f} |"
        )
    d, b = rows["direct"], rows["batch"]
    print()
    print(f"per iteration: batch / direct = {b['usd_per_iteration'] / d['usd_per_iteration']:.2f}")
    print(f"whole run:     batch / direct = {b['usd'] / d['usd']:.2f}")
    print(
        f"covered roles: batch / direct = {b['covered'] / d['covered']:.2f} (the discount itself)"
    )


if __name__ == "__main__":
    main()
