"""Runs every benchmark in bench/ and writes bench/RESULTS.md: the machine, the date, and each
command with the table it printed. `make bench` calls it. Never a test; a failing script is
recorded with its exit code and the others still run.

    .venv/bin/python bench/run_all.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import ast
import os
import platform
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
# (script, arguments, what it measures); each stays under about two minutes on 2 cores.
SCRIPTS = [
    ("overhead.py", [], "iteration wall time against latency x calls / concurrency"),
    ("resume.py", [], "model calls repeated after kill -9, and the time to resume"),
    ("cost.py", [], "tokens and USD per iteration: our protocol against a naive one"),
    ("scale.py", [], "lineage, status and report on 200 versions x 50 evals x 3 runs"),
    ("selection.py", [], "false promotions and power of the promotion rule"),
    ("llm_overhead.py", ["--calls", "1000"], "what the model client adds to a call"),
    (
        "twins.py",
        [],
        "twin runs through sim-server: same requests and lineage; kill -9 repays nothing",
    ),
]


def all_scripts() -> list[tuple[str, list[str], str]]:
    """SCRIPTS, then any other bench script (added since) with its defaults, so none is missed."""
    known = {name for name, _, _ in SCRIPTS}
    extra = []
    for path in sorted(BENCH.glob("*.py")):
        if path.name in known or path.name == Path(__file__).name or path.name.startswith("_"):
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or path.stem
        summary = re.split(r"[.:](\s|$)", " ".join(doc.split()), maxsplit=1)[0]
        extra.append((path.name, [], summary))
    return SCRIPTS + extra


def machine() -> list[str]:
    try:
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        total_kb = int(next(line.split()[1] for line in meminfo if line.startswith("MemTotal:")))
        memory = f"{total_kb / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        memory = "unknown"
    return [
        f"- CPUs (nproc): {os.cpu_count()}",
        f"- memory: {memory}",
        f"- Python: {platform.python_version()} ({sys.executable})",
        f"- system: {platform.platform()}",
        f"- date: {datetime.now().astimezone().isoformat(timespec='seconds')}",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="script names to run (default: all)")
    args = parser.parse_args()
    chosen = [
        s for s in all_scripts() if not args.only or s[0] in args.only or s[0][:-3] in args.only
    ]
    env = {**os.environ, "COLUMNS": "170", "NO_COLOR": "1", "TERM": "dumb"}
    sections = []
    failed = 0
    for script, extra, what in chosen:
        command = [sys.executable, str(BENCH / script), *extra]
        shown = " ".join([".venv/bin/python", f"bench/{script}", *extra])
        print(f"running {shown} ...", flush=True)
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - started
        output = (proc.stdout + (("\n" + proc.stderr) if proc.stderr.strip() else "")).rstrip()
        status = "" if proc.returncode == 0 else f" — FAILED with exit code {proc.returncode}"
        failed += proc.returncode != 0
        print(output + f"\n({seconds:.0f} s{status})\n", flush=True)
        sections.append(
            f"## {script}: {what}\n\n`{shown}` ({seconds:.0f} s{status})\n\n```\n{output}\n```\n"
        )
    text = (
        "# Benchmark results\n\nWritten by `bench/run_all.py` (`make bench`). Every figure comes "
        "from the offline simulator (provider `sim`), so the ratios, not the dollar amounts, are "
        "the result.\n\n## Machine\n\n" + "\n".join(machine()) + "\n\n" + "\n".join(sections)
    )
    if args.only:
        print("--only given: bench/RESULTS.md left as it was")
    else:
        (BENCH / "RESULTS.md").write_text(text, encoding="utf-8")
        print(f"written: {BENCH / 'RESULTS.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
