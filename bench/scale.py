"""The review commands on a big run: 200 versions x 50 evals x 3 runs synthesised into a run folder
(state.db rows, the run folders the report reads, history.json), then the time and peak memory of
`optimizer lineage`, `status` and `report`, each in its own process. Never a timed test.

    .venv/bin/python bench/scale.py [--versions 200] [--evals 50] [--runs 3] [--tracemalloc] [--dir DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import print_table  # noqa: E402

from optimizer import config  # noqa: E402 - the bench runs from a checkout
from optimizer.grade import preview  # noqa: E402 - the bench runs from a checkout
from optimizer.search import lineage  # noqa: E402 - the bench runs from a checkout
from optimizer.store import runtoml  # noqa: E402 - the bench runs from a checkout
from optimizer.store.db import Store  # noqa: E402 - the bench runs from a checkout
from optimizer.store.files import Workspace  # noqa: E402 - the bench runs from a checkout
from optimizer.store.keys import TrialKey  # noqa: E402 - the bench runs from a checkout

EXPECTATIONS = [
    "The report states the `Row count:`",
    "The report has a `## Columns` table",
    "The report has a `## Summary` section",
]

# Runs one command of the CLI in this fresh process and reports its own wall time and peak RSS.
DRIVER = """
import json, resource, sys, time, tracemalloc
trace = sys.argv[1] == "1"
if trace:
    tracemalloc.start()
start = time.perf_counter()
from optimizer.cli import app  # noqa: E402 - the bench runs from a checkout
code = 0
try:
    app(sys.argv[2:], prog_name="optimizer")
except SystemExit as exc:
    code = exc.code or 0
seconds = time.perf_counter() - start
peak = tracemalloc.get_traced_memory()[1] if trace else None
# VmHWM is this process image's own peak; getrusage's ru_maxrss keeps the parent's across exec.
try:
    hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": code, "seconds": seconds, "peak_py": peak, "max_rss_kb": hwm}), file=sys.stderr)
