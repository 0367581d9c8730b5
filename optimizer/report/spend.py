"""The cost estimate as a person sees it: the line before a start, the --dry-run table, and the
estimate set against what the ledger says was spent (`optimizer status`). Reads state.db only
through the read-only opener; never writes to it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import structlog

from optimizer.budget.cost_model import Estimate
from optimizer.budget.estimate import mode_usd, record, reserves_usd
from optimizer.model.cost import unpriced_note
from optimizer.store import iterations, ledger, readonly, runs, trials
from optimizer.store.files import Workspace
from optimizer.store.lock import running_pid
from optimizer.store.rows import Answered
from optimizer.store.runs import Run

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

log = structlog.get_logger()


def _money(x: float) -> str:
    return f"${x:,.2f}" if x >= 0.1 else f"${x:,.3f}"


def _count(n: float) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1_000:.0f}k"
    return f"{int(n):,}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def line(est: Estimate) -> str:
    """The one line shown before every real start (and at the end of --dry-run); for a resumed
    run, what remains plus what was already spent."""
    batch = est["batch"]
    per, run = est["per_iteration"], est["run"]
    other = "without batch mode" if batch else "with --batch"
    text = (
        f"estimate{' (batch mode)' if batch else ''}: ~{_count(per['calls'])} model calls, "
        f"~{_count(per['tokens'])} tokens, ~{_money(mode_usd(per, batch))} per iteration "
        f"(up to {_money(mode_usd(est['per_iteration_max'], batch))} when runs are added); "
    )
    resume = est.get("resume")
    if resume:
        text += (
            f"~{_money(mode_usd(resume['remaining'], batch))} for what remains "
            f"({_plural(est['iterations'], 'iteration')} left and the sealed test) + "
            f"{_money(resume['spent_usd'])} already spent = ~{_money(mode_usd(run, batch))} "
            f"for the run (~{_money(mode_usd(run, not batch))} {other})"
        )
    else:
        text += (
            f"~{_money(mode_usd(run, batch))} for the run ({_plural(est['iterations'], 'iteration')}"
            f"{_unlimited(est)}; ~{_money(mode_usd(run, not batch))} {other})"
        )
    return f"{text}; {budget_note(est)}{reserve_note(est)}{unpriced_notes(est)}"


def _unlimited(est: Estimate) -> str:
    """Without an iteration limit the estimate's iterations are what the budget covers; the stop
    rule may end the run before them."""
    if "iteration_limit" not in est or est["iteration_limit"] is not None:
        return ""
    if est.get("spend_all"):  # loop.spend_all turns the stop rule off: the budget ends it
        return ", what the budget covers: no iteration limit and no stop rule (--spend-all)"
    return ", what the budget covers: no iteration limit, the stop rule may end it sooner"


def reserve_note(est: Estimate) -> str:
    """What the search leaves unspent so that a budget stop still runs the sealed test, and the
    first looks of an adoption at the end when the run adopts (adopt.at_end)."""
    if not est.get("budget_usd") or not (est.get("reserve_usd") or est.get("adoption_reserve_usd")):
        return ""
    held = [
        f"{what}: {_money(usd)}"
        for what, usd in (
            ("reserve for the sealed test", est.get("reserve_usd")),
            ("for the adoption at the end (its first looks)", est.get("adoption_reserve_usd")),
        )
        if usd
    ]
    return f"; {' and '.join(held)}, kept from the search"


def unpriced_notes(est: Estimate) -> str:
    """Models priced as another: the estimate (and the spend) overstate them, maybe a lot."""
    return "".join(
        f"; {unpriced_note(model, fallback)}"
        for model, fallback in sorted((est.get("unpriced") or {}).items())
    )


def budget_note(est: Estimate) -> str:
    """Whether the budget covers the run: its estimate and, kept from the search, the first looks
    of an adoption at the end (the sealed test is in the run's estimate)."""
    budget, batch = est["budget_usd"], est["batch"]
    if not budget:
        return "no budget set"
    adopting = est.get("adoption_reserve_usd") or 0.0
    need = mode_usd(est["run"], batch) + adopting
    with_it = " and the adoption's reserve" if adopting else ""
    if "iteration_limit" in est and est["iteration_limit"] is None and est["iterations"]:
        return (
            f"budget {_money(budget)} bounds it: about {est['iterations']} iterations at the "
            f"typical cost{with_it and ', after the adoption' + chr(39) + 's reserve'}, fewer "
            "when runs are added"
        )
    if budget >= mode_usd(est["run_max"], batch) + adopting:
        return f"budget {_money(budget)} covers it{with_it}"
    if budget >= need:
        return f"budget {_money(budget)} covers it{with_it} unless many runs are added"
    resumed = bool(est.get("resume"))
    floor_usd = mode_usd(est["setup"], batch) + reserves_usd(est)
    if budget < floor_usd:
        floor = "what was already spent" if resumed else "the baseline and v0"
        return (
            f"budget {_money(budget)} is below {floor} and the reserves kept from the search "
            f"(~{_money(floor_usd)}): the run will stop before "
            f"{'its next iteration' if resumed else 'iteration 1'}"
        )
    k = est.get("iterations_in_budget")
    of = (
        f"the {est['iterations']} iterations left" if resumed else f"{est['iterations']} iterations"
    )
    return f"budget {_money(budget)} covers about {k} of {of}; the run stops at the budget"


def table(est: Estimate) -> Table:
    """A rich Table of the estimate, for --dry-run."""
    from rich.table import Table

    t = Table(title="cost estimate" + (" (simulated provider)" if est["provider"] == "sim" else ""))
    for name in ("part", "model calls", "tokens", "USD", "USD with batch mode"):
        t.add_column(name, justify="left" if name == "part" else "right")
    rows = [
        ("baseline and v0", est["setup"]),
        ("one iteration, typical", est["per_iteration"]),
        ("one iteration, at most", est["per_iteration_max"]),
        ("sealed test", est["sealed_test"]),
        (f"whole run ({_plural(est['iterations'], 'iteration')})", est["run"]),
        ("whole run, at most", est["run_max"]),
    ]
    for name, part in rows:
        t.add_row(
            name,
            _count(part["calls"]),
            _count(part["tokens"]),
            _money(part["usd"]),
            _money(part["usd_batch"]),
        )
    return t


def show_dry_run(console: Console, est: Estimate | None) -> int:
    """`optimizer run --dry-run`: the table and the line; nothing is written. Exit code 0."""
    if est is None:
        console.print(
            "estimate: not available for a description run (its trigger probes are not "
            "modelled); nothing was started."
        )
        return 0
    console.print(table(est))
    console.print(line(est), markup=False, highlight=False)
    console.print("dry run: nothing was written and no model was called.")
    return 0


def announce(
    console: Console, ws: Workspace | None, est: Estimate | None, *, keep: bool = True
) -> None:
    """The line before a real start; with `keep`, also stored in state.db for `status`."""
    if est is None:
        return
    console.print(line(est), markup=False, highlight=False)
    if keep and ws is not None:
        try:
            record(ws, est)
        except Exception as exc:  # noqa: BLE001 - losing the preview must not stop the run
            log.warning("preview.not_recorded", error=str(exc))


class _Actual(TypedDict):
    """What the ledger says was spent, as `optimizer status` shows it (estimate_vs_actual)."""

    calls: int
    tokens: int
    usd: float
    batched_calls: int
    iterations: int
    setup_usd: float
    sealed_test_usd: float
    adoptions_usd: float
    usd_per_iteration: float | None


class _Against(TypedDict):
    """The stored estimate for the iterations begun, and the line that sets it against the
    ledger."""

    expected_usd: float
    expected_per_iteration_usd: float
    ratio: float | None
    line: str


@dataclass(frozen=True)
class _Spent:
    """The ledger's readings estimate_vs_actual needs, taken in one read-only view of state.db."""

    totals: Answered
    adopting: float  # paid apart, against the adoption's own estimate
    begun: int  # iterations begun, one a stop cut short included
    done: int  # iterations finished
    setup_usd: float
    test_done: bool
    test_usd: float


def estimate_vs_actual(run_dir: Path) -> dict[str, Any]:
    """The stored estimate against the ledger, for `optimizer status`: totals for the iterations
    done so far, per iteration, and the ratio actual / estimated. Opens state.db read-only;
    `estimate` is None for a run started before previews were recorded."""
    ws = Workspace(Path(run_dir))
    with readonly.View(ws.state_db, live=running_pid(ws) is not None) as db:
        run = runs.row(db) or Run()
        est = run.estimate
        spent = _read_spent(db, bool(run.test))
    actual = _actual(spent)
    out: dict[str, Any] = {
        "estimate": est,
        "actual": actual,
        "expected_usd": None,
        "expected_per_iteration_usd": None,
        "ratio": None,
        "line": None,
    }
    if est is None:
        return out
    out.update(_against(est, spent, actual["usd_per_iteration"]))
    return out


def _read_spent(db: readonly.View, has_test: bool) -> _Spent:
    """Totals, adoptions, iterations, setup and the sealed test's share, read from the ledger."""
    totals = ledger.answered(db)
    # An adoption is paid apart, against its own estimate (report/adopted.spent_apart).
    adopting = sum(
        usd for scope, usd in ledger.by_scope(db).items() if (scope or "").startswith("adoption ")
    )
    begun = iterations.all_of(db)
    done = [i for i in begun if i.finished_at]
    # Setup: every call recorded before the first proposal (rows are numbered as written).
    setup_usd = ledger.setup_usd(db, totals["usd"])
    test_done = has_test and bool(done)
    # The sealed test: its share of the runs, at the ledger's mean executor + grader cost per
    # run (a call does not say which run it served; timestamps are whole seconds).
    recorded, in_test = trials.counts(db)
    per_run = ledger.runs_usd(db) / recorded if recorded else 0.0
    test_usd = per_run * in_test if test_done else 0.0
    return _Spent(totals, adopting, len(begun), len(done), setup_usd, test_done, test_usd)


def _actual(spent: _Spent) -> _Actual:
    """What was spent, rounded for the page; per iteration net of adoptions, setup and test."""
    totals = spent.totals
    return {
        "calls": totals["calls"],
        "tokens": totals["tokens"],
        "usd": round(totals["usd"], 6),
        "batched_calls": totals["batched"] or 0,
        "iterations": spent.done,
        "setup_usd": round(spent.setup_usd, 6),
        "sealed_test_usd": round(spent.test_usd, 6),
        "adoptions_usd": round(spent.adopting, 6),
        "usd_per_iteration": round(
            (totals["usd"] - spent.adopting - spent.setup_usd - spent.test_usd) / spent.done, 6
        )
        if spent.done
        else None,
    }


def _against(est: Estimate, spent: _Spent, per: float | None) -> _Against:
    """What the estimate expected for the iterations begun, the ratio of the search's spend to
    it, and the line `optimizer status` prints (`per`: the actual cost per iteration)."""
    batch = bool(est.get("batch"))
    # An iteration a stop cut short spent part of its cost: it is counted as begun, so a night
    # stopped in its first iteration is never "$1.49 against $0.69 for 0 iterations".
    unfinished = spent.begun - spent.done
    expected = mode_usd(est["setup"], batch) + spent.begun * mode_usd(est["per_iteration"], batch)
    expected += mode_usd(est["sealed_test"], batch) if spent.test_done else 0.0
    expected_per_iteration = mode_usd(est["per_iteration"], batch)
    searched = spent.totals["usd"] - spent.adopting
    ratio = round(searched / expected, 3) if expected > 0 else None
    line = (
        f"cost: {_money(searched)} spent against ~{_money(expected)} estimated for "
        f"{_plural(spent.begun, 'iteration')}"
        + (f", {unfinished} of them unfinished" if unfinished else "")
        + (f" (x{ratio:.2f})" if ratio is not None else "")
        + (
            f"; {_money(per)} per iteration against ~{_money(expected_per_iteration)}"
            if per is not None
            else ""
        )
        + (f"; {_money(spent.adopting)} on adoptions, apart" if spent.adopting > 0 else "")
        + unpriced_notes(est)
    )
    return {
        "expected_usd": round(expected, 6),
        "expected_per_iteration_usd": expected_per_iteration,
        "ratio": ratio,
        "line": line,
    }


def minimum(est: Estimate | None) -> list[tuple[str, float]]:
    """What a night needs before its first proposal is paid, part by part (too_small's parts):
    v0 on the train evals (and the baseline), the sealed test and the adoption's first looks kept
    from the search, and one proposal with its step's first look, each at the estimate's typical
    cost. Empty when nothing can tell (no estimate, an older one) or no proposal is planned."""
    if est is None or "per_proposal" not in est or est.get("iteration_limit") == 0:
        return []
    batch = est["batch"]
    return [
        ("v0 and the baseline on the train evals", mode_usd(est["setup"], batch)),
        ("the sealed test", est.get("reserve_usd") or 0.0),
        ("the adoption at the end", est.get("adoption_reserve_usd") or 0.0),
        ("one proposal with its step", mode_usd(est["per_proposal"], batch)),
        ("room for its analysis's longest answer", est.get("call_headroom_usd") or 0.0),
    ]


def too_small(est: Estimate | None) -> str | None:
    """The sentence that refuses a night its budget cannot pay one proposal for (minimum's
    parts); None when the budget covers them, or when nothing can tell (no budget)."""
    parts = minimum(est)
    if est is None or not est.get("budget_usd") or not parts:
        return None
    budget = est["budget_usd"] or 0.0
    need = sum(usd for _, usd in parts)
    if budget >= need:
        return None
    said = ", ".join(f"{what} {_money(usd)}" for what, usd in parts if usd > 0)
    enough = math.ceil(need * 10) / 10
    return (
        f"a budget of {_money(budget)} cannot pay for one proposal: a night needs at least "
        f"{_money(need)} ({said}); give --budget-usd {enough:g} or more, or fewer evals or "
        "evals.runs_per_eval."
    )
