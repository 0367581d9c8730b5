"""The daemon as a user drives it: whole simulated runs through the command line, kills and
resumes, budgets, deadlines, stop requests, a second daemon. Processes of their own where the
process is the point (kills, a second daemon, stop requests), forked from the test launcher
(launcher.py); the reference run through `python -m optimizer`; the rest runs the same command
line in this process (the `cli` fixture). Real state.db throughout."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from launcher import Forked, launch

from optimizer.config import Settings
from optimizer.inputs.artifacts import check_artifact
from optimizer.store import resumes
from optimizer.store.db import Store

pytestmark = pytest.mark.slow  # daemons and whole runs, most over a second

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "fixtures" / "csv-report"


def cli(
    *args: str, check: bool = True, timeout: float = 240, fresh: bool = False, **kw
) -> subprocess.CompletedProcess:
    """`optimizer ARGS` in a process of its own, forked from the test launcher (launcher.py) or,
    with fresh=True, a new interpreter through `python -m optimizer`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPTIMIZER_", "ANTHROPIC_"))}
    if fresh:
        proc = subprocess.run(
            [sys.executable, "-m", "optimizer", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=kw.get("cwd", ROOT),
        )
    else:
        forked = start(*args, cwd=kw.get("cwd", ROOT))
        try:
            forked.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            forked.kill()
            finished(forked)
            raise
        proc = finished(forked)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def start(*args: str, cwd: Path = ROOT) -> Forked:
    """A daemon in the background, forked from the test launcher. Its output goes to files, not
    pipes: a pipe that nobody reads while the daemon runs fills up and blocks it forever."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPTIMIZER_", "ANTHROPIC_"))}
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = launch([*args], cwd=cwd, env=env, stdout=out, stderr=err)
    proc.captured = (out, err)  # type: ignore[attr-defined]
    return proc


def finished(proc: Forked, timeout: float = 240) -> subprocess.CompletedProcess:
    """Waits for a started daemon and returns what it printed."""
    proc.wait(timeout=timeout)
    texts = []
    for handle in proc.captured:  # type: ignore[attr-defined]
        handle.seek(0)
        texts.append(handle.read())
        handle.close()
    return subprocess.CompletedProcess(proc.args, proc.returncode, *texts)


def lineage_of(run_dir: Path) -> list[tuple]:
    history = json.loads((run_dir / "history.json").read_text())
    return [
        (
            i["version"],
            i["parent"],
            i["grading_result"],
            i.get("overall_efficiency"),
            i.get("summary"),
        )
        for i in history["iterations"]
    ] + [("best", history["current_best"])]


def completed_hashes(run_dir: Path) -> Counter:
    counts: Counter = Counter()
    for line in (run_dir / "optimizer.log").read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "llm.call_completed":
            counts[event["hash"]] += 1
    return counts


def wait_for(predicate, timeout: float = 60.0) -> None:
    """Polls a condition the test cannot be notified of (another process's progress)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def stage(run_dir: Path) -> str:
    try:
        conn = sqlite3.connect(f"file:{run_dir / 'state.db'}?mode=ro", uri=True)
        row = conn.execute("select activity from runs").fetchone()
        conn.close()
        return row[0] if row else ""
    except sqlite3.Error:
        return ""


# With the simulator's seed 16 and a quarter of the proposals careless the two iterations win,
# tie and lose, so the reference run walks every path a decision can take; a change to the
# simulated world, to the rule or to any text a request carries may need another seed, which the
# first test below would show (when the judge began to read meaning and careless edits came from
# the skill's text alone, losses grew rare at the default 10 %: no seed of 0-22 both won and lost;
# at 25 %, 16, 17, 20, 23, 38 and 45 of 0-71 did; once the agent read the files a skill names
# for every task, none of 0-40 did in 2 iterations, and seed 37 does in 3; once prompt caching and
# the model's name no longer changed what the simulator answers, 4 and 7 of 0-13 did in 3).
# The engine's machinery (looks that add runs, the comparator, won, lost and tie) under the
# guarded step rule, which exercises all of it; tests/decide/test_steps.py covers the cheap default.
# The iteration count comes last: tests/cli/test_crash.py replaces it.
RUN = (
    "run", str(EXAMPLE), "--provider", "sim", "--set", "sim.seed=4",
    "--set", "sim.harmful_rate=0.25", "--set", "selection.step=guarded", "--max-iterations", "3",
)  # fmt: skip


def reference_run(factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted run of RUN per test session, shared by the modules that compare against
    it (read it, never write it; copy it to damage it)."""
    run_dir, done = (
        factory.getbasetemp() / "reference-run",
        factory.getbasetemp() / "reference-run.done",
    )
    if not done.exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        cli(*RUN, "--run-dir", str(run_dir), fresh=True)  # the entry point a user runs
        done.touch()
    return run_dir


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    return reference_run(tmp_path_factory)


def test_a_full_run_wins_and_loses_and_every_file_validates(reference):
    decisions = {v: d for v, _, d, *_ in lineage_of(reference)[:-1]}
    assert decisions["v0"] == "baseline"
    assert "won" in decisions.values() and "lost" in decisions.values()
    history = json.loads((reference / "history.json").read_text())
    assert sum(i["is_current_best"] for i in history["iterations"]) == 1
    assert history["simulated"] is True and history["test"]["versions"]["v0"]["score"] is not None
    checked = 0
    for path in reference.rglob("*.json"):
        if {"outputs", "inputs"} & set(path.parts) or path.name in (
            "assignment.json",
            "selection.json",
        ):
            continue
        report = check_artifact(path, None, True)
        assert report.ok, (path, report.problems)
        checked += 1
    assert checked > 200
    agg = json.loads((reference / "eval_feedback_aggregate.json").read_text())
    assert agg["skill_name"] == "csv-report" and agg["total_runs"] > 0
    best = history["current_best"]
    assert (reference / best / "skill" / "SKILL.md").is_file()
    assert not (reference / best / "skill" / "evals").exists()  # the agent never sees the evals
    assert "## Diff against" in (reference / "v1" / "proposal.md").read_text()


def test_the_same_seed_gives_the_same_lineage_anywhere_at_any_concurrency(
    reference, tmp_path, cli, monkeypatch
):
    run_dir = tmp_path / "elsewhere" / "run"
    monkeypatch.chdir(tmp_path)
    done = cli(*RUN, "--run-dir", run_dir, "--set", "execute.concurrency=1")
    assert done.exit_code == 0, done.output
    assert lineage_of(run_dir) == lineage_of(reference)


def test_kill_9_at_random_moments_then_resume_ends_with_the_same_lineage(reference, tmp_path):
    run_dir = tmp_path / "run"
    rng = random.Random(7)
    # 60 ms a call: about 10 s of work, more than five kills at most 2 s apart let it do. After
    # the last kill the run goes on at full speed.
    slow = ("--set", "sim.latency_ms=60")
    proc = start(*RUN, "--run-dir", str(run_dir), *slow)
    kills = 0
    # A bounded number of kills, then the run may end: on a slow or loaded machine a process may
    # not get past start-up between two kills, and an unbounded loop would never end.
    while kills < 5:
        try:
            proc.wait(timeout=rng.uniform(0.4, 2.0))
            break  # finished on its own before the next kill
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
        pace = ("--set", "sim.latency_ms=0") if kills == 5 else ()
        if not (run_dir / "state.db").exists():
            proc = start(*RUN, "--run-dir", str(run_dir), *slow, *pace)
        else:
            proc = start("resume", str(run_dir), *pace)
    done = finished(proc)
    assert done.returncode == 0, done.stderr
    assert kills >= 3
    assert lineage_of(run_dir) == lineage_of(reference)
    repeated = {h: n for h, n in completed_hashes(run_dir).items() if n > 1}
    assert repeated == {}, f"{len(repeated)} completed model calls were paid twice"
    conn = sqlite3.connect(run_dir / "state.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert not list(run_dir.glob("v*/.*tmp*")) and not list(run_dir.rglob(".work"))


def test_resume_after_a_finished_run_pays_nothing_again(reference, tmp_path, cli):
    run_dir = tmp_path / "run"
    assert cli(*RUN, "--run-dir", run_dir, "--max-iterations", "1").exit_code == 0
    before = sum(completed_hashes(run_dir).values())
    assert cli("resume", run_dir, "--max-iterations", "1").exit_code == 0
    assert sum(completed_hashes(run_dir).values()) == before
    assert cli("resume", run_dir, "--max-iterations", RUN[-1]).exit_code == 0
    assert lineage_of(run_dir) == lineage_of(reference)


def test_status_after_a_resume_shows_the_settings_in_force(tmp_path, cli):
    run_dir = tmp_path / "run"
    done = cli("run", EXAMPLE, "--provider", "sim", "--max-iterations", "1", "--run-dir", run_dir)
    assert done.exit_code == 0, done.output
    before = json.loads(cli("status", run_dir, "--json").stdout)
    assert before["max_iterations"] == 1 and before["resumes"] == 0 and not before["last_resumed"]
    resumed = cli("resume", run_dir, "--max-iterations", "2")
    assert resumed.exit_code == 0, resumed.output
    info = json.loads(cli("status", run_dir, "--json").stdout)
    assert info["max_iterations"] == 2 and info["iterations_done"] == 2
    assert info["resumes"] == 1
    assert info["last_resumed"]["changed"] == {"loop.max_iterations": [1, 2]}
    text = cli("status", run_dir).stdout
    assert "2 done of 2" in text and "loop.max_iterations 1 → 2" in text
    # A resume that changes nothing is recorded too, and says so.
    assert cli("resume", run_dir).exit_code == 0
    again = json.loads(cli("status", run_dir, "--json").stdout)
    assert again["resumes"] == 2 and again["last_resumed"]["changed"] == {}
    assert again["max_iterations"] == 2 and "2 times" in cli("status", run_dir).stdout


def test_the_first_start_of_a_detached_run_is_no_resume(tmp_path):
    # `run --detach` starts its loop through `resume` in the child: that is the run's start.
    store = Store(tmp_path / "state.db")
    settings = Settings()
    store.db["runs"].insert(
        {"id": "r", "status": "created", "settings_json": settings.model_dump_json()}
    )
    resumes.record_resume(store, settings)
    assert store.db["resumes"].count == 0
    store.db["runs"].update("r", {"status": "stopped"})
    resumes.record_resume(store, settings)
    assert store.db["resumes"].count == 1
    store.close()


def test_a_budget_stop_never_overspends(tmp_path, cli):
    run_dir = tmp_path / "run"
    out = cli(*RUN, "--run-dir", run_dir, "--budget-usd", "1.5", "--max-iterations", "5")
    assert out.exit_code == 0, out.output
    conn = sqlite3.connect(run_dir / "state.db")
    spent = conn.execute("select sum(cost_usd) from calls").fetchone()[0]
    reason = conn.execute("select stop_reason from runs").fetchone()[0]
    assert spent <= 1.5
    assert "budget" in reason and "budget" in out.stdout


def test_a_budget_below_one_proposal_is_refused_part_by_part_and_the_minimum_buys_a_step(
    tmp_path, cli
):
    """$2 nights stopped before v0 was scored, or made no proposal, and wrote no history.json: a
    budget that cannot pay v0's train look, the sealed test and one proposal with its step is
    refused before anything is written, naming each part; the budget it names buys a proposal
    measured on its step and a history.json."""
    run_dir = tmp_path / "run"
    out = cli(*RUN, "--run-dir", run_dir, "--budget-usd", "0.3")
    assert out.exit_code == 2, out.output
    said = " ".join(out.output.split())
    found = re.search(
        r"needs at least \$([\d.]+) \((.*)\); give --budget-usd ([\d.]+) or more", said
    )
    assert found is not None, said
    for part in ("v0 and the baseline on the train evals", "the sealed test", "one proposal"):
        assert part in found.group(2)
    parts = [float(x) for x in re.findall(r"\$([\d.]+)", found.group(2))]
    assert sum(parts) == pytest.approx(float(found.group(1)), abs=0.01 * len(parts))
    assert not run_dir.exists()
    out = cli(*RUN, "--run-dir", run_dir, "--budget-usd", found.group(3))
    assert out.exit_code == 0, out.output
    conn = sqlite3.connect(run_dir / "state.db")
    # A proposal measured on its step's first look (a guarded step may want more looks to
    # decide than the minimum counts: the minimum is the typical cost, not the most).
    measured = conn.execute(
        "select count(distinct t.version) from trials t where t.version not in ('v0', 'baseline')"
        " and t.split = 'train'"
    ).fetchone()[0]
    assert measured >= 1 and (run_dir / "history.json").is_file()
    # A night that plans no proposal (v0 and the sealed test only) needs none paid for.
    only_v0 = tmp_path / "only-v0"
    out = cli(*RUN[:-1], "0", "--run-dir", only_v0, "--budget-usd", "1.0")
    assert out.exit_code == 0 and "cannot pay for one proposal" not in out.output, out.output


def test_a_deadline_in_the_past_is_refused_before_anything_is_written(tmp_path, cli):
    """A night that could run nothing is not started: it used to pay for a sealed test of a v0
    it never scored. One sentence, exit 2, no run folder."""
    run_dir = tmp_path / "run"
    out = cli(*RUN, "--run-dir", run_dir, "--deadline", "2020-01-01T00:00")
    assert out.exit_code == 2, out.output
    assert "--until 2020-01-01T00:00: that time has passed" in out.output
    assert not run_dir.exists()


def test_a_second_daemon_is_refused_and_stop_ends_the_first(tmp_path):
    run_dir = tmp_path / "run"
    # Patience 50: the run cannot end on its own (a plateau) before the stop reaches it.
    first = start(
        *RUN,
        "--run-dir",
        str(run_dir),
        "--set",
        "sim.latency_ms=40",
        "--max-iterations",
        "50",
        "--set",
        "loop.patience=50",
    )
    wait_for(lambda: stage(run_dir).startswith(("iteration", "v1")))
    second = cli("resume", str(run_dir), check=False)
    assert second.returncode == 2
    assert f"pid {first.pid}" in second.stderr and "Traceback" not in second.stderr
    stopped = cli("stop", str(run_dir))
    assert f"pid {first.pid}" in stopped.stdout
    assert first.wait(timeout=60) == 0
    conn = sqlite3.connect(run_dir / "state.db")
    assert "stop" in conn.execute("select stop_reason from runs").fetchone()[0]


def test_stop_right_after_detach_reaches_the_daemon_that_is_still_starting(tmp_path):
    """`run --detach` returns seconds before its daemon takes the run folder's lock (imports): a
    `stop` in between used to say "no daemon is running" while the daemon started and cleared the
    STOP file. It now names the starting daemon, which stops before its first unit of work."""
    run_dir = tmp_path / "run"
    detached = cli(*RUN, "--run-dir", str(run_dir), "--max-iterations", "50", "--detach")
    pid = int(re.search(r"in the background as pid (\d+)", detached.stdout).group(1))
    stopped = cli("stop", str(run_dir))
    assert f"pid {pid}" in stopped.stdout and "no daemon" not in stopped.stdout, stopped.stdout
    wait_for(lambda: stage(run_dir) == "stopped", timeout=120)
    conn = sqlite3.connect(run_dir / "state.db")
    reason = conn.execute("select stop_reason from runs").fetchone()[0]
    labels = [v for (v,) in conn.execute("select label from versions")]
    conn.close()
    assert "stop" in reason.lower(), reason
    if "still starting" in stopped.stdout:  # not one unit of the search was started
        assert labels == ["v0"]


def test_the_stop_file_is_honoured_between_units(tmp_path):
    run_dir = tmp_path / "run"
    proc = start(
        *RUN,
        "--run-dir",
        str(run_dir),
        "--set",
        "sim.latency_ms=40",
        "--max-iterations",
        "50",
        "--set",
        "loop.patience=50",
    )  # never a plateau before the stop file is read
    wait_for(lambda: stage(run_dir).startswith(("iteration", "v1")))
    (run_dir / "STOP").write_text("please stop\n")
    assert proc.wait(timeout=60) == 0
    conn = sqlite3.connect(run_dir / "state.db")
    assert "STOP" in conn.execute("select stop_reason from runs").fetchone()[0]


def test_bad_input_writes_nothing(tmp_path, cli):
    run_dir = tmp_path / "run"
    bad = cli("run", tmp_path / "missing", "--run-dir", run_dir)
    assert bad.exit_code == 2 and "Traceback" not in bad.output and not run_dir.exists()
    bad = cli(*RUN, "--run-dir", run_dir, "--set", "loop.sed=1")
    assert bad.exit_code == 2 and "did you mean 'loop.seed'" in bad.stderr and not run_dir.exists()
    bad = cli(*RUN, "--run-dir", run_dir, "--deadline", "tomorrow")
    assert bad.exit_code == 2 and "HH:MM" in bad.stderr and not run_dir.exists()


def test_export_copies_a_version_and_refuses_to_overwrite(reference, tmp_path, cli):
    target = tmp_path / "exported"
    best = json.loads((reference / "history.json").read_text())["current_best"]
    out = cli("export", reference, best, "--to", target)
    assert out.exit_code == 0, out.output
    assert f"exported {best}" in out.stdout
    assert (target / "SKILL.md").read_text() == (
        reference / best / "skill" / "SKILL.md"
    ).read_text()
    again = cli("export", reference, "v0", "--to", target)
    assert again.exit_code == 2 and "--force" in again.stderr
    assert cli("export", reference, "v0", "--to", target, "--force").exit_code == 0
    assert (target / "SKILL.md").read_text() == (
        reference / "v0" / "skill" / "SKILL.md"
    ).read_text()


def test_a_budget_stop_leaves_the_sealed_test_what_it_costs(tmp_path, cli):
    """At $1.30 the search used to spend up to the budget, and the sealed test found nothing
    left ("sealed test: not measured"). The search now stops where it would eat into the reserve
    the preview shows, and the sealed test runs on it, within the budget."""
    run_dir = tmp_path / "run"
    out = cli("run", EXAMPLE, "--provider", "sim", "--budget-usd", "1.3", "--run-dir", run_dir)
    assert out.exit_code == 0, out.output
    assert re.search(r"reserve for the sealed test: \$0\.\d\d, kept from the search", out.stdout)
    conn = sqlite3.connect(run_dir / "state.db")
    spent = conn.execute("select sum(cost_usd) from calls").fetchone()[0]
    reason, test = conn.execute("select stop_reason, test_json from runs").fetchone()
    conn.close()
    test = json.loads(test)
    assert spent <= 1.3 and "kept for the sealed test" in reason
    assert "incomplete" not in test and test["versions"]["v0"]["score"] is not None
    assert "sealed test: not measured" not in (run_dir / "summary.md").read_text()
