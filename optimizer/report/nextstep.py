"""What to do after a run, as one command each, for summary.md and the report's overview: finish
the sealed test, take the best out with `optimizer export`, or go on with `optimizer resume` and
the iterations and budget that going on needs. The iterations' cost is the one `status` uses for
its finish time (measured over the finished iterations, else the preview's); the sealed test's
reserve and the finishing command are sealed.py's. Reads; never writes."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from optimizer import config, schemas
from optimizer.budget import pace
from optimizer.budget.cost_model import Estimate
from optimizer.budget.estimate import per_iteration_usd, reserve
from optimizer.report import read, sealed
from optimizer.report.info import StatusInfo
from optimizer.report.resume import GoingOn, going_on
from optimizer.report.view import RunView
from optimizer.store import readonly


def steps(run_dir: str, data: RunView, info: StatusInfo, best: str) -> list[schemas.NextStep]:
    """The commands, the one to take first first; [] while nothing can be said."""
    run = shlex.quote(run_dir)
    if info.get("running"):
        return [
            schemas.NextStep(
                why="the run is still going: watch it", command=f"optimizer status {run}"
            )
        ]
    out = []
    done = info.get("iterations_done") or 0
    spent = info.get("budgeted_usd") or 0.0
    todo = sealed.finish_command(run_dir, data.run, done, spent)
    if todo is not None:
        out.append(schemas.NextStep(why=f"finish the sealed test ({todo[0]})", command=todo[1]))
    if info.get("status") == "failed":
        out.append(
            schemas.NextStep(
                why="the run failed: fix the cause, then go on", command=f"optimizer resume {run}"
            )
        )
        return out
    if best != "v0" and not below_v0_sealed(data.run.test, best):
        name = shlex.quote(f"{data.run.skill_name or 'skill'}-{best}")
        out.append(
            schemas.NextStep(
                why=f"take {best}: a copy of its skill folder with the evals it was measured on",
                command=f"optimizer export {run} {best} --out {name}",
            )
        )
    if todo is None:
        out.append(_go_on(run, data, info, best))
    return out


def below_v0_sealed(test: Mapping[str, Any] | None, best: str) -> bool:
    """The best scored below v0 on the sealed test (runs.test_json): never offered for export
    (issue 48); the resume is offered instead."""
    test = test or {}
    scores = {k: (v or {}).get("score") for k, v in (test.get("versions") or {}).items()}
    v0, found = scores.get("v0"), scores.get(best)
    return v0 is not None and found is not None and found < v0


def _go_on(run: str, data: RunView, info: StatusInfo, best: str) -> schemas.NextStep:
    """`optimizer resume` with as many iterations again as the run had, and the budget they need
    when what is left of it does not cover them (and the sealed test of the next best)."""
    done = info.get("iterations_done") or 0
    cap = info.get("max_iterations")
    limit = done if cap is None else cap  # no limit: the budget sized for as many again
    budget = info.get("budget_usd")
    g = _going_on(data, info)
    flags, more = [], 0
    if cap is None:
        more = max(1, done)
    elif done >= limit:  # the iteration limit stopped it: as many again
        more = max(1, limit)
        flags.append(f"--max-iterations {done + more}")
    else:
        more = limit - done
    if budget:
        covered = g.covered(budget)
        if g.spent_usd >= budget or (covered is not None and covered < more):
            flags.append(f"--budget-usd {g.budget_for(more)}")
    what = f"search on from {best}" if best != "v0" else "nothing won yet: search on"
    if read.every_proposal_refused(data.iterations):  # more of the same would be refused again
        what = "every proposal was refused: fix what the first refusal names, then search on"
    if more and cap is not None:
        what += f" for {more} more iteration{'s' if more != 1 else ''}"
    if "deadline" in (info.get("stop_reason") or ""):
        what += " (and give a later --until)"
    return schemas.NextStep(why=what, command=" ".join(["optimizer resume", run, *flags]))


def _going_on(data: RunView, info: StatusInfo) -> GoingOn:
    """resume.GoingOn from state.db, as the resume's refusal reads it; from the view's totals for
    a run folder that has only history.json."""
    if data.source == "state.db" and data.ws.state_db.is_file():
        default = config.Evals.model_fields["runs_per_eval"].default  # as the run read it
        per_eval = int((data.settings.get("evals") or {}).get("runs_per_eval") or default)
        runs = 2 * len(data.run.split.get("test") or []) * per_eval
        with readonly.View(data.ws.state_db) as db:
            adopting = (data.settings.get("adopt") or {}).get("at_end", "never") != "never"
            return going_on(db, data.run.estimate, runs, adopting)
    est: Estimate = data.run.estimate or Estimate()
    done = info.get("iterations_done") or 0
    per = pace.usd_per_iteration(
        estimated=per_iteration_usd(est) if est else None,
        spent_in_iterations=data.ledger.get("iterations_usd") or 0.0,
        done=done,
    )
    kept = reserve(est or None, per_run_usd=None, runs=0)
    return GoingOn(info.get("budgeted_usd") or info.get("spent_usd") or 0.0, per, kept, done)
