"""The anytime picture of bench/peers.py: sealed gain over v0 (the world's expected score of the
method's current choice minus v0's) against dollars spent, averaged over worlds on a common
dollar grid, one panel per file of `bench/peers.py --traces`.

    .venv/bin/python bench/peers/anytime.py --out docs/peers-anytime.png /tmp/peers-1.6.json ...

A method whose current choice is observable (ours and its variants, from the ledger's decisions;
greedy, from its own loop; an adoption method, whose user has v0 until the adoption certifies)
is a curve: in each world the choice's gain holds from the dollar it was made until the next
choice, and the final one beyond the world's last dollar. A peer whose current choice is not
observable (GEPA, SkillOpt) is its mean final point only. Needs matplotlib (the [bench] extra)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

GRID_POINTS = 200
# Drawn in this order, with these colours; a method not listed is drawn after them in grey.
STYLE = {
    "ours": ("tab:blue", "-"),
    "ours+adopt": ("tab:blue", "--"),
    "ours-cheap": ("tab:green", "-"),
    "ours-cheap+adopt": ("tab:green", "--"),
    "ours-guarded": ("tab:brown", "-"),
    "ours-patience-1": ("tab:cyan", "-"),
    "greedy": ("tab:gray", "-"),
    "gepa": ("tab:orange", "o"),
    "gepa+merge": ("tab:red", "s"),
    "skillopt": ("tab:purple", "D"),
}


def gain_at(trace: list[list[float]], v0: float, usd: float) -> float:
    """The gain of the choice in force at `usd`: the last one made at or before it, v0 (0) before
    the first."""
    score = v0
    for spent, sealed in trace:
        if spent > usd + 1e-12:
            break
        score = sealed
    return score - v0


def grid(data: dict) -> list[float]:
    """Dollars from 0 to the most any method spent in any world."""
    top = max(
        (m["usd"] for w in data["worlds"] for m in w["methods"].values()),
        default=data["budget_usd"],
    )
    return [top * i / (GRID_POINTS - 1) for i in range(GRID_POINTS)]


def mean_curve(data: dict, method: str, dollars: list[float]) -> list[float] | None:
    """The mean over worlds of the method's gain at each dollar; None if any world's choice over
    time is not observable for it."""
    worlds = [w for w in data["worlds"] if method in w["methods"]]
    if not worlds or any(w["methods"][method]["trace"] is None for w in worlds):
        return None
    return [
        math.fsum(gain_at(w["methods"][method]["trace"], w["v0"] or 0.0, x) for w in worlds)
        / len(worlds)
        for x in dollars
    ]


def final_point(data: dict, method: str) -> tuple[float, float]:
    """(mean dollars spent, mean final gain) over the worlds."""
    found = [w["methods"][method] for w in data["worlds"] if method in w["methods"]]
    v0s = [w["v0"] or 0.0 for w in data["worlds"] if method in w["methods"]]
    usd = math.fsum(m["usd"] for m in found) / len(found)
    gain = math.fsum((m["sealed"] or 0.0) - v for m, v in zip(found, v0s, strict=True)) / len(found)
    return usd, gain


def methods_of(data: dict) -> list[str]:
    seen = {m for w in data["worlds"] for m in w["methods"]}
    return [m for m in STYLE if m in seen] + sorted(seen - set(STYLE))


def draw(files: list[Path], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(6.2 * len(panels) + 1.6, 4.6), squeeze=False, sharey=True
    )
    for ax, data in zip(axes[0], panels, strict=True):
        dollars = grid(data)
        for m in methods_of(data):
            colour, mark = STYLE.get(m, ("tab:gray", ":"))
            usd, gain = final_point(data, m)
            curve = mean_curve(data, m, dollars)
            if curve is not None:
                ax.plot(dollars, curve, mark, color=colour, label=m, linewidth=1.6)
                ax.plot([usd], [gain], "|", color=colour, markersize=12)
            else:
                ax.plot([usd], [gain], mark, color=colour, label=f"{m} (final only)", markersize=7)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.axvline(data["budget_usd"], color="black", linewidth=0.6, linestyle=":")
        ax.set_title(
            f"${data['budget_usd']:g} a world, {len(data['worlds'])} worlds "
            f"({', '.join(data['skills'])}; seeds {data['seeds']})"
            + (f", at {data['at']}" if data.get("at") else ""),
            fontsize=9,
        )
        ax.set_xlabel("dollars spent (mean final spend marked |)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("sealed gain over v0 (world's expected score)")
    handles, labels = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="center right")
    fig.text(
        0.01,
        0.01,
        "Mean over worlds of the current choice's gain at each dollar. GEPA and SkillOpt: final "
        "point only (their current choice during the search is not observable from the ledger). "
        "+adopt: v0 until the adoption certifies. Dotted: the budget.",
        fontsize=7,
    )
    fig.tight_layout(rect=(0, 0.04, 0.86, 1))
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("traces", type=Path, nargs="+", help="files of bench/peers.py --traces")
    args = parser.parse_args(argv)
    draw(args.traces, args.out)
    for f in args.traces:
        data = json.loads(f.read_text(encoding="utf-8"))
        print(f"${data['budget_usd']:g}: " + "; ".join(summary(data)))
    return 0


def summary(data: dict) -> list[str]:
    """Each curve's mean gain at a quarter, half and all of the budget (the text beside the
    picture)."""
    budget = data["budget_usd"]
    marks = [budget / 4, budget / 2, budget]
    out = []
    for m in methods_of(data):
        curve = mean_curve(data, m, marks)
        if curve is not None:
            out.append(
                f"{m} " + " ".join(f"${x:g} {g:+.3f}" for x, g in zip(marks, curve, strict=True))
            )
    return out


if __name__ == "__main__":
    sys.exit(main())
