"""How much the model client adds to a call: N distinct calls at concurrency c against the simulator
at a fixed latency, wall time against ceil(N/c) x latency. Never a timed test; just prints a table."""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
import time
from pathlib import Path

import anthropic
import httpx2

from optimizer import logs
from optimizer.config import Settings
from optimizer.model import make_client
from optimizer.sim import Simulator
from optimizer.store.db import Store

PROMPT = "Summarise the attached notes in three bullet points.\n" + "Notes: the build is green. " * 40


def _messages(i: int) -> list[dict]:
    return [{"role": "user", "content": PROMPT}]


async def bare_sdk(calls: int, concurrency: int, latency_ms: float) -> dict:
    """The floor: the SDK and the simulator alone, under a plain semaphore."""
    sim = Simulator(seed=0, latency_ms=latency_ms)
    sdk = anthropic.AsyncAnthropic(
        api_key="sim-key", base_url="http://sim.invalid", max_retries=0, timeout=60.0,
        http_client=httpx2.AsyncClient(transport=sim.transport()),
    )
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            await sdk.messages.create(
                model="claude-sonnet-4-5", max_tokens=1024, messages=_messages(i),
                extra_headers={"x-optimizer-role": "executor", "x-optimizer-sample": str(i)},
            )

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(i) for i in range(calls)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    await sdk.close()
    return {"wall": wall, "cpu": cpu, "max_in_flight": sim.stats.max_in_flight, "calls": sim.stats.calls}


async def model_client(calls: int, concurrency: int, latency_ms: float, folder: Path,
                       budget: float | None) -> dict:
    """The whole client: hashing, ledger lookup and insert, budget, limiter, retries, logging."""
    logs.configure(folder / "optimizer.log", console=False)
    settings = Settings.model_validate({"llm": {"provider": "sim", "max_concurrency": concurrency,
                                                "max_tokens": 1024}})
    store = Store(folder / "state.db")
    sim = Simulator(seed=0, latency_ms=latency_ms)
    client = make_client(settings, store, simulator=sim, budget_usd=budget)
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(
        client.message("executor", messages=_messages(i), sample=i) for i in range(calls)
    ))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stats = client.stats()
    await client.aclose()
    rows = store.query("select count(*) as n from calls where outcome = 'ok'")[0]["n"]
    store.close()
    logs.reset()
    return {"wall": wall, "cpu": cpu, "max_in_flight": sim.stats.max_in_flight,
            "calls": sim.stats.calls, "rows": rows, "stats": stats}


def _ledger_write_cost(folder: Path, n: int = 500) -> float:
    """Seconds per ledger insert (one committed upsert), measured alone."""
    store = Store(folder / "writes.db")
    row = {"role": "executor", "model": "claude-sonnet-4-5", "sample": 0, "outcome": "ok",
           "response_json": "{}" * 200, "input_tokens": 300, "output_tokens": 40,
           "cache_write_tokens": 0, "cache_read_tokens": 0, "cost_usd": 0.001,
           "latency_ms": 50.0, "attempts": 1, "error": None}
    start = time.perf_counter()
    for i in range(n):
        store.record_call({**row, "hash": f"h{i}"})
    elapsed = (time.perf_counter() - start) / n
    store.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Run: .venv/bin/python bench/llm_overhead.py [--calls N] [--concurrency C] [--latency-ms L]")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    ideal = math.ceil(args.calls / args.concurrency) * args.latency_ms / 1000
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        floor = asyncio.run(bare_sdk(args.calls, args.concurrency, args.latency_ms))
        ours = asyncio.run(model_client(args.calls, args.concurrency, args.latency_ms,
                                        folder / "a", budget=None))
        budgeted = asyncio.run(model_client(args.calls, args.concurrency, args.latency_ms,
                                            folder / "b", budget=1000.0))
        write_s = _ledger_write_cost(folder)
    rows = [("SDK + simulator only", floor), ("ModelClient, no budget", ours),
            ("ModelClient, with budget", budgeted)]
    title = (f"{args.calls} calls, concurrency {args.concurrency}, simulator latency "
             f"{args.latency_ms:g} ms; ideal ceil({args.calls}/{args.concurrency}) x latency = {ideal:.2f} s")
    header = ["path", "wall s", "ratio to ideal", "ratio to SDK floor", "CPU ms/call",
              "max in flight", "sim calls"]
    table = [[name, f"{r['wall']:.2f}", f"{r['wall'] / ideal:.3f}", f"{r['wall'] / floor['wall']:.3f}",
              f"{r['cpu'] / args.calls * 1000:.2f}", str(r["max_in_flight"]), str(r["calls"])]
             for name, r in rows]
    notes = [f"ledger insert alone (committed, WAL, synchronous=NORMAL): {write_s * 1e6:.0f} us",
             f"ledger rows written: {ours['rows']}; retries: {ours['stats']['retries'] or 'none'}",
             "target: ratio <= 1.15 for the ModelClient rows"]
    try:
        from rich.console import Console
        from rich.table import Table

        rich_table = Table(title=title)
        for column in header:
            rich_table.add_column(column, justify="left" if column == "path" else "right")
        for line in table:
            rich_table.add_row(*line)
        console = Console(width=120)
        console.print(rich_table)
        for note in notes:
            console.print(note)
    except ImportError:
        print(title)
        print(" | ".join(header))
        for line in table:
            print(" | ".join(line))
        print("\n".join(notes))


if __name__ == "__main__":
    main()
