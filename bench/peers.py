"""Side by side with GEPA and SkillOpt: the same simulated world, skill, starting skill and dollar
budget (from the ledger) for our loop (its default night, a cheap-step night, each also followed
by `optimizer adopt`), GEPA's `optimize` (merge off and on), SkillOpt's trainer, a greedy
baseline and the original skill. Never a timed test; prints a table and the ratios.

    .venv/bin/python bench/peers.py [--seeds 1-2] [--budget-usd 3] [--skills csv-report,release-notes]

Per (skill, seed): the sealed-test score of the final skill minus v0's, where a version's score
is the world's own expected judged pass rate on the sealed evals (optimizer/sim/expected.py, 200
runs of each, no model call; the same for every method), the fraction of the headroom to the
world's ceiling it captures, whether it ends worse than v0 (within 0.01 of v0, settled at 4000
runs an eval), and dollars, model calls, executor runs and wall time of the search (an
adoption's fresh runs included). Across seeds: gain per dollar (total gain / total spend) and
paired bootstrap intervals over the (skill, seed) units.
Peers run through their own packages (the [peers] extra); where their prompts cannot be answered
by the simulator our proposer sits behind their proposal hook (bench/peers/gepa_peer.py and
skillopt_peer.py say where), so what differs is search and selection. docs/peers.md compares the
designs. The table is also written to bench/RESULTS.md (a section per budget and seeds, replaced
by the next run of both) unless --no-write; --traces writes each world's anytime curve as JSON
for bench/peers/anytime.py to draw."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH)]

from peers.arena import run_settings  # noqa: E402 - the bench runs from a checkout
from peers.methods import ADOPTED, AFTER_NIGHT, METHODS, PEERS, Outcome, run_method  # noqa: E402
from peers.product import remeasure  # noqa: E402
from peers.stats import (  # noqa: E402
    Unit,
    fmt_ratio,
    mean_gain,
    mean_interval,
    paired_ratio,
    per_dollar,
    worse_rate,
)

SKILLS = {
    "csv-report": ROOT / "examples" / "csv-report",
    "release-notes": BENCH / "peers" / "skills" / "release-notes",
    # The same task with 30 evals (22 train, 8 sealed): where a decision's runs are cheap relative
    # to what they confirm. Not in the default set; each world costs about 3x a small one.
    "release-notes-30": BENCH / "peers" / "skills" / "release-notes-30",
}
DEFAULT_SKILLS = ("csv-report", "release-notes")
SECTION = "## peers.py:"


class Usage(Exception):
    """Bad input: one sentence, exit 2."""


def parse_seeds(text: str) -> list[int]:
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", text.strip())
    if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
        raise Usage(f"--seeds {text!r}: give one seed or a range A-B with A <= B, e.g. 1-20.")
    first = int(m.group(1))
    return list(range(first, int(m.group(2) or first) + 1))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-2", help="A-B: one world per seed and skill")
    parser.add_argument("--budget-usd", type=float, default=3.0, help="per method, skill and seed")
    parser.add_argument(
        "--skills", default=",".join(DEFAULT_SKILLS), help="comma-separated: " + ", ".join(SKILLS)
    )
    parser.add_argument(
        "--methods", default=",".join(METHODS), help="comma-separated: " + ", ".join(METHODS)
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for every method (the world's, e.g. sim.proposal_quality=0.4)",
    )
    parser.add_argument(
        "--sealed",
        choices=("expected", "product"),
        default="expected",
        help="the sealed score: the world's expected judged pass rate (no model call), or the "
        "product's score of fresh runs (structural checks, judged expectations, rubric; "
        "bench/peers/product.py)",
    )
    parser.add_argument(
        "--sealed-runs",
        type=int,
        default=60,
        help="fresh runs a sealed eval under --sealed product",
    )
    parser.add_argument("--no-write", action="store_true", help="leave bench/RESULTS.md as it is")
    parser.add_argument(
        "--at",
        default=None,
        help="the code measured, named in bench/RESULTS.md's section title (default: the "
        "checkout's commit, when it is a git checkout)",
    )
    parser.add_argument(
        "--traces", type=Path, help="write every world's anytime curves here (JSON)"
    )
    args = parser.parse_args(argv)
    args.seed_list = parse_seeds(args.seeds)
    if args.sealed_runs < 1:
        raise Usage(
            f"--sealed-runs {args.sealed_runs}: give at least 1 run a sealed eval, e.g. 60."
        )
    if not args.budget_usd > 0:
        raise Usage(f"--budget-usd {args.budget_usd}: give a positive number of dollars, e.g. 3.")
    args.skill_list = [s.strip() for s in args.skills.split(",") if s.strip()]
    unknown = [s for s in args.skill_list if s not in SKILLS]
    if unknown or not args.skill_list:
        raise Usage(
            f"--skills: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(SKILLS)}."
        )
    chosen = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in METHODS]
    if unknown:
        raise Usage(f"--methods: unknown {', '.join(unknown)}; choose from {', '.join(METHODS)}.")
    # v0 is every gain's reference, and ours is what the ratio is of.
    args.method_list = [m for m in METHODS if m in chosen or m in ("original", "ours")]
    if any(m in PEERS for m in args.method_list) and not peers_installed():
        raise Usage(
            "GEPA and SkillOpt are not installed: `pip install -e '.[peers]'`, or pass "
            "--methods without them."
        )
    return args


def peers_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("gepa", "skillopt"))


def run_all(args: argparse.Namespace, tmp: Path) -> dict[tuple[str, int], dict[str, Outcome]]:
    results: dict[tuple[str, int], dict[str, Outcome]] = {}
    for skill in args.skill_list:
        for seed in args.seed_list:
            overrides = run_settings(SKILLS[skill], seed, args.set)
            cell = results.setdefault((skill, seed), {})
            for method in args.method_list:
                # An adoption runs in its night's folder, after the night was measured there.
                night = AFTER_NIGHT.get(method, method)
                run_dir = tmp / f"{skill}-{seed}-{night.replace('+', '-')}"
                cell[method] = run_method(
                    method,
                    SKILLS[skill],
                    run_dir,
                    overrides,
                    args.budget_usd,
                    night=cell.get(night) if method in AFTER_NIGHT else None,
                )
            if args.sealed == "product":
                dirs = {
                    m: tmp / f"{skill}-{seed}-{AFTER_NIGHT.get(m, m).replace('+', '-')}"
                    for m in cell
                }
                cell.update(remeasure(cell, dirs, args.sealed_runs))
            v0 = cell["original"].sealed
            print(
                f"  {skill} seed {seed}: v0 {v0:.3f}; "
                + ", ".join(
                    f"{m} {(o.sealed or 0) - (v0 or 0):+.3f} ${o.usd:.2f}"
                    for m, o in cell.items()
                    if m != "original"
                ),
                flush=True,
            )
    return results


def units(results: dict, method: str) -> list[Unit]:
    out = []
    for (skill, seed), cell in sorted(results.items()):
        o, v0 = cell[method], cell["original"].sealed or 0.0
        gain = (o.sealed or 0.0) - v0
        room = o.ceiling - v0
        # Worse as the arena settled it (near-ties at 4000 runs an eval), else by the gain.
        worse = o.worse if o.worse is not None else gain < -1e-9
        out.append(Unit(skill, seed, gain, gain / room if room > 1e-9 else None, worse, o.usd))
    return out


def method_rows(results: dict, methods: list[str]) -> list[list[str]]:
    rows = []
    ours = units(results, "ours")
    for m in methods:
        us = units(results, m)
        outs = [cell[m] for _, cell in sorted(results.items())]
        gain, lo, hi = mean_interval([u.gain for u in us])
        rooms = [u.headroom for u in us if u.headroom is not None]
        diff = mean_interval([a.gain - b.gain for a, b in zip(ours, us, strict=True)])
        rows.append(
            [
                m,
                f"{gain:+.3f} [{lo:+.3f}, {hi:+.3f}]",
                f"{sum(rooms) / len(rooms):+.2f}" if rooms else "-",
                f"{worse_rate(us):.0%}",
                f"{_mean([o.usd for o in outs]):.2f}",
                f"{_mean([o.calls for o in outs]):.0f}",
                f"{_mean([o.runs for o in outs]):.0f}",
                f"{_mean([o.wall_s for o in outs]):.1f}",
                f"{per_dollar(us):+.4f}",
                "-" if m == "ours" else f"{diff[0]:+.3f} [{diff[1]:+.3f}, {diff[2]:+.3f}]",
            ]
        )
    return rows


def skill_rows(results: dict, methods: list[str], skills: list[str]) -> list[list[str]]:
    """Gain per dollar by skill: where a peer wins a cell, this is the cell."""
    rows = []
    for skill in skills:
        sub = {k: v for k, v in results.items() if k[0] == skill}
        row = [skill]
        for m in methods:
            us = units(sub, m)
            row.append(f"{per_dollar(us):+.4f} ({worse_rate(us):.0%} worse)")
        rows.append(row)
    return rows


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def stop_bound(results: dict, methods: list[str]) -> str | None:
    """Ours as if it had stopped at its last win (or after its setup when nothing won): the same
    gains for less money, the most any stop rule could make of our decisions."""
    peers = [m for m in methods if m in PEERS]
    if not peers:
        return None
    ours = [
        replace(u, usd=cell["ours"].usd_at_last_win)
        for u, (_, cell) in zip(units(results, "ours"), sorted(results.items()), strict=True)
        if cell["ours"].usd_at_last_win is not None
    ]
    best = max(peers, key=lambda m: per_dollar(units(results, m)))
    point, lo, hi = paired_ratio(ours, units(results, best))
    return (
        f"ours stopped at its last win (no stop rule spends less for the same decisions): "
        f"${_mean([u.usd for u in ours]):.2f} a world, gain/$ {per_dollar(ours):.4f}, ratio to "
        f"{best} {fmt_ratio(point)} [{fmt_ratio(lo)}, {fmt_ratio(hi)}]"
    )


# The verdict lines: each of our methods against the best peer, the default night first.
VERDICTS = {
    "ours": "peers",
    "ours+adopt": "peers (ours + adoption)",
    "ours-cheap": "peers (ours-cheap)",
    "ours-cheap+adopt": "peers (ours-cheap + adoption)",
    "ours+confirm": "peers (ours, its best confirmed on fresh runs)",
}


def verdicts(results: dict, methods: list[str]) -> list[str]:
    """One line per our method that ran (`peers: ours ...` first): its gain per dollar, the best
    peer's (the peer with the most), the paired ratio with its interval, and both worse-than-v0
    rates."""
    peers = [m for m in methods if m in PEERS]
    best = max(peers, key=lambda m: per_dollar(units(results, m))) if peers else None
    lines = []
    for mine, title in VERDICTS.items():
        if mine not in methods:
            continue
        ours = units(results, mine)
        if best is None:
            lines.append(
                f"{title}: {mine} gain/$ {per_dollar(ours):.4f}, best peer none gain/$ -, "
                f"ratio - [-, -]; worse than v0: {mine} {worse_rate(ours):.0%}, best peer -"
            )
            continue
        theirs = units(results, best)
        point, lo, hi = paired_ratio(ours, theirs)
        lines.append(
            f"{title}: {mine} gain/$ {per_dollar(ours):.4f}, best peer {best} gain/$ "
            f"{per_dollar(theirs):.4f}, ratio {fmt_ratio(point)} [{fmt_ratio(lo)}, "
            f"{fmt_ratio(hi)}]; worse than v0: {mine} {worse_rate(ours):.0%}, best peer "
            f"{worse_rate(theirs):.0%}"
        )
    return lines


# The methods a night is compared with: the peers and the greedy baseline.
NIGHT_PEERS = (*PEERS, "greedy")


def night_line(results: dict, methods: list[str], budget_usd: float) -> str | None:
    """The bench's last line at one budget (issue 48): ours' mean sealed gain and spend, the best
    peer's (the highest mean final gain), the paired gain ratio and difference with their 95%
    intervals over worlds, the gain-per-dollar ratio, and both worse-than-v0 rates."""
    peers = [m for m in methods if m in NIGHT_PEERS]
    if "ours" not in methods or not peers:
        return None
    ours = units(results, "ours")
    best = max(peers, key=lambda m: mean_gain(units(results, m)))
    theirs = units(results, best)
    point, lo, hi = paired_ratio(ours, theirs, figure=mean_gain)
    diff, dlo, dhi = mean_interval([a.gain - b.gain for a, b in zip(ours, theirs, strict=True)])
    per, _, _ = paired_ratio(ours, theirs)

    def spend(us: list[Unit]) -> str:
        return f"${_mean([u.usd for u in us]):.2f}"

    return (
        f"night ${budget_usd:g}: ours {mean_gain(ours):+.3f} at {spend(ours)}, best peer {best} "
        f"{mean_gain(theirs):+.3f} at {spend(theirs)}, gain ratio {fmt_ratio(point)} "
        f"[{fmt_ratio(lo)}, {fmt_ratio(hi)}], ours − best {diff:+.3f} [{dlo:+.3f}, {dhi:+.3f}], "
        f"gain/$ ratio {fmt_ratio(per)}; worse than v0: ours {worse_rate(ours):.0%}, best peer "
        f"{worse_rate(theirs):.0%}"
    )


def adoption_lines(results: dict, methods: list[str]) -> list[str]:
    """What the adoptions did: how often the night's best was certified, and what it cost."""
    out = []
    for m in (m for m in methods if m in ADOPTED):
        outs = [cell[m] for _, cell in sorted(results.items())]
        tried = [o for o in outs if o.certified is not None]
        certified = sum(bool(o.certified) for o in tried)
        cost = (
            f"an adoption cost ${_mean([o.adopt_usd for o in tried]):.2f} on average"
            if tried
            else "no adoption ran"
        )
        out.append(
            f"{m}: the night's best was v0 in {len(outs) - len(tried)} of {len(outs)} worlds; "
            f"{certified} of the {len(tried)} adoptions certified; {cost} (the night "
            f"${_mean([o.usd - o.adopt_usd for o in outs]):.2f})"
        )
    return out


