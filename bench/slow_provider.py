"""What a slow model provider does to a benchmark's runs with a short time limit: every eval of a
skill with and without it, against the simulator at several latencies per call, with
execute.timeout_s = 5. Before the run clock a provider at 3 s a call turned every run into a
`timeout` scored 0; now the waiting is left out of the limit and recorded in metrics.json. The
last row is a skill whose command sleeps past the limit: still a timeout, scored 0. Never a
timed test; prints a table.

    python bench/slow_provider.py [SKILL_DIR] [--latencies 0,1000,3000] [--timeout 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from optimizer.cli import app

ROOT = Path(__file__).resolve().parents[1]


def bench(skill: Path, out: Path, *flags: str) -> list[dict]:
    result = CliRunner().invoke(
        app,
        ["benchmark", str(skill), "--runs", "1", "--out", str(out), "--provider", "sim", *flags],
    )
    if result.exit_code not in (0, 1):
        raise SystemExit(f"benchmark failed ({result.exit_code}): {result.output[-2000:]}")
    return [
        json.loads(p.read_text()) for p in sorted(out.glob("eval-*/*/run-*/outputs/metrics.json"))
    ]


def row(table: Table, label: str, runs: list[dict]) -> None:
    statuses = Counter(m["status"] for m in runs)
    skill = [m.get("skill_seconds") or 0.0 for m in runs]
    wait = [m.get("model_wait_seconds") or 0.0 for m in runs]
    table.add_row(
        label,
        str(len(runs)),
        str(statuses.get("ok", 0)),
        str(statuses.get("timeout", 0)),
        str(statuses.get("unscored", 0)),
        str(sum(statuses.values()) - statuses["ok"] - statuses["timeout"] - statuses["unscored"]),
        f"{statistics.mean(skill):.2f}",
        f"{max(skill):.2f}",
        f"{statistics.mean(wait):.2f}",
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("skill", nargs="?", default=str(ROOT / "examples" / "csv-report"))
    parser.add_argument("--latencies", default="0,1000,3000")
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args()
    limit = ("--set", f"execute.timeout_s={args.timeout:g}")
    table = Table(
        title=f"{Path(args.skill).name}: every eval with and without the skill, 1 run "
        f"each, execute.timeout_s = {args.timeout:g}"
    )
    for col in (
        "provider",
        "runs",
        "ok",
        "timeout (scored 0)",
        "unscored",
        "other",
        "skill s (mean)",
        "skill s (max)",
        "waiting s (mean)",
    ):
        table.add_column(col, justify="right")
    with tempfile.TemporaryDirectory(prefix="bench-slow-") as tmp:
        for latency in (float(x) for x in args.latencies.split(",")):
            runs = bench(
                Path(args.skill),
                Path(tmp) / f"l{latency:g}",
                *limit,
                "--set",
                f"sim.latency_ms={latency:g}",
            )
            row(table, f"{latency / 1000:g} s a call", runs)
        sleeper = ("--executor", "command", "--set", "execute.command=sleep 30", *limit)
        row(
            table, "a command sleeping 30 s", bench(Path(args.skill), Path(tmp) / "sleep", *sleeper)
        )
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
