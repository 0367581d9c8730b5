"""Where a resume continues, read from state.db as the engine will read it."""

from __future__ import annotations

import math

from optimizer import config
from optimizer.search import stops
from optimizer.search.cost_model import Estimate
from optimizer.search.estimate import mode_usd
from optimizer.store import iterations, ledger, readonly, runs, versions
from optimizer.store.files import Workspace
from optimizer.store.iterations import Iteration
from optimizer.store.runs import Run


def resume_point(ws: Workspace, settings: config.Settings) -> str:
    """Where a resume continues, as the engine will: the open iteration with the parent it chose,
    or the next one from the parent the strategy will choose; and, after a plateau (either rule of
    stops.plateaus), that its count starts again (the engine counts only this process's
    iterations)."""
    with readonly.View(ws.state_db) as db:
        best = (runs.row(db) or Run()).best
        made = iterations.all_of(db)
        state = stops.from_ledger(
            finished=[i for i in made if i.finished_at],
            versions=versions.outcomes(db),
            spent=ledger.summed_by_scope(db),
            best=best,
            spent_usd=ledger.total_usd(db),
        )
    where = _where(made, best, settings)
    limit = settings.loop.max_iterations
    if limit is not None and state.iterations_done >= limit:
        return where
    loop = settings.loop
    if loop.spend_all:
        return where
    if loop.patience is not None and stops.Plateau(loop.patience)(state):
        where += f"; the plateau count starts again here (loop.patience = {loop.patience})"
    elif stops.WorthGoingOn(loop.min_gain_per_usd, loop.stop_window, settings.budget.usd)(state):
        where += (
            "; the stop rule's count of proposals starts again here "
            f"(loop.stop_window = {loop.stop_window})"
        )
    return where


def _where(made: list[Iteration], best: str, settings: config.Settings) -> str:
    open_ = [i for i in made if not i.finished_at]
    done = len(made) - len(open_)
    if open_:
        return (
            f"resuming at iteration {open_[0].number} from {open_[0].parent} (current best {best})"
        )
    limit = settings.loop.max_iterations
    if limit is not None and done >= limit:
        return (
            f"resuming after iteration {done}: the limit of {limit} iterations is reached, so only "
            f"the sealed test is checked; raise --max-iterations to go on (current best {best})"
        )
    if not made:
        return f"resuming before iteration 1: the baseline and v0 are graded first (current best {best})"
    parent = best if settings.loop.parent_selection == "best" else "a parent on the Pareto front"
    return f"resuming at iteration {done + 1} from {parent} (current best {best})"


def budget_refusal(ws: Workspace, settings: config.Settings, est: Estimate | None) -> str | None:
    """The sentence of a resume that could pay for nothing, None otherwise: the budget is spent,
    or what is left of it covers none of the iterations left (the estimate's count, which keeps
    the sealed test's reserve aside). A detached `run`'s first start (status "created") is no
    resume, and its budget was shown when it was given."""
    row = runs.read(ws.state_db)
    if row is not None and row.status == "created":
        return None
    with readonly.View(ws.state_db) as db:
        usd = ledger.total_usd(db)
    budget = settings.budget.usd
    left = est["iterations"] if est else 0
    covered = est.get("iterations_in_budget") if est else None
    if usd < budget and not (left and covered == 0):
        return None
    need = max(mode_usd(est["run"], bool(est["batch"])), usd) if est else usd
    more = f"`optimizer resume {ws.root} --budget-usd {max(math.ceil(need), math.floor(usd) + 1)}`"
    if usd >= budget:
        what = f"its budget is spent (${usd:.2f} of ${budget:.2f}), so it would stop at once"
    else:
        per = mode_usd(est["per_iteration"], bool(est["batch"])) if est else 0.0
        what = (
            f"the ${budget - usd:.2f} left of its ${budget:.2f} budget covers none of the "
            f"{left} iterations left (about ${per:.2f} each)"
        )
    return f"{ws.root}: {what}; give it more with --budget-usd, e.g. {more}."
