"""Pools the worlds of several bench/peers.py outputs at one budget into one night line: the same
figures as peers.py's last lines (paired over worlds), over every world the outputs printed.

    .venv/bin/python bench/peers_pool.py --budget-usd 4 out-7801.txt out-7811.txt

Reads the per-world lines ("  csv-report seed 7801: v0 0.335; ours +0.283 $1.49, …"); outputs of
other methods on the same worlds join theirs (the same method printed twice with other figures is
an error, as is a method missing from one world). `--ours` names the method that stands for ours. Worse than v0 is read from the
printed gain (below −0.0005), where peers.py asks the arena, which settles near-ties with 4,000
runs an eval: the two differ only on worlds whose printed gain rounds to ±0.000."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH)]

from peers.stats import Unit, fmt_ratio, mean_gain, mean_interval, paired_ratio, worse_rate  # noqa: E402 - the bench runs from a checkout

WORLD = re.compile(r"^\s+(?P<skill>[\w-]+) seed (?P<seed>\d+): v0 [\d.]+; (?P<rest>.+)$")
METHOD = re.compile(r"(?P<name>[\w+-]+) (?P<gain>[+-]\d+\.\d+) \$(?P<usd>\d+\.\d+)")
PEERS = ("gepa", "gepa+merge", "skillopt", "greedy")


def worlds(paths: list[Path]) -> dict[tuple[str, int], dict[str, tuple[float, float]]]:
    found: dict[tuple[str, int], dict[str, tuple[float, float]]] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            m = WORLD.match(line)
            if not m:
                continue
            key = (m["skill"], int(m["seed"]))
            cell = found.setdefault(key, {})
            for x in METHOD.finditer(m["rest"]):
                got = (float(x["gain"]), float(x["usd"]))
                # The spend of a night the budget ends may differ by the calls in flight at the
                # stop (a few cents); the gain may not.
                if cell.setdefault(x["name"], got)[0] != got[0]:
                    raise SystemExit(
                        f"{path}: {key[0]} seed {key[1]}: {x['name']} printed twice with "
                        "different gains; pool outputs of the same code."
                    )
    return found


def units(found: dict, method: str) -> list[Unit]:
    out = []
    for (skill, seed), cell in sorted(found.items()):
        if method not in cell:
            raise SystemExit(f"{skill} seed {seed}: no {method}; pool outputs of the same methods.")
        gain, usd = cell[method]
        out.append(Unit(skill, seed, gain, None, gain < -0.0005, usd))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-usd", type=float, required=True)
    parser.add_argument("--ours", default="ours", help="the method that stands for ours")
    parser.add_argument("outputs", nargs="+", type=Path)
    args = parser.parse_args()
    found = worlds(args.outputs)
    methods = sorted({m for cell in found.values() for m in cell})
    for m in methods:
        us = units(found, m)
        spent = sum(u.usd for u in us) / len(us)
        print(f"{m}: {mean_gain(us):+.3f} at ${spent:.2f}, worse than v0 {worse_rate(us):.0%}")
    ours = units(found, args.ours)
    peers = [m for m in methods if m in PEERS]
    best = max(peers, key=lambda m: mean_gain(units(found, m)))
    theirs = units(found, best)
    point, lo, hi = paired_ratio(ours, theirs, figure=mean_gain)
    diff, dlo, dhi = mean_interval([a.gain - b.gain for a, b in zip(ours, theirs, strict=True)])
    per, _, _ = paired_ratio(ours, theirs)
    spend = {m: sum(u.usd for u in units(found, m)) / len(found) for m in (args.ours, best)}
    print(
        f"night ${args.budget_usd:g} ({len(found)} worlds): {args.ours} {mean_gain(ours):+.3f} at "
        f"${spend[args.ours]:.2f}, best peer {best} {mean_gain(theirs):+.3f} at ${spend[best]:.2f}, "
        f"gain ratio {fmt_ratio(point)} [{fmt_ratio(lo)}, {fmt_ratio(hi)}], ours − best "
        f"{diff:+.3f} [{dlo:+.3f}, {dhi:+.3f}], gain/$ ratio {fmt_ratio(per)}; worse than v0: "
        f"ours {worse_rate(ours):.0%}, best peer {worse_rate(theirs):.0%}"
    )


if __name__ == "__main__":
    main()
