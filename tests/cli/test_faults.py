"""A whole simulated run through a flaky provider (429, 529, 500, timeouts, malformed tool input,
cut streams) ends exactly where the fault-free run with the same seed ends, and loses nothing."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from test_daemon import RUN, reference_run

from optimizer.inputs.artifacts import check_artifact

pytestmark = pytest.mark.slow  # a whole run through faults

FAULTS = (
    "--set",
    "sim.fault_rate=0.2",
    "--set",
    "llm.max_attempts=12",
    "--set",
    "llm.backoff_initial_s=0",
    "--set",
    "llm.backoff_max_s=0",
)
VOLATILE = {"cost_usd", "created_at"}  # prompt-cache accounting follows the order calls land in


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    return reference_run(tmp_path_factory)


def full_lineage(run_dir: Path) -> dict:
    """history.json without wall-clock times and costs: versions, parents, decisions, scores,
    intervals, comparator tallies, summaries, the current best and the sealed test."""
    history = json.loads((run_dir / "history.json").read_text())
    items = [{k: v for k, v in item.items() if k not in VOLATILE} for item in history["iterations"]]
    return {
        "iterations": items,
        **{k: history.get(k) for k in ("current_best", "stop_reason", "test")},
    }


def json_files(run_dir: Path) -> set[str]:
    return {str(p.relative_to(run_dir)) for p in run_dir.rglob("*.json")}


def events(run_dir: Path, name: str) -> list[dict]:
    lines = (run_dir / "optimizer.log").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == name]


def test_a_run_through_faults_ends_with_the_fault_free_lineage_and_loses_nothing(
    reference, tmp_path, cli
):
    faulty = tmp_path / "faulty"
    done = cli(*RUN, "--run-dir", faulty, *FAULTS)
    assert done.exit_code == 0, done.output

    retries = Counter(e["cause"] for e in events(faulty, "llm.retry_scheduled"))
    repairs = len(events(faulty, "llm.structured_repair"))
    conn = sqlite3.connect(faulty / "state.db")
    attempts, calls, failed = conn.execute(
        "select coalesce(sum(attempts - 1), 0), sum(outcome = 'ok'), sum(outcome != 'ok') from calls"
    ).fetchone()
    conn.close()
    print("\nretries at sim.fault_rate=0.2, by cause (llm.retry_scheduled events):")
    for cause, n in sorted(retries.items()):
        print(f"  {cause:<14} {n:>4}")
    print(
        f"  {'total':<14} {sum(retries.values()):>4}   (ledger: {attempts} extra attempts over "
        f"{calls} completed calls; {repairs} malformed answers repaired)"
    )

    assert sum(retries.values()) == attempts > 0
    assert {"rate_limit", "overloaded", "server_error", "timeout"} <= set(retries)
    assert repairs > 0  # malformed tool input was injected and repaired
    assert failed == 0  # no call failed for good
    assert full_lineage(faulty) == full_lineage(reference)
    assert json_files(faulty) == json_files(reference)  # nothing lost
    assert not events(faulty, "compare.call_failed") and not events(faulty, "analyze.call_failed")
    for path in faulty.rglob("*.json"):
        if {"outputs", "inputs"} & set(path.relative_to(faulty).parts):
            continue
        if path.name in ("assignment.json", "selection.json"):
            json.loads(path.read_text())  # our own files: no seed schema, but whole JSON
            continue
        report = check_artifact(path, None, True)
        assert report.ok, (path, report.problems)
