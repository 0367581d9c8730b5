"""What `make demo` shows a new user, under many seeds rather than one: the demo's own command
(examples/csv-report, the simulator, 3 iterations, every other setting at its default) with
sim.seed set, and for each night the final best, its sealed test against v0's, the train evals its
lineage rests on, and whether a winner's change line restates an eval (a run of 7 of an
expectation's words, a check's id) or ends cut short. The last line is the README's figure.

    .venv/bin/python bench/demo.py --seeds 100-119
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sqlite3
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "csv-report"
OPTIMIZER = Path(sys.executable).parent / "optimizer"
sys.path.insert(0, str(ROOT))

from optimizer.search.copied import RUN_WORDS  # noqa: E402 - the bench runs from a checkout

DANGLING = re.compile(r"\b(?:of|as|to|for|with|at|the|a|an|and|or)$", re.I)


def seeds_of(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def _runs(text: str) -> set[tuple[str, ...]]:
    w = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(w[k : k + RUN_WORDS]) for k in range(len(w) - RUN_WORDS + 1)}


def eval_wording() -> tuple[set[tuple[str, ...]], set[str]]:
    evals = json.loads((EXAMPLE / "evals" / "evals.json").read_text())["evals"]
    runs: set[tuple[str, ...]] = set()
    ids: set[str] = set()
    for ev in evals:
        for text in ev.get("expectations", []):
            runs |= _runs(text)
        for check in ev.get("structural_expectations", []):
            runs |= _runs(check.get("description", ""))
            ids.add(check["id"])
    return runs, ids


def night(seed: int, out: Path) -> dict:
    folder = out / f"seed-{seed}"
    cmd = [str(OPTIMIZER), "run", str(EXAMPLE), "--provider", "sim", "--max-iterations", "3"]
    cmd += ["--out", str(folder), "--fresh", "--set", f"sim.seed={seed}", "--unconfined"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"seed": seed, "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    status = json.loads(
        subprocess.run(
            [str(OPTIMIZER), "status", str(folder), "--json"], capture_output=True, text=True
        ).stdout
    )
    history = json.loads((folder / "history.json").read_text())
    test = (status.get("test") or {}).get("versions") or {}
    best = status["current_best"]["version"]
    winners = [v for v in history.get("iterations", []) if v.get("grading_result") == "won"]
    lines = [str(v.get("summary") or "") for v in winners]
    with sqlite3.connect(folder / "state.db") as db:
        split = json.loads(db.execute("select split_json from runs").fetchone()[0] or "{}")
    return {
        "seed": seed,
        "best": best,
        "v0": (test.get("v0") or {}).get("score"),
        "final": (test.get(best) or {}).get("score"),
        "train_evals": len(split.get("train") or []),
        "winner_lines": lines,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="100-119")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    runs, ids = eval_wording()
    with tempfile.TemporaryDirectory(prefix="demo-bench-") as tmp:
        with ThreadPoolExecutor(args.jobs) as pool:
            nights = list(pool.map(lambda s: night(s, Path(tmp)), seeds_of(args.seeds)))
    below = held = same = 0
    deltas, restated, cut = [], 0, 0
    print(f"{'seed':>5} {'best':>5} {'v0 sealed':>9} {'best sealed':>11} {'Δ':>7}  winner lines")
    for n in nights:
        if "error" in n:
            print(f"{n['seed']:>5} error: {n['error']}")
            continue
        v0, final = n["v0"], n["final"]
        delta = None if v0 is None or final is None else final - v0
        if n["best"] == "v0":
            same += 1
        elif delta is not None and delta < 0:
            below += 1
        elif delta is not None:
            held += 1
        if delta is not None:
            deltas.append(delta)
        for line in n["winner_lines"]:
            restated += bool(_runs(line) & runs) or any(f"{i}:" in line for i in ids)
            cut += any(DANGLING.search(p.strip().rstrip(".")) for p in re.split(r"[;:]", line))
        shown = "—" if delta is None else f"{delta:+.3f}"
        print(
            f"{n['seed']:>5} {n['best']:>5} {v0 if v0 is not None else '—':>9} "
            f"{final if final is not None else '—':>11} {shown:>7}  "
            + " | ".join(n["winner_lines"])[:120]
        )
    ok = [n for n in nights if "error" not in n]
    mean = sum(deltas) / len(deltas) if deltas else 0.0
    sd = (
        math.sqrt(sum((d - mean) ** 2 for d in deltas) / (len(deltas) - 1))
        if len(deltas) > 1
        else 0
    )
    half = 1.96 * sd / math.sqrt(len(deltas)) if deltas else 0.0
    train = sorted({n["train_evals"] for n in ok})
    print(
        f"demo (csv-report, sim.seed {args.seeds}, {len(ok)} nights, {train} train evals): final "
        f"best below v0 on the sealed test in {below}, at or above it in {held}, v0 kept in "
        f"{same}; sealed Δ mean {mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]; winner "
        f"lines restating an eval {restated}, cut short {cut}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
