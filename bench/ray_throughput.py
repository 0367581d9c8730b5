"""Executor throughput: the local pool against a local Ray cluster at equal concurrency, on the
simulator (the anthropic executor, the csv-report example). Never a timed test; prints a table.

Each backend executes the same N runs (evals × runs, with and without the skill) at concurrency C
(Ray: a cluster of C CPUs, one CPU per run). The Ray cluster is started and warmed once before
the clock starts (its cold start is shown apart); at a simulated latency per model call the runs
are I/O-bound, as real ones are."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

from optimizer import logs
from optimizer.config import Settings
from optimizer.execute import get_executor
from optimizer.inputs import skill as skills
from optimizer.inputs.evals import load_evals
from optimizer.model import make_client, scoped
from optimizer.sim import Service, Simulator
from optimizer.store import ledger
from optimizer.store.db import Store

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "csv-report"


async def measure(backend: str, runs: int, concurrency: int, latency_ms: float, tmp: Path) -> dict:
    settings = Settings.model_validate(
        {
            "llm": {"provider": "sim"},
            "sim": {"latency_ms": latency_ms},
            "execute": {"backend": backend, "concurrency": concurrency},
        }
    )
    folder = tmp / f"{backend}-{latency_ms:g}"
    store = Store(folder / "state.db")
    client = make_client(
        settings, store, simulator=Simulator(seed=0, service=Service(latency_ms=latency_ms))
    )
    executor = get_executor(None, settings, client=client)
    snapshot = folder / "v0" / "skill"
    skills.snapshot(EXAMPLE, snapshot)
    evals = load_evals(EXAMPLE)
    slots = asyncio.Semaphore(concurrency)  # the grading unit's bound (execute.concurrency)

    async def one(n: int):
        ev = evals.evals[n % len(evals.evals)]
        with_skill = (n // len(evals.evals)) % 2 == 0
        config = "with_skill" if with_skill else "without_skill"
        number = n // (2 * len(evals.evals)) + 1
        async with slots:
            return await executor.execute(
                skill_dir=snapshot if with_skill else None,
                skill_name="csv-report" if with_skill else None,
                eval=ev,
                inputs_root=EXAMPLE,
                trial_dir=folder / f"eval-{ev.id}" / config / f"run-{number}",
                run_number=number,
                sample=number,
            )

    started = time.perf_counter()
    with scoped("bench"):
        records = await asyncio.gather(*(one(n) for n in range(runs)))
    wall = time.perf_counter() - started
    await client.aclose()
    ok = sum(r.status == "ok" for r in records)
    calls = ledger.summary(store)["n"]
    store.close()
    return {
        "backend": backend,
        "latency_ms": latency_ms,
        "runs": runs,
        "ok": ok,
        "calls": calls,
        "concurrency": concurrency,
        "wall": wall,
        "rate": runs / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, nargs="*", default=[0.0, 100.0])
    args = parser.parse_args()
    logs.configure(None, console=False)
    import ray

    cold = time.perf_counter()
    ray.init(
        num_cpus=args.concurrency,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="warning",
    )
    ray.get([ray.remote(lambda: 0).remote() for _ in range(args.concurrency)])  # workers up
    cold = time.perf_counter() - cold
    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    rows = []
    try:
        for latency in args.latency_ms:
            asyncio.run(
                measure("ray", 2, args.concurrency, latency, tmp / "warm")
            )  # import warm-up
            for backend in ("local", "ray"):
                rows.append(
                    asyncio.run(measure(backend, args.runs, args.concurrency, latency, tmp))
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        ray.shutdown()
    print(f"Ray cluster cold start ({args.concurrency} CPUs, workers up): {cold:.2f} s\n")
    print("| backend | latency/call | runs (ok) | model calls | concurrency | wall s | runs/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['latency_ms']:g} ms | {r['runs']} ({r['ok']}) | {r['calls']} "
            f"| {r['concurrency']} | {r['wall']:.2f} | {r['rate']:.2f} |"
        )
    print()
    for latency in args.latency_ms:
        local = next(r for r in rows if r["backend"] == "local" and r["latency_ms"] == latency)
        remote = next(r for r in rows if r["backend"] == "ray" and r["latency_ms"] == latency)
        print(
            f"latency {latency:g} ms: ray / local throughput = {remote['rate'] / local['rate']:.2f}"
        )


if __name__ == "__main__":
    main()
