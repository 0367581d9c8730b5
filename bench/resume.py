"""Kills and resumes: a simulated run SIGKILLed at seeded random moments and resumed each time,
against the same run uninterrupted. Prints the completed model calls paid twice (0 expected), the
ledger against the uninterrupted run's, the lineage check, and the time a resume takes to be back
at work. Never a timed test.

    .venv/bin/python bench/resume.py [--kills 10] [--latency-ms 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import print_table  # noqa: E402

EXAMPLE = ROOT / "examples" / "csv-report"


def optimizer(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "optimizer", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def lineage(run_dir: Path) -> list:
    history = json.loads((run_dir / "history.json").read_text())
    return [
        {k: v for k, v in item.items() if k not in ("cost_usd", "created_at")}
        for item in history["iterations"]
    ] + [history["current_best"], history.get("test")]


def ledger_rows(run_dir: Path) -> int:
    conn = sqlite3.connect(run_dir / "state.db")
    try:
        return conn.execute("select count(*) from calls where outcome = 'ok'").fetchone()[0]
    finally:
        conn.close()


def logged_calls(run_dir: Path) -> Counter:
    counts: Counter = Counter()
    for line in (run_dir / "optimizer.log").read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "llm.call_completed":
            counts[event["hash"]] += 1
    return counts


def log_size(run_dir: Path) -> int:
    try:
        return (run_dir / "optimizer.log").stat().st_size
    except OSError:
        return 0


def holds_lock(run_dir: Path, proc: subprocess.Popen) -> bool:
    try:
        return (run_dir / "optimizer.pid").read_text() == str(proc.pid)
    except OSError:
        return False


def poll(predicate, proc: subprocess.Popen, timeout: float = 60.0) -> float | None:
    """Seconds until predicate holds (polled every 10 ms), None if the process ended first."""
    start = time.perf_counter()
    while not predicate():
        if proc.poll() is not None or time.perf_counter() - start > timeout:
            return None
        time.sleep(0.01)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=40.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    common = (
        "--provider",
        "sim",
        "--max-iterations",
        "2",
        "--set",
        f"sim.latency_ms={args.latency_ms:g}",
    )
    with tempfile.TemporaryDirectory() as tmp:
        reference, run_dir = Path(tmp) / "reference", Path(tmp) / "run"
        started = time.perf_counter()
        proc = optimizer("run", str(EXAMPLE), "--run-dir", str(reference), *common)
        assert proc.wait() == 0, proc.stderr.read()
        reference_wall = time.perf_counter() - started
        started = time.perf_counter()
        finished = optimizer("resume", str(reference))
        assert finished.wait() == 0, finished.stderr.read()
        idle_resume = time.perf_counter() - started

        started = time.perf_counter()
        proc = optimizer("run", str(EXAMPLE), "--run-dir", str(run_dir), *common)
        to_lock, to_work, kills = [], [], 0
        while kills < args.kills:
            before = log_size(run_dir)
            locked = poll(lambda p=proc: holds_lock(run_dir, p), proc)
            working = poll(lambda b=before: log_size(run_dir) > b, proc)
            if kills:  # a resume: how long until it held the lock, and logged its first work
                to_lock.append(locked)
                to_work.append(working)
            try:
                proc.wait(timeout=rng.uniform(0.2, 1.0))
                break  # the run ended before this kill
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
            proc = optimizer("resume", str(run_dir))
        assert proc.wait() == 0, proc.stderr.read()
        interrupted_wall = time.perf_counter() - started

        repeated = sum(n - 1 for n in logged_calls(run_dir).values() if n > 1)
        rows_ref, rows_run = ledger_rows(reference), ledger_rows(run_dir)
        same = lineage(run_dir) == lineage(reference)
    lock_s = [t for t in to_lock if t is not None]
    work_s = [t for t in to_work if t is not None]
    print_table(
        f"Kill -9 and resume: {kills} kills of one simulated run (examples/csv-report, 2 iterations, "
        f"latency {args.latency_ms:g} ms, seed {args.seed})",
        ["measure", "value"],
        [
            [f"kills (each 0.2-1.0 s into the work; {args.kills} asked)", str(kills)],
            ["completed model calls paid twice (0 expected)", str(repeated)],
            ["ledger rows: interrupted / uninterrupted", f"{rows_run} / {rows_ref}"],
            ["lineage equals the uninterrupted run's", "yes" if same else "NO"],
            [
                "resume: start to lock held, median / max s",
                f"{statistics.median(lock_s):.2f} / {max(lock_s):.2f}" if lock_s else "-",
            ],
            [
                "resume: lock held to first work logged, median / max s",
                f"{statistics.median(work_s):.2f} / {max(work_s):.2f}" if work_s else "-",
            ],
            ["resume of a finished run (nothing left to do), s", f"{idle_resume:.2f}"],
            [
                "wall: uninterrupted / with kills, s",
                f"{reference_wall:.1f} / {interrupted_wall:.1f}",
            ],
        ],
        [
            "Work in flight at a kill (a run half done, a call not yet answered) is done again; an "
            "answer already in the ledger never is."
        ],
    )


if __name__ == "__main__":
    main()
