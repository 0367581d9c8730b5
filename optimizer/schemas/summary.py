"""summary.json beside summary.md (ours): what a night did, for a person and for the --notify
command."""

from __future__ import annotations

from optimizer.schemas.common import ExactModel


class SummaryNumbers(ExactModel):
    """One comparison of the final best with v0: scores, their difference and its interval."""

    v0: float | None = None
    best: float | None = None
    delta: float | None = None
    low: float | None = (
        None  # the interval of delta over evals (Student-t), None when it cannot be made
    )
    high: float | None = None
    confidence: float
    # The level as the views name it: "95%", or "99.8%, the decision's" when the Δ is the
    # decision's own (one Δ, one interval per level).
    level: str | None = None
    evals: int


class NextStep(ExactModel):
    """One thing to do after a run, as the summary and the report name it: why, and the command."""

    why: str
    command: str


class MorningSummary(ExactModel):
    """summary.json beside summary.md (report/summary.py): what a night did, for a person and for
    the --notify command. `scope` is the claim's reach: "better on these tasks" or "general"."""

    run_dir: str
    skill_name: str | None = None
    simulated: bool
    status: str | None = None
    stop_reason: str | None = None
    last_error: str | None = None
    night_error: str | None = None  # the one sentence of a night that could not run
    adopted: str = "v0"  # the version the user has: the last certified adoption's
    started_at: str | None = None
    finished_at: str | None = None
    from_run: str | None = None
    best: str
    won: bool
    headline: str
    scope: str | None = None
    train: SummaryNumbers | None = None
    sealed: SummaryNumbers | None = None
    decision: str | None = (
        None  # the best's own decision against its parent, as selection.json says
    )
    diff: str | None = None
    spent_usd: float
    budget_usd: float | None = None
    # spent_usd in words when the run adopted: each adoption apart with the estimate it showed
    spent: str | None = None
    calls: int
    look_at: list[str]
    # what to do next, first the likeliest (report/nextstep.py): export the best, finish the
    # sealed test, or go on with more iterations or budget
    next: list[NextStep] = []
