"""How close the cost preview comes to what a run spends, on the simulator: the estimate of
`optimizer run --dry-run` (the preview, computed before any call) against the ledger after the
same run, for 3 and 5 iterations of examples/csv-report. Prints one table; never a timed test.

    .venv/bin/python bench/preview_accuracy.py [--iterations 3 5]

Each run is `optimizer run examples/csv-report --provider sim --max-iterations N` in a temporary
folder, first with --dry-run (its "estimate:" line is shown), then for real; `optimizer status
--json` then gives the estimate the run recorded at its start (the same computation as the dry
run) and the actual spend from state.db. ratio = actual / estimate; the preview is meant to
land within 0.5x-2x ("typical": every candidate passes screening and no runs are added).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "csv-report"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "optimizer", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def measure(iterations: int, tmp: Path) -> dict:
    run_dir = tmp / f"run-{iterations}"
    common = [
        str(EXAMPLE),
        "--provider",
        "sim",
        "--max-iterations",
        str(iterations),
        "--run-dir",
        str(run_dir),
    ]
    dry = _cli("run", *common, "--dry-run")
    line = next((x for x in dry.stdout.splitlines() if x.startswith("estimate:")), "")
    done = _cli("run", *common, "--fresh")
    if done.returncode != 0:
        raise SystemExit(
            f"the run failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    status = json.loads(_cli("status", str(run_dir), "--json").stdout)
    got = status["estimate"]
    est, actual = got["estimate"], got["actual"]
    n = actual["iterations"]
    expected_calls = (
        est["setup"]["calls"] + n * est["per_iteration"]["calls"] + est["sealed_test"]["calls"]
    )
    return {
        "iterations": n,
        "dry_run_line": line,
        "rows": [
            ("setup (baseline and v0), USD", est["setup"]["usd"], actual["setup_usd"]),
            ("per iteration, USD", est["per_iteration"]["usd"], actual["usd_per_iteration"]),
            ("sealed test, USD", est["sealed_test"]["usd"], actual["sealed_test_usd"]),
            ("whole run, USD", got["expected_usd"], actual["usd"]),
            ("whole run, model calls", expected_calls, actual["calls"]),
        ],
        "at_most": est["run_max"]["usd"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, nargs="*", default=[3, 5])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(n, Path(tmp)) for n in args.iterations]
    print("Cost preview against the ledger (simulated provider, examples/csv-report)")
    head = f"{'iterations':>10} | {'part':<30} | {'estimate':>9} | {'actual':>9} | {'ratio':>6} | in 0.5x-2x"
    print(head)
    print("-" * len(head))
    for r in results:
        for part, estimate, actual in r["rows"]:
            ratio = actual / estimate if estimate else float("nan")
            ok = "yes" if 0.5 <= ratio <= 2.0 else "NO"
            shown = (
                f"{estimate:>9.0f} | {actual:>9.0f}"
                if "calls" in part
                else f"{estimate:>9.3f} | {actual:>9.3f}"
            )
            print(f"{r['iterations']:>10} | {part:<30} | {shown} | {ratio:>6.2f} | {ok}")
        print(f"{'':>10} | dry run said: {r['dry_run_line']}")
        print(
            f"{'':>10} | whole run 'at most' (every look adds runs up to the cap): "
            f"${r['at_most']:.3f}"
        )
    print(
        "ratio = actual / estimate. The estimate is 'typical' (no candidate stopped at "
        "screening, no runs added, both comparator orders asked for every pair): screening "
        "stops and first-order ties lower the actual, added runs raise it."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
