"""A fleet night against its alternatives, on fleets of the eight foreign skills of
tests/fixtures/foreign (skills and evals the project did not write for the world; each has clear.md,
clear instructions written by hand), one fleet per sim.seed (the world and its noise), at each
budget B:
- allocated: `optimizer run SKILL_DIR... --budget-usd B`, one fleet night;
- equal split: each skill its own night at B/N;
- oracle: each skill its own night at a share of B proportional to its true headroom (its sealed
  score with clear.md appended to SKILL.md, less v0's, both measured by the product under the same
  seed), none to a skill without headroom, never below the night's minimum (a bound, not a method).
Each method is scored by the product's own score on the sealed evals: the sum over skills of each
night's final best over v0, both scored again on the sealed evals at 10 runs an eval in the same
world (a night's own sealed test runs 3, too few to compare methods on 2 sealed evals a skill);
0 where v0 is kept. The ratio's interval is a bootstrap over fleets (2,000 draws, 95 %).

    .venv/bin/python bench/fleet.py --seeds 400-405 --budget-usd 10 20 [--jobs 2]

Last line per budget: `fleet $B (N skills, W fleets): allocated +G at $S, equal split +G at $S,
ratio R [lo, hi], oracle +G`.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOREIGN = ROOT / "tests" / "fixtures" / "foreign"
OPTIMIZER = Path(sys.executable).parent / "optimizer"
sys.path.insert(0, str(ROOT))

from optimizer.inputs.skill import content_hash  # noqa: E402 - the bench runs from a checkout
from optimizer.store.files import Workspace  # noqa: E402

MINIMUM_USD = 1.2  # the foreign skills' night minimum is $1.06 to $1.15 (`run --dry-run`)


def seeds_of(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def skills() -> list[Path]:
    return sorted(p for p in FOREIGN.iterdir() if (p / "clear.md").is_file())


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(OPTIMIZER), *args], capture_output=True, text=True, check=False)


def _status(folder: Path) -> dict:
    return json.loads(_run(["status", str(folder), "--json"]).stdout or "{}")


RESCORE_RUNS = 10  # runs per sealed eval when a final best is scored again (the night's use 3)
_scores: dict[tuple[str, int], float] = {}
_lock = threading.Lock()


def sealed_score(folder: Path, seed: int, tmp: Path) -> float:
    """The product's score of a skill folder on its sealed evals, RESCORE_RUNS runs each, in world
    `seed` (a night with no iteration: v0 is the folder); once per content."""
    key = (content_hash(folder), seed)
    with _lock:
        if key in _scores:
            return _scores[key]
    out = tmp / f"score-{key[0]}-{seed}"
    _run(
        ["run", str(folder), "--provider", "sim", "--max-iterations", "0", "--out", str(out)]
        + ["--fresh", "--unconfined", "--set", f"sim.seed={seed}"]
        + ["--set", f"evals.runs_per_eval={RESCORE_RUNS}"]
    )
    versions = (_status(out).get("test") or {}).get("versions") or {}
    score = float((versions.get("v0") or {}).get("score") or 0.0)
    with _lock:
        _scores[key] = score
    return score


def gain_of(run_dir: Path, skill: Path, seed: int, tmp: Path) -> tuple[float, float]:
    """(the final best's sealed score over v0's, both scored again; 0 where v0 is kept; spend)."""
    status = _status(run_dir)
    best = (status.get("current_best") or {}).get("version") or "v0"
    usd = float(status.get("budgeted_usd") or 0.0)
    if best == "v0":
        return 0.0, usd
    # A version's snapshot holds the skill without its evals/: they come from the skill's folder.
    best_dir = tmp / f"best-{content_hash(Workspace(run_dir).skill(best))}" / skill.name
    with _lock:
        if not best_dir.exists():
            shutil.copytree(Workspace(run_dir).skill(best), best_dir)
            shutil.copytree(skill / "evals", best_dir / "evals", dirs_exist_ok=True)
    return sealed_score(best_dir, seed, tmp) - sealed_score(skill, seed, tmp), usd


def night(skill: Path, budget: float, seed: int, tmp: Path, name: str) -> tuple[float, float]:
    if budget < MINIMUM_USD:
        return 0.0, 0.0
    out = tmp / name
    cmd = ["run", str(skill), "--provider", "sim", "--budget-usd", f"{budget:.2f}", "--out"]
    cmd += [str(out), "--fresh", "--unconfined", "--set", f"sim.seed={seed}"]
    done = _run(cmd)
    if done.returncode != 0:
        print(f"  {skill.name} at ${budget:.2f}: {done.stderr.strip()[-200:]}", file=sys.stderr)
        return 0.0, 0.0
    return gain_of(out, skill, seed, tmp)


def fleet(budget: float, seed: int, tmp: Path) -> tuple[float, float]:
    out = tmp / f"fleet-{seed}-{budget:g}"
    cmd = ["run", *map(str, skills()), "--provider", "sim", "--budget-usd", f"{budget:.2f}"]
    cmd += ["--out", str(out), "--fresh", "--unconfined", "--set", f"sim.seed={seed}"]
    done = _run(cmd)
    if done.returncode != 0:
        print(f"  fleet seed {seed}: {done.stderr.strip()[-300:]}", file=sys.stderr)
        return 0.0, 0.0
    info = json.loads(_run(["status", str(out), "--json"]).stdout)
    by_name = {s.name: s for s in skills()}
    gains = [gain_of(Path(m["run_dir"]), by_name[m["name"]], seed, tmp)[0] for m in info["members"]]
    return sum(gains), float(info["budgeted_usd"])


def headroom(skill: Path, seed: int, tmp: Path) -> float:
    """The skill's sealed score with clear.md appended to SKILL.md, less v0's, in world `seed`."""
    clear = tmp / f"clear-{skill.name}-{seed}" / skill.name
    with _lock:
        if not clear.exists():
            shutil.copytree(skill, clear)
            md = clear / "SKILL.md"
            md.write_text(md.read_text() + "\n" + (skill / "clear.md").read_text())
    return sealed_score(clear, seed, tmp) - sealed_score(skill, seed, tmp)


def one_fleet(budget: float, seed: int, tmp: Path) -> dict:
    members = skills()
    alloc = fleet(budget, seed, tmp)
    share = budget / len(members)
    equal = [night(s, share, seed, tmp, f"eq-{s.name}-{seed}-{budget:g}") for s in members]
    heads = {s.name: max(0.0, headroom(s, seed, tmp)) for s in members}
    total = sum(heads.values())
    oracle = [
        night(
            s,
            max(MINIMUM_USD, budget * heads[s.name] / total),
            seed,
            tmp,
            f"or-{s.name}-{seed}-{budget:g}",
        )
        if total > 0 and heads[s.name] > 0
        else (0.0, 0.0)
        for s in members
    ]
    return {
        "seed": seed,
        "allocated": alloc,
        "equal": (sum(g for g, _ in equal), sum(u for _, u in equal)),
        "oracle": (sum(g for g, _ in oracle), sum(u for _, u in oracle)),
        "headroom": heads,
    }


def ratio_interval(rows: list[dict], draws: int = 2000) -> tuple[float, float, float]:
    def ratio(sample: list[dict]) -> float:
        eq = sum(r["equal"][0] for r in sample)
        return sum(r["allocated"][0] for r in sample) / eq if eq > 0 else float("nan")

    rng = random.Random(0)
    boots = sorted(
        r for r in (ratio([rng.choice(rows) for _ in rows]) for _ in range(draws)) if r == r
    )
    if not boots:
        return ratio(rows), float("nan"), float("nan")
    return ratio(rows), boots[int(0.025 * len(boots))], boots[int(0.975 * len(boots)) - 1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="400-405")
    parser.add_argument("--budget-usd", type=float, nargs="+", default=[10.0, 20.0])
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    seeds = seeds_of(args.seeds)
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        for budget in args.budget_usd:
            with ThreadPoolExecutor(args.jobs) as pool:
                rows = list(pool.map(lambda s, b=budget: one_fleet(b, s, Path(tmp)), seeds))
            print(f"{'seed':>5} {'allocated':>16} {'equal split':>16} {'oracle':>16}")
            for r in rows:
                cells = [
                    f"{r[k][0]:+.3f} at ${r[k][1]:.2f}" for k in ("allocated", "equal", "oracle")
                ]
                print(f"{r['seed']:>5} " + " ".join(f"{c:>16}" for c in cells))
            g = {k: sum(r[k][0] for r in rows) for k in ("allocated", "equal", "oracle")}
            usd = {k: sum(r[k][1] for r in rows) for k in ("allocated", "equal", "oracle")}
            ratio, lo, hi = ratio_interval(rows)
            print(
                f"fleet ${budget:g} ({len(skills())} skills, {len(rows)} fleets): allocated "
                f"{g['allocated']:+.3f} at ${usd['allocated']:.2f}, equal split {g['equal']:+.3f} "
                f"at ${usd['equal']:.2f}, ratio {ratio:.2f} [{lo:.2f}, {hi:.2f}], oracle "
                f"{g['oracle']:+.3f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
