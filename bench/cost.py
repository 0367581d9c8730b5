"""Tokens and money per iteration of our protocol against a naive one, on the same simulated evals
(examples/csv-report, same seed): each protocol is one whole simulated run; an iteration's cost is
what the ledger gained while it ran. Never a timed test; prints a table and the ratio.

    .venv/bin/python bench/cost.py [--iterations 3]

The naive protocol is ours with three settings changed, each removing one saving:
  loop.screen_evals=0             no screening: every candidate gets the full benchmark (every train
                                  eval x runs, plus comparisons) before it can lose, where ours first
                                  runs it once on a 2-eval minibatch and stops clear losers there;
  llm.prompt_caching=false        no cache_control breakpoints: the stable prefixes (tool schemas,
                                  system prompts, the skill, rubrics) are billed as fresh input on
                                  every call instead of as cache reads at a tenth of the price;
  selection.max_runs_per_eval=R   no adaptive runs (R = evals.runs_per_eval = 3): every comparison
                                  stops at R runs per eval, decided or not, where ours adds runs
                                  (up to 6) only while the interval straddles zero.
A protocol without our ledger would also pay again for every answer the ledger served (a parent's
comparisons asked again after runs were added): the last column adds that back.
A second naive row runs a fixed 6 runs per eval, the power our adaptive rule reaches at its cap.
The second row is ours with the earlier promotion rule (a fixed-95% bootstrap re-tested after
every added run, no futility stop); the third adds a look's runs only to evals whose runs were
not all identical (selection.runs_to=informative); the fourth judges every pair in both orders
(selection.second_order=always, the earlier protocol). The lines under the table give those rows'
ratios to the naive rows against the targets (≤ 0.5× naive fixed-6, ≤ 1.0× naive fixed-3)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import instrumented_run, print_table  # noqa: E402

NAIVE = ["loop.screen_evals=0", "llm.prompt_caching=false", "selection.max_runs_per_eval=3"]
PROTOCOLS = [
    ("ours (screening, prompt caching, adaptive 3-6 runs)", []),
    ("ours with the earlier rule (selection.rule=bootstrap)", ["selection.rule=bootstrap"]),
    ("ours, extra runs only where informative", ["selection.runs_to=informative"]),
    ("ours, both comparator orders always", ["selection.second_order=always"]),
    ("ours without screening", NAIVE[:1]),
    ("ours without prompt caching", NAIVE[1:2]),
    ("ours without adaptive runs (fixed 3)", NAIVE[2:]),
    ("naive: all three removed (fixed 3 runs)", NAIVE),
    (
        "naive, fixed 6 runs (ours' power at its cap)",
        [
            "loop.screen_evals=0",
            "llm.prompt_caching=false",
            "evals.runs_per_eval=6",
            "selection.max_runs_per_eval=6",
        ],
    ),
]


def per_iteration(phases) -> dict:
    loop_phases = [p for p in phases if p.name.startswith("iteration")]
    n = max(1, len(loop_phases))
    keys = (
        "calls",
        "input_tokens",
        "cache_write_tokens",
        "cache_read_tokens",
        "output_tokens",
        "cost_usd",
        "saved_usd",
        "cache_hits",
    )
    return {k: sum(p.ledger[k] for p in loop_phases) / n for k in keys} | {
        "iterations": len(loop_phases)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, overrides) in enumerate(PROTOCOLS):
            # The same seed everywhere: the protocols face the same first candidates, and later
            # ones as far as their own decisions let them.
            phases, _stats = instrumented_run(
                Path(tmp) / f"run-{i}", overrides=overrides, iterations=args.iterations
            )
            results.append((name, per_iteration(phases)))
    ours = results[0][1]
    rows = []
    for name, r in results:
        with_ledger = r["cost_usd"]
        without = r["cost_usd"] + r["saved_usd"]
        rows.append(
            [
                name,
                f"{r['calls']:.0f}",
                f"{r['input_tokens']:,.0f}",
                f"{r['cache_write_tokens']:,.0f}",
                f"{r['cache_read_tokens']:,.0f}",
                f"{r['output_tokens']:,.0f}",
                f"{with_ledger:.3f}",
                f"{with_ledger / ours['cost_usd']:.2f}",
                f"{without:.3f}",
                f"{without / ours['cost_usd']:.2f}",
            ]
        )
    print_table(
        f"Cost per iteration (simulated, examples/csv-report, {args.iterations} iterations, "
        "2 proposals each; prices of config.toml)",
        [
            "protocol",
            "calls",
            "input tok",
            "cache write tok",
            "cache read tok",
            "output tok",
            "USD",
            "ratio",
            "USD w/o ledger",
            "ratio w/o ledger",
        ],
        rows,
        [
            f"ratio = protocol's USD per iteration / ours (${ours['cost_usd']:.3f}); "
            "'w/o ledger' adds what the ledger's answers saved (cache_hits.saved_usd).",
            "Each row is its own run: its decisions (and so its later candidates) can differ from "
            "ours, so a row's cost per iteration also reflects the path it took.",
            "Simulated token counts follow the request text (4 characters a token); the ratios, not "
            "the dollar figures, are the result.",
        ],
    )
    by_name = dict(results)
    fixed3 = by_name["naive: all three removed (fixed 3 runs)"]["cost_usd"]
    fixed6 = by_name["naive, fixed 6 runs (ours' power at its cap)"]["cost_usd"]
    for name, r in results[:4]:
        x3, x6 = r["cost_usd"] / fixed3, r["cost_usd"] / fixed6
        print(
            f"{name}: {x6:.2f}x naive fixed-6 (target ≤ 0.5: {'ok' if x6 <= 0.5 else 'NO'}), "
            f"{x3:.2f}x naive fixed-3 (target ≤ 1.0: {'ok' if x3 <= 1.0 else 'NO'})"
        )


if __name__ == "__main__":
    main()
