"""bench/peers.py still runs GEPA and SkillOpt through their own packages on our world: one seed,
a small budget, every method to its end, the verdict line in its exact form. Skipped, with the
reason, only where the [peers] extra is not installed (`make setup` installs it, so CI runs it)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the peers bench and its command line, in subprocesses

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "peers.py"
VERDICT = re.compile(
    r"peers: ours gain/\$ -?[\d.]+, best peer (gepa|gepa\+merge|skillopt) gain/\$ -?[\d.]+, "
    r"ratio (inf|[\d.]+) \[(inf|[\d.]+), (inf|[\d.]+)\]; worse than v0: ours \d+%, best peer \d+%"
)

needs_peers = pytest.mark.skipif(
    not all(importlib.util.find_spec(p) for p in ("gepa", "skillopt")),
    reason="the [peers] extra (gepa, skillopt) is not installed: pip install -e '.[peers]'",
)


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@needs_peers
def test_every_method_runs_on_one_world_and_the_verdict_line_is_last():
    # Ours and the original skill always run; the greedy baseline and our variant are left out.
    done = bench(
        "--seeds",
        "1-1",
        "--budget-usd",
        "1",
        "--skills",
        "release-notes",
        "--methods",
        "gepa,gepa+merge,skillopt",
        "--no-write",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert VERDICT.fullmatch(lines[-1]), lines[-1]
    table = {row.split("|")[1].strip(): row for row in lines if row.startswith("| ")}
    assert "greedy" not in table
    for method in ("ours", "gepa", "gepa+merge", "skillopt"):
        cells = [c.strip() for c in table[method].split("|")[1:-1]]
        usd, calls, runs = float(cells[4]), int(cells[5]), int(cells[6])
        # Each search spent from the ledger: model calls and executor runs of its own.
        assert usd > 0 and calls > 0 and runs > 0, table[method]
    # The stop bound: our spend cut at the last win, never above what ours spent.
    bound = next(line for line in lines if line.startswith("ours stopped at its last win"))
    at_win = re.search(r"\$([\d.]+) a world, gain/\$ -?[\d.]+, ratio to \S+ ", bound)
    assert at_win, bound
    ours_usd = float([c.strip() for c in table["ours"].split("|")[1:-1]][4])
    assert 0 < float(at_win[1]) <= ours_usd + 0.005, (bound, ours_usd)
    # Each peer got as far as a proposal through its own loop.
    assert re.search(r"release-notes/1 gepa: \d+ candidates kept, [1-9]\d* proposals", done.stdout)
    assert re.search(r"release-notes/1 skillopt: .*, [1-9]\d* proposals", done.stdout)


@needs_peers
def test_a_skill_diff_becomes_skillopt_edits_that_rebuild_it():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from peers.skillopt_peer import patch_edits
    finally:
        sys.path.remove(str(ROOT / "bench"))
    from skillopt.optimizer.skill import apply_patch

    before = "# Title\n\nIntro.\n\n- One.\n- Two.\n- Three.\n"
    after = "# Title\n\nIntro, shorter.\n\n- One.\n- Three.\n- Four, with `Upgrade steps:`.\n"
    edits = patch_edits(before, after)
    assert {e["op"] for e in edits} <= {"replace", "delete", "insert_after"}
    assert apply_patch(before, {"edits": edits}).split() == after.split()


@pytest.mark.parametrize(
    "args, says",
    [
        (["--seeds", "5-1"], "--seeds '5-1'"),
        (["--budget-usd", "0"], "--budget-usd 0.0"),
        (["--skills", "nope"], "--skills: unknown nope"),
    ],
)
def test_bad_flags_get_one_sentence_and_exit_2(args, says):
    done = bench(*args, "--no-write")
    assert done.returncode == 2
    assert done.stderr.strip().startswith(says) and len(done.stderr.strip().splitlines()) == 1


def test_gain_per_dollar_is_total_gain_over_total_spend_and_the_interval_is_paired():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from peers.stats import Unit, paired_ratio, per_dollar
    finally:
        sys.path.remove(str(ROOT / "bench"))
    ours = [
        Unit("s", i, gain, None, False, usd)
        for i, (gain, usd) in enumerate([(0.2, 2.0), (0.0, 2.0), (0.1, 1.0)])
    ]
    peer = [
        Unit("s", i, gain, None, gain < 0, usd)
        for i, (gain, usd) in enumerate([(0.1, 1.0), (-0.1, 1.0), (0.0, 1.0)])
    ]
    assert per_dollar(ours) == pytest.approx(0.3 / 5.0)
    assert per_dollar(peer) == 0.0
    point, lo, hi = paired_ratio(ours, peer, seed=1)
    # The peer gained nothing per dollar: any gain of ours is an unbounded multiple of it.
    assert point == float("inf") and lo <= hi
    assert paired_ratio(ours, ours, seed=1)[0] == 1.0