"""


def at(minutes: float) -> str:
    hours, minutes = divmod(int(minutes), 60)
    days, hours = divmod(hours, 24)
    return f"2026-11-{20 + days:02d}T{hours:02d}:{minutes:02d}:00Z"


def synthesise(root: Path, versions: int, evals: int, runs: int, seed: int = 0) -> dict:
    """A stopped run folder as the loop leaves it, written fast (plain writes, bulk inserts)."""
    rng = random.Random(seed)
    ws = Workspace(root)
    settings = config.Settings.model_validate(
        {
            "llm": {"provider": "sim"},
            "loop": {"max_iterations": versions},
            "evals": {"runs_per_eval": runs},
        }
    )
    root.mkdir(parents=True)
    ws.run_toml.write_text(runtoml.to_toml(settings, {}))
    ws.log.write_text('{"event": "run.started"}\n')
    eval_ids = list(range(1, evals + 1))
    store = Store(ws.state_db)
    clock = [0.0]

    def tick(minutes: float = 0.05) -> str:
        clock[0] += minutes
        return at(clock[0])

    gradings, trials, calls, version_rows, decision_rows, iteration_rows = [], [], [], [], [], []
    previews: list[tuple[str, str]] = []
    files = 0

    def run_folder(
        label: str, key: str, run_dir: Path, e: int, n: int, configuration: str, score: float
    ) -> None:
        nonlocal files
        passed = [k < round(score * 3) for k in range(3)]
        grading = {
            "expectations": [
                {"text": t, "passed": p, "evidence": "line 3 of report.md" if p else "absent"}
                for t, p in zip(EXPECTATIONS, passed, strict=True)
            ],
            "summary": {
                "passed": sum(passed),
                "failed": 3 - sum(passed),
                "total": 3,
                "pass_rate": round(sum(passed) / 3, 4),
            },
        }
        (run_dir / "outputs").mkdir(parents=True)
        (run_dir / "outputs" / "report.md").write_text(f"# Report: file{e}.csv\n\nRow count: {e}\n")
        (run_dir / "transcript.md").write_text(f"## Run {n}\n\nThe agent wrote the report.\n")
        (run_dir / "grading.json").write_text(json.dumps(grading))
        (run_dir / "timing.json").write_text(
            '{"total_tokens": 4200, "duration_ms": 12000, "total_duration_seconds": 12.0}'
        )
        files += 4
        done = tick(0.01)
        trials.append((key, label, e, configuration, n, "train", "ok", None, 1, 4200, 12.0, done))
        gradings.append(
            (
                key,
                "ok",
                score,
                grading["summary"]["pass_rate"],
                sum(passed),
                3,
                None,
                1,
                json.dumps(grading),
                "{}",
                done,
                *TrialKey.parse(key).columns().values(),
            )
        )
        previews.append(
            (key, json.dumps(preview.of_trial(run_dir)))
        )  # as the grading unit keeps it
        for role, cost in (("executor", 0.004), ("grader", 0.006), ("comparator", 0.003)):
            calls.append(
                (
                    f"{key}:{role}",
                    role,
                    "claude-sonnet-4-6",
                    n,
                    "ok",
                    "{}",
                    1500,
                    300,
                    0,
                    1200,
                    cost,
                    900.0,
                    1,
                    None,
                    done,
                    label,
                )
            )

    for e in eval_ids:
        for n in range(1, runs + 1):
            key = f"baseline/eval-{e}/without_skill/run-{n}"
            run_folder("baseline", key, ws.baseline_trial_dir(e, n), e, n, "without_skill", 0.3)
    scores = {"v0": {e: rng.uniform(0.3, 0.7) for e in eval_ids}}
    best = "v0"
    for i in range(versions):
        label = f"v{i}"
        parent = None if i == 0 else best
        if parent:
            verdict = rng.choices(["won", "lost", "tie"], weights=[0.3, 0.5, 0.2])[0]
            shift = {"won": 0.02, "lost": -0.05, "tie": 0.0}[verdict]
            scores[label] = {
                e: min(1.0, max(0.0, scores[parent][e] + shift + rng.uniform(-0.03, 0.03)))
                for e in eval_ids
            }
        else:
            verdict = "baseline"
        skill = ws.skill(label)
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            f"---\nname: csv-report\ndescription: Profile CSV files.\n---\n\n"
            f"# CSV report\n\nRule {i}.\n"
        )
        if parent:
            (ws.version(label) / "proposal.md").write_text(
                f"# {label}: rule {i}\n\nParent: {parent}\n\n## Rationale\n\nRule {i}.\n\n"
                f"## Diff against {parent}\n\n```diff\n-Rule {i - 1}.\n+Rule {i}.\n```\n"
            )
        for e in eval_ids:
            for n in range(1, runs + 1):
                run_folder(
                    label,
                    f"{label}/eval-{e}/with_skill/run-{n}",
                    ws.trial_dir(label, e, "with_skill", n),
                    e,
                    n,
                    "with_skill",
                    scores[label][e],
                )
        mean = sum(scores[label].values()) / evals
        (ws.version(label) / "benchmark.json").write_text(
            json.dumps(
                {
                    "metadata": {
                        "skill_name": "csv-report",
                        "timestamp": at(0),
                        "evals_run": eval_ids,
                        "runs_per_configuration": runs,
                        "skill_path": f"{label}/skill",
                    },
                    "runs": [],
                    "notes": [],
                    "run_summary": {
                        "with_skill": {
                            "overall_efficiency": {
                                "mean": mean,
                                "stddev": 0.05,
                                "ci_low": mean - 0.03,
                                "ci_high": mean + 0.03,
                            }
                        }
                    },
                    "per_eval": [
                        {"eval_id": e, "with_skill": {"mean": scores[label][e]}} for e in eval_ids
                    ],
                }
            )
        )
        created = tick()
        version_rows.append(
            (
                label,
                f"hash-{label}",
                parent,
                i,
                created,
                "decided",
                verdict,
                f"rule {i}",
                f"why rule {i}",
                "benchmark",
                mean,
                mean * 0.9,
                json.dumps({str(e): s for e, s in scores[label].items()}),
            )
        )
        if parent:
            delta = mean - sum(scores[parent].values()) / evals
            reason = f"{verdict}: Δ = {delta:+.3f} over {evals} evals × {runs} runs"
            decision_rows.append(
                (
                    label,
                    parent,
                    "benchmark",
                    verdict,
                    delta,
                    delta - 0.02,
                    delta + 0.02,
                    reason,
                    json.dumps({"decision": verdict, "reason": reason, "delta": delta}),
                    tick(),
                )
            )
            iteration_rows.append(
                (i, parent, "done", json.dumps({"0": {"label": label}}), created, tick())
            )
            if verdict == "won":
                best = label
    with store.atomic():
        conn = store.db.conn
        conn.execute(
            "insert into runs (id, skill_name, skill_dir, target, started_at, eval_set_hash, split_json, "
            "settings_json, status, stop_reason, current_best, activity, finished_at) "
            "values (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                root.name,
                "csv-report",
                "examples/csv-report",
                "body",
                at(0),
                "e" * 16,
                json.dumps({"train": eval_ids, "test": [], "note": "synthetic"}),
                settings.model_dump_json(),
                "stopped",
                "reached the iteration limit",
                best,
                "stopped",
                tick(),
            ),
        )
        conn.executemany(
            "insert into versions (label, hash, parent, iteration, created_at, status, decision, "
            "summary, rationale, phase, score, pass_rate, split_scores_json) "
            "values (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            version_rows,
        )
        conn.executemany("insert into decisions values (?,?,?,?,?,?,?,?,?,?)", decision_rows)
        conn.executemany("insert into iterations values (?,?,?,?,?,?)", iteration_rows)
        conn.executemany(
            "insert into trials (key, version, eval_id, configuration, run_number, split, status, "
            "error, skill_invoked, tokens, time_seconds, completed_at) "
            "values (?,?,?,?,?,?,?,?,?,?,?,?)",
            trials,
        )
        conn.executemany(
            "insert into gradings (key, status, score, pass_rate, passed, total, rubric_normalized, "
            "gate_passed, grading_json, structural_json, completed_at, prefix, eval_id, "
            "configuration, run_number) values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            gradings,
        )
        conn.executemany("insert into previews (key, preview_json) values (?,?)", previews)
        conn.executemany(
            "insert into calls (hash, role, model, sample, outcome, response_json, input_tokens, "
            "output_tokens, cache_write_tokens, cache_read_tokens, cost_usd, latency_ms, attempts, "
            "error, created_at, scope) values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            calls,
        )
    lineage.write_files(ws, store, simulated=True, skill_name="csv-report", iteration=versions - 1)
    store.close()
    return {
        "files": files,
        "gradings": len(gradings),
        "calls": len(calls),
        "versions": versions,
        "db_mb": ws.state_db.stat().st_size / 2**20,
    }


def measure(args: list[str], trace: bool) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, "1" if trace else "0", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
    )
    last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "{}"
    try:
        return json.loads(last)
    except ValueError:
        return {"code": proc.returncode, "error": last}


def html_mb(target: Path) -> tuple[float, float]:
    """The page a browser opens first, and the detail files beside it that it loads on demand."""
    beside = target.with_name(f"{target.stem}_files")
    details = sum(p.stat().st_size for p in beside.iterdir()) if beside.is_dir() else 0
    return target.stat().st_size / 2**20, details / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=200)
    parser.add_argument("--evals", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--tracemalloc", action="store_true", help="also the peak of Python allocations (slower)"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        help="synthesise the run here and keep it; reused when it exists "
        "(the synthesis takes about a minute)",
    )
    args = parser.parse_args()
    available = {
        name: importlib.util.find_spec(f"optimizer.report.{name}") is not None
        for name in ("status", "html")
    }
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.dir.resolve() / "big-run" if args.dir else Path(tmp) / "big-run"
        started = time.perf_counter()
        if (run_dir / "state.db").is_file():
            made = {
                "versions": args.versions,
                "gradings": 0,
                "calls": 0,
                "files": 0,
                "reused": True,
                "db_mb": (run_dir / "state.db").stat().st_size / 2**20,
            }
        else:
            made = synthesise(run_dir, args.versions, args.evals, args.runs)
        build_s = time.perf_counter() - started
        report = Path(tmp) / "report.html"
        commands = [
            ("lineage", ["lineage", str(run_dir)], "status"),
            ("lineage --json", ["lineage", str(run_dir), "--json"], "status"),
            ("status", ["status", str(run_dir)], "status"),
            ("status --json", ["status", str(run_dir), "--json"], "status"),
            ("report", ["report", str(run_dir), "-o", str(report)], "html"),
        ]
        rows, measured = [], {}
        for name, argv, module in commands:
            if not available[module]:
                rows.append([f"optimizer {name}", "not available", "-", "-", "-", "-"])
                continue
            m = measure(argv, args.tracemalloc)
            if m.get("code"):
                rows.append(
                    [
                        f"optimizer {name}",
                        f"failed (exit {m.get('code')})",
                        "-",
                        "-",
                        "-",
                        m.get("error", "")[:60],
                    ]
                )
                continue
            measured[name] = m
            page = "-"
            if name == "report":
                index, details = html_mb(report)
                page = f"{index:.2f}"
                m["note"] = f"+ {details:.1f} MB of detail files, loaded one version at a time"
            rows.append(
                [
                    f"optimizer {name}",
                    f"{m['seconds']:.2f}",
                    f"{m['max_rss_kb'] / 1024:.0f}",
                    f"{m['peak_py'] / 2**20:.0f}" if m.get("peak_py") is not None else "-",
                    page,
                    m.get("note", ""),
                ]
            )
        if "report" in measured and "lineage --json" in measured:
            r, lj = measured["report"], measured["lineage --json"]
            rows.append(
                [
                    "report / lineage --json",
                    f"{r['seconds'] / lj['seconds']:.2f}x",
                    f"{r['max_rss_kb'] / lj['max_rss_kb']:.2f}x",
                    "-",
                    "-",
                    "",
                ]
            )
    counted = (
        "a reused run folder"
        if made.get("reused")
        else f"{made['gradings']:,} graded runs, {made['calls']:,} ledger rows, {made['files']:,} run files"
    )
    print_table(
        f"Review commands on {args.versions} versions x {args.evals} evals x {args.runs} runs "
        f"({counted}, state.db {made['db_mb']:.0f} MB; synthesised in {build_s:.0f} s)",
        ["command", "wall s", "peak RSS MB", "peak Python MB", "HTML MB", "note"],
        rows,
        [
            "Each command runs in a fresh process (imports included); peak RSS is its VmHWM, "
            "Python allocations from tracemalloc with --tracemalloc."
        ],
    )


if __name__ == "__main__":
    main()