def traces(args: argparse.Namespace, results: dict) -> dict:
    """Every world's final point and, where observable, anytime curve, per method (JSON)."""
    worlds = []
    for (skill, seed), cell in sorted(results.items()):
        worlds.append(
            {
                "skill": skill,
                "seed": seed,
                "v0": cell["original"].sealed,
                "methods": {
                    m: {"usd": o.usd, "sealed": o.sealed, "trace": o.trace}
                    for m, o in cell.items()
                    if m != "original"
                },
            }
        )
    return {
        "budget_usd": args.budget_usd,
        "seeds": args.seeds,
        "at": args.at if args.at is not None else commit(),
        "skills": args.skill_list,
        "worlds": worlds,
    }


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


METHOD_HEADER = [
    "method",
    "sealed gain vs v0 [95% CI]",
    "headroom captured",
    "worse than v0",
    "USD",
    "model calls",
    "executor runs",
    "wall s",
    "gain/$",
    "ours − method [95% CI]",
]


def report(args: argparse.Namespace, results: dict) -> list[str]:
    methods = args.method_list
    searched = [m for m in methods if m != "original"]
    any_cell = next(iter(next(iter(results.values())).values()))
    n = len(results)
    lines = [
        f"{n} worlds ({', '.join(args.skill_list)} × seeds {args.seeds}), budget ${args.budget_usd:g} "
        f"per method and world; ceiling: {any_cell.ceiling_source}; means per world.",
        "",
        markdown(METHOD_HEADER, method_rows(results, searched)),
        "",
        "gain per dollar by skill:",
        "",
        markdown(["skill", *searched], skill_rows(results, searched, args.skill_list)),
        "",
        "notes per world: "
        + "; ".join(
            f"{skill}/{seed} {m}: {o.note}"
            for (skill, seed), cell in sorted(results.items())
            for m, o in cell.items()
            if o.note and m in PEERS and seed == args.seed_list[0]
        ),
    ]
    adopted = adoption_lines(results, methods)
    if adopted:
        lines += ["", "adoptions: " + "; ".join(adopted)]
    bound = stop_bound(results, methods)
    return [*lines, "", bound] if bound else lines


