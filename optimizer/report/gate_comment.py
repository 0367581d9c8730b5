"""The gate's verdict for people: a markdown body fit for a pull-request comment (decision,
interval, per-eval differences, cost) and the one line a terminal prints. Never decides anything:
the numbers come from search/gate.py as they are."""

from __future__ import annotations

from optimizer.decide.noninferiority import GateEval, GateResult
from optimizer.report.format import money, num, signed
from optimizer.words import ci

CLEAR_DROP = 0.2  # of an eval's mean score: a drop the gate names whatever its verdict

VERDICT = {
    "not_worse": "✅ not worse",
    "worse": "❌ worse",
    "inconclusive": "❌ not shown to be not worse",
}


def decision_word(result: GateResult) -> str:
    if result.identical:
        return "✅ unchanged"
    if result.invalid_head:
        return "❌ worse"
    if result.test is None:
        return "❌ no decision"
    return VERDICT[result.test.outcome]


def line(result: GateResult) -> str:
    """One line for the terminal and the CI log."""
    if result.test is None:
        return f"{decision_word(result)}: {result.note}"
    return f"{decision_word(result)[:1]} {result.test.reason}"


def markdown(result: GateResult, *, simulated: bool = False) -> str:
    """The pull-request comment. A decision that could not be made says why, never a number."""
    out = [f"## Skill gate: {decision_word(result)}", ""]
    if simulated:
        out += [
            "> **SIMULATED**: every number below comes from the offline simulator, not a model.",
            "",
        ]
    out.append(
        f"BASE `{result.base}` → HEAD `{result.head}`, on the evals of `{result.evals_path}`."
    )
    out.append("")
    out += _test_section(result)
    if result.per_eval:
        out += _per_eval_section(result.per_eval)
    if result.unscored or result.judge_errors:
        out += [
            f"⚠ {result.unscored} of {result.total_runs} runs could not be scored (a failure of our "
            f"infrastructure, after its retries) and {result.judge_errors} had judge errors; each "
            "counts against its side: a failure for HEAD, a pass for BASE.",
            "",
        ]
    out.append(f"Cost: {money(result.cost_usd)}.")
    return "\n".join(out) + "\n"


def _test_section(result: GateResult) -> list[str]:
    """The test's verdict and its numbers, or, when no test could be made, the note saying why."""
    test = result.test
    if test is None:
        return [result.note, ""]
    two_sided = 1 - 2 * (1 - test.confidence)
    return [
        f"**{test.reason}**",
        "",
        "| | value |",
        "|---|---|",
        f"| Δ score (HEAD − BASE, mean over evals) | {signed(test.delta)} |",
        f"| {test.confidence:.0%} lower bound (one-sided) | {signed(test.low)} |",
        f"| {ci(two_sided)} (two-sided) | [{signed(test.low)}, {signed(test.high)}] |",
        f"| margin (HEAD may be worse by less than) | {test.margin} |",
        f"| evals × runs per eval | {test.evals} × {result.runs_per_eval} |",
        "",
        "The gate passes when the lower bound is above −margin (a non-inferiority test, "
        f"Student-t over the {test.units}, as the line above says; the spread is never "
        "taken as zero).",
        "",
    ]


def _per_eval_section(per_eval: dict[int, GateEval]) -> list[str]:
    """The per-eval table, then the drops a reviewer should open whatever the mean says."""
    out = [
        "### Per eval",
        "",
        "| eval | BASE | HEAD | HEAD − BASE | runs (BASE/HEAD) |",
        "|---|---:|---:|---:|---:|",
    ]
    for e, row in per_eval.items():
        name = str(row["name"]).replace("|", "\\|")
        out.append(
            f"| {e} {name} | {num(row['base'])} | {num(row['head'])} | "
            f"{signed(row['diff'])} | {row['base_runs']}/{row['head_runs']} |"
        )
    out.append("")
    return out + _drops(per_eval)


def _drops(per_eval: dict[int, GateEval]) -> list[str]:
    """The largest drop, and every clear drop when there are several."""
    out: list[str] = []
    worst = min(
        ((row["diff"], e) for e, row in per_eval.items() if row["diff"] is not None), default=None
    )
    if worst is not None and worst[0] < 0:
        # The mean over few evals can hide an edit that breaks one task (bench/gate.py, "sparse").
        out += [
            f"Largest drop: eval {worst[1]} ({signed(worst[0])}); an edit that breaks a few "
            "tasks can pass on average, so read that eval's runs.",
            "",
        ]
    dropped = sorted(
        (row["diff"], e)
        for e, row in per_eval.items()
        if row["diff"] is not None and row["diff"] <= -CLEAR_DROP
    )
    if len(dropped) > 1:
        # Every task the edit may have broken, not only the worst: two broken tasks out of ten
        # are what a reviewer must open, whatever the mean says.
        named = ", ".join(f"eval {e} ({signed(d)})" for d, e in dropped)
        out += [f"Dropped by {CLEAR_DROP:.2f} or more: {named}.", ""]
    return out
