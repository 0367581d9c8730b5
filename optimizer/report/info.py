"""What `optimizer status` knows of a run (report/status.py's StatusInfo): the one reading that
status --json prints, summary.md's numbers and next steps, the report's header and the review
server reuse. Its free-form parts (a file's JSON, a sandbox tally) are JsonObjects."""

from __future__ import annotations

from typing_extensions import TypedDict

from optimizer.grow.outlook import PowerOutlook
from optimizer.schemas import Json, JsonObject
from optimizer.store.rows import UnscoredKey


class Proposals(TypedDict):
    """What became of every proposal (read.proposals); rejections counted by reason."""

    proposals: int
    versions: int
    duplicates: int
    rejected: int
    reasons: dict[str, int]


class Defects(TypedDict):
    """Runs an internal error of ours ended, counted by the error's type."""

    runs: int
    by_type: dict[str, int]
    last: UnscoredKey | None


class Confinement(TypedDict):
    """Recorded runs, how many ran without bubblewrap, and runs per mechanism."""

    runs: int
    unconfined: int
    by: dict[str, int]


class Setting(TypedDict):
    """A setting of run.toml that is not a default, and where it came from (folders.provenance)."""

    key: str
    value: Json
    default: Json
    source: str


class Resume(TypedDict):
    """A resume as the views show it: when, and each changed key's [before, after]."""

    at: str
    changed: dict[str, list[Json]]


class Finish(TypedDict):
    """When a running run will end at the pace of its finished iterations, and what ends it."""

    seconds: float | None
    by: str | None
    at: str | None
    iterations_left: int | None
    iterations_done: int


class Timing(TypedDict):
    elapsed_s: float | None
    finish: Finish | None  # None once the run stopped


class Adopted(TypedDict):
    adopted: str  # the version the user has: the last certified adoption's, else v0
    adoptions: list[JsonObject]  # schemas.Adoption, oldest first


class Unscored(TypedDict):
    runs: int
    last: UnscoredKey | None


class BestVersion(TypedDict):
    version: str
    score: float | None
    pass_rate: float | None
    score_ci: list[float] | None
    score_evals: int | None
    verdict: str | None


class StatusRun(TypedDict):
    """Which run, and what its daemon is doing."""

    run_dir: str
    run_id: str | None
    skill_name: str | None
    target: str | None
    simulated: bool
    probe: str | None  # how a description run measures triggering
    running: bool
    pid: int | None
    status: str | None
    activity: str | None
    started_at: str | None
    finished_at: str | None


class StatusProgress(TypedDict):
    """How far the search went, and what it could not score."""

    iteration: int
    iterations_done: int
    max_iterations: int | None
    versions: int
    pending: list[str]
    failed: dict[str, str | None]  # label: its error
    proposals: Proposals
    unscored: Unscored
    defects: Defects


class StatusFound(Adopted):
    """What it found: the current best, the adoptions, the other winners."""

    current_best: BestVersion | None
    adopted_line: str
    adoption_lines: list[str]
    other_wins: dict[str, str]
    promotions: str | None
    warnings: list[str]


class StatusMoney(TypedDict):
    """What it spent and why it stopped."""

    spent_usd: float
    budgeted_usd: float  # what the budget counts: the spend less the adoptions paid apart
    spent_text: str  # the spend in words, one for every view (adopted.spent_words)
    budget_usd: float | None
    estimate: JsonObject | None  # the preview against the ledger (spend.estimate_vs_actual)
    calls: int
    cache_hits: int
    saved_usd: float
    deadline: str | None
    seconds_left: float | None
    last_error: str | None
    stop_reason: str | None
    ended: str


class StatusSetup(TypedDict):
    """The sealed test, the settings, the resumes, the confinement and the power outlook."""

    test: JsonObject | None  # runs.test_json, with the train delta
    sealed_todo: str | None
    settings: list[Setting]
    resumes: int
    last_resumed: Resume | None
    sandbox: Confinement
    power: PowerOutlook | None


class StatusInfo(Timing, StatusRun, StatusProgress, StatusFound, StatusMoney, StatusSetup):
    """`optimizer status`, part by part (status --json prints it in this order)."""