def write_results(args: argparse.Namespace, lines: list[str], command: str) -> None:
    path = BENCH / "RESULTS.md"
    text = path.read_text(encoding="utf-8") if path.is_file() else "# Benchmark results\n"
    # The product moves: a run of the same seeds and budget at other code is a section of its own.
    at = args.at if args.at is not None else commit()
    title = (
        f"{SECTION} side by side with GEPA and SkillOpt at ${args.budget_usd:g} a world, "
        f"seeds {args.seeds}" + (f", at {at}" if at else "")
    )
    section = f"{title}\n\n`{command}`\n\n" + "\n".join(lines) + "\n"
    start = text.find(title + "\n")
    if start >= 0:  # replace our section, up to the next one
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + ("\n" + text[end + 1 :] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")


def commit() -> str:
    """The checkout's short commit, "" outside a git checkout (e.g. a `git archive` copy)."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except Usage as exc:
        print(str(exc), file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        results = run_all(args, Path(tmp))
    lines = report(args, results)
    print("\n".join(lines))
    last = verdicts(results, args.method_list)
    night = night_line(results, args.method_list, args.budget_usd)
    last += [night] if night else []
    command = "PYTHONPATH=. .venv/bin/python bench/peers.py " + " ".join(argv or sys.argv[1:])
    if not args.no_write:
        write_results(args, [*lines, "", *last], command.strip())
    if args.traces:
        args.traces.write_text(json.dumps(traces(args, results)) + "\n", encoding="utf-8")
    print("\n".join(last))
    return 0


if __name__ == "__main__":
    sys.exit(main())
