"""A sealed test the run could not finish, and the one command that finishes it (docs/design.md
§9). The search keeps the sealed test's estimated cost from the budget, so this is rare: a
budget below the setup, a reserve the runs outgrew, a run stopped by hand. Reads the run's row
only; never writes."""

from __future__ import annotations

import math
import shlex

from optimizer.budget.estimate import reserve
from optimizer.store.runs import Run

# When the run kept no estimate (a description run): what is asked on top of the spend.
FALLBACK_USD = 0.5


def finish_line(run_dir: str, run: Run, iterations_done: int, spent_usd: float) -> str | None:
    """ "the sealed test did not run …: finish it with `optimizer resume …`" for a stopped run
    with a test split and no complete sealed test; None otherwise."""
    found = finish_command(run_dir, run, iterations_done, spent_usd)
    if found is None:
        return None
    why, command = found
    return f"the sealed test did not run ({why}): finish it with `{command}`"


def finish_command(
    run_dir: str, run: Run, iterations_done: int, spent_usd: float
) -> tuple[str, str] | None:
    """Why the sealed test did not run and the command that finishes it, or None. The command
    sets the iteration limit to the iterations done, so the resumed run goes straight to the
    sealed test, and a budget of the spend so far plus the test's reserve, or the run's own if
    larger."""
    if run.status != "stopped":
        return None
    if not run.split.get("test"):
        return None
    test = run.test
    if isinstance(test, dict) and not test.get("incomplete"):
        return None
    why = "the budget ran out during it" if isinstance(test, dict) else "the run stopped before it"
    kept = reserve(run.estimate, per_run_usd=None, runs=0)
    # Never below the run's own budget: a resume keeps the budget it is given for later resumes.
    given = (run.settings.get("budget") or {}).get("usd") or 0.0
    budget = max(given, math.ceil((spent_usd + (kept or FALLBACK_USD)) * 10) / 10)
    command = (
        f"optimizer resume {shlex.quote(run_dir)} --max-iterations {iterations_done} "
        f"--budget-usd {budget:.2f}"
    )
    return why, command
