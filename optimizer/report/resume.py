"""Where a resume continues, read from state.db as the engine will read it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from optimizer import config, words
from optimizer.budget import estimate, pace, stops
from optimizer.budget.cost_model import Estimate
from optimizer.budget.estimate import per_iteration_usd
from optimizer.store import adoptions, iterations, ledger, money, readonly, runs, versions
from optimizer.store.files import Workspace
from optimizer.store.iterations import Iteration
from optimizer.store.readonly import Reader
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
            spent_usd=money.account(db).budgeted_usd,
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
    parent = best if settings.loop.parent == "best" else "a parent on the Pareto front"
    return f"resuming at iteration {done + 1} from {parent} (current best {best})"


@dataclass(frozen=True)
class GoingOn:
    """What going on costs, read once for the resume's refusal, the summary's and the report's
    suggested command and the unfinished sealed test's: the spend the budget counts (adoptions
    apart, store/money.py), an iteration's cost (measured over the finished ones, the estimate's
    before one finished) and what the search keeps for the sealed test and an adoption at the
    end (the engine's own reserve). A budget this suggests for n iterations covers them here."""

    spent_usd: float
    per_iteration_usd: float | None
    reserve_usd: float
    done: int

    def covered(self, budget_usd: float) -> int | None:
        """Whole iterations `budget_usd` pays for after the spend and the reserve; None when an
        iteration's cost is not known yet."""
        per = self.per_iteration_usd
        if not per:
            return None
        return max(0, math.floor((budget_usd - self.spent_usd - self.reserve_usd) / per + 1e-9))

    def budget_for(self, iterations: int) -> int:
        """The whole dollars that cover `iterations` more and the reserve, above the spend."""
        need = self.spent_usd + (self.per_iteration_usd or 0.0) * iterations + self.reserve_usd
        return max(math.ceil(need + 1e-9), math.floor(self.spent_usd) + 1)


def going_on(db: Reader, est: Estimate | None, test_runs: int, adopting: bool) -> GoingOn:
    """GoingOn from state.db and the estimate shown at the start; `test_runs`: the sealed test's
    runs (both sides), priced as the engine prices its reserve; `adopting`: the run adopts at its
    end (adopt.at_end), so the search keeps that adoption's first looks too."""
    done = iterations.finished_count(db)
    per = pace.usd_per_iteration(
        estimated=per_iteration_usd(est) if est else None,
        spent_in_iterations=ledger.iterations_usd(db),
        done=done,
    )
    test = estimate.reserve(est, per_run_usd=adoptions.per_run_usd(db), runs=test_runs)
    kept = test + (((est or {}).get("adoption_reserve_usd") or 0.0) if adopting else 0.0)
    return GoingOn(money.account(db).budgeted_usd, per, kept, done)


def budget_refusal(ws: Workspace, settings: config.Settings, est: Estimate | None) -> str | None:
    """The sentence of a resume that could pay for nothing, None otherwise: the budget is spent,
    or what is left of it after the reserve covers none of the iterations left. The budget it
    suggests is GoingOn's, the one the summary suggests, and it is accepted. A detached `run`'s
    first start (status "created") is no resume, and its budget was shown when it was given."""
    row = runs.read(ws.state_db)
    if row is None or row.status == "created":
        return None
    with readonly.View(ws.state_db) as db:
        g = going_on(db, row.estimate, _test_runs(row, settings), settings.adopt.at_end != "never")
    budget = settings.budget.usd
    limit = settings.loop.max_iterations
    left = max(0, limit - g.done) if limit is not None else max(1, g.done)
    covered = g.covered(budget)
    spent = g.spent_usd >= budget
    if not spent and (left == 0 or covered is None or covered > 0):
        return None
    more = f"`optimizer resume {ws.root} --budget-usd {g.budget_for(max(1, left))}`"
    if spent:
        what = (
            f"its budget is spent (${g.spent_usd:.2f} of ${budget:.2f}), so it would stop at once"
        )
    else:
        what = (
            f"the ${budget - g.spent_usd:.2f} left of its ${budget:.2f} budget, less "
            f"${g.reserve_usd:.2f} kept for the sealed test, covers none of the "
            f"{words.plural(left, 'iteration')} left (about ${g.per_iteration_usd or 0.0:.2f} each)"
        )
    return f"{ws.root}: {what}; give it more with --budget-usd, e.g. {more}."


def _test_runs(row: Run, settings: config.Settings) -> int:
    return 2 * len(row.split.get("test") or []) * settings.evals.runs_per_eval
