"""Loop overhead: the wall time of each phase of a simulated run (the baseline, each iteration)
against the ideal of its model calls alone, ceil(calls / concurrency) x latency. Never a timed
test; prints a table and the ratios.

    .venv/bin/python bench/overhead.py [--latency-ms 50] [--iterations 2] [--concurrency 8]

The calls of a phase are the ledger rows it added (answers served from the ledger cost no
latency). The ideal assumes every call of a phase could be in flight at once up to the limit;
the agent's turns and the judge after each run are sequential, so a ratio above 1 is the price
of those dependencies plus our own work (sandbox, files, SQLite, statistics)."""

from __future__ import annotations

import argparse
import io
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

from optimizer import config, daemon, logs  # noqa: E402 - the bench runs from a checkout
from optimizer.model import factory as llm  # noqa: E402 - the bench runs from a checkout
from optimizer.search import engine  # noqa: E402 - the bench runs from a checkout
from optimizer.search.body import BodyTarget  # noqa: E402 - the bench runs from a checkout

EXAMPLE = ROOT / "examples" / "csv-report"


@dataclass
class Phase:
    name: str
    calls: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    ledger: dict = field(default_factory=dict)  # token and cost sums the phase added


LEDGER_SUMS = (
    "count(*) as calls, coalesce(sum(input_tokens),0) as input_tokens, "
    "coalesce(sum(output_tokens),0) as output_tokens, "
    "coalesce(sum(cache_write_tokens),0) as cache_write_tokens, "
    "coalesce(sum(cache_read_tokens),0) as cache_read_tokens, "
    "coalesce(sum(cost_usd),0) as cost_usd"
)


def _ledger(store) -> dict:
    row = store.query(f"select {LEDGER_SUMS} from calls where outcome = 'ok'")[0]
    hits = store.query("select count(*) as n, coalesce(sum(saved_usd),0) as saved from cache_hits")[
        0
    ]
    return {**row, "cache_hits": hits["n"], "saved_usd": hits["saved"]}


def instrumented_run(
    run_dir: Path, *, overrides: list[str], iterations: int, skill_dir: Path = EXAMPLE
) -> tuple[list[Phase], dict]:
    """One `optimizer run` in this process, with the ledger read before and after the baseline
    and each iteration; returns the phases and the client's own stats."""
    phases: list[Phase] = []
    seen: dict = {}
    original_iterate, original_start, original_client = (
        engine.iterate,
        BodyTarget.start,
        llm.make_client,
    )

    async def measured(name: str, run, work) -> None:
        before, wall, cpu = _ledger(run.store), time.perf_counter(), time.process_time()
        await work
        after = _ledger(run.store)
        diff = {k: after[k] - before[k] for k in after}
        phases.append(
            Phase(name, diff["calls"], time.perf_counter() - wall, time.process_time() - cpu, diff)
        )

    async def iterate(run, target, n):
        await measured(f"iteration {n}", run, original_iterate(run, target, n))

    async def start(target):
        await measured("baseline + v0", target.run, original_start(target))

    def make_client(*args, **kwargs):
        seen["client"] = original_client(*args, **kwargs)
        return seen["client"]

    engine.iterate, BodyTarget.start, llm.make_client = iterate, start, make_client
    try:
        flags = {"llm.provider": "sim", "loop.max_iterations": iterations}
        daemon.start(
            daemon.NewRun(skill_dir, run_dir=run_dir, fresh=True),
            lambda eval_config: config.load(
                None, eval_config=eval_config, env={}, overrides=overrides, flags=flags
            ),
            Console(file=io.StringIO()),
        )
    finally:
        engine.iterate, BodyTarget.start, llm.make_client = (
            original_iterate,
            original_start,
            original_client,
        )
        logs.reset()
    client = seen["client"]
    return phases, {**client.stats(), "max_in_flight": client.limiter.max_in_flight}


def print_table(title: str, header: list[str], rows: list[list[str]], notes: list[str]) -> None:
    console = Console(width=170)
    from rich.table import Table

    table = Table(title=title)
    for i, column in enumerate(header):
        table.add_column(column, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for note in notes:
        console.print(note, markup=False, highlight=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=config.Llm().max_concurrency)
    args = parser.parse_args()
    overrides = [f"sim.latency_ms={args.latency_ms:g}", f"llm.max_concurrency={args.concurrency}"]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        phases, stats = instrumented_run(
            Path(tmp) / "run", overrides=overrides, iterations=args.iterations
        )
    total = time.perf_counter() - started
    latency = args.latency_ms / 1000
    rows = []
    for p in phases:
        ideal = math.ceil(p.calls / args.concurrency) * latency
        rows.append(
            [
                p.name,
                str(p.calls),
                str(p.ledger["cache_hits"]),
                f"{p.wall:.2f}",
                f"{ideal:.2f}",
                f"{p.wall / ideal:.2f}" if ideal else "-",
                f"{p.cpu:.2f}",
                f"{p.cpu / p.calls * 1000:.1f}" if p.calls else "-",
            ]
        )
    loop_phases = [p for p in phases if p.name.startswith("iteration")]
    calls = sum(p.calls for p in loop_phases)
    wall = sum(p.wall for p in loop_phases)
    ideal = sum(math.ceil(p.calls / args.concurrency) * latency for p in loop_phases)
    rows.append(
        [
            "all iterations",
            str(calls),
            str(sum(p.ledger["cache_hits"] for p in loop_phases)),
            f"{wall:.2f}",
            f"{ideal:.2f}",
            f"{wall / ideal:.2f}" if ideal else "-",
            f"{sum(p.cpu for p in loop_phases):.2f}",
            f"{sum(p.cpu for p in loop_phases) / calls * 1000:.1f}" if calls else "-",
        ]
    )
    print_table(
        f"Iteration wall time against ceil(calls / {args.concurrency}) x {args.latency_ms:g} ms "
        f"(simulated run of examples/csv-report, {args.iterations} iterations)",
        [
            "phase",
            "model calls",
            "ledger hits",
            "wall s",
            "ideal s",
            "ratio",
            "CPU s",
            "CPU ms/call",
        ],
        rows,
        [
            f"max calls in flight: {stats['max_in_flight']} (limit {args.concurrency}); retries: "
            f"{stats['retries'] or 'none'}; whole run {total:.1f} s including the sealed test",
            "ratio = wall / ideal; above 1 = sequential turns (agent loop, judge after each run, "
            "comparator after both) plus our own CPU per call (last column).",
        ],
    )


if __name__ == "__main__":
    main()
