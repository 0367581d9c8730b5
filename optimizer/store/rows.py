"""The rows of state.db as the store's repositories write them and read the ones with no JSON
column, one TypedDict per table or statement (the columns are store/migrations.py's), and the one
decoder of the `*_json` columns (json_object): a record with such a column is read into its own
frozen type by its repository (versions.Version, runs.Run, iterations.Iteration), so no module
outside the store decodes one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from optimizer.store.errors import StoreError

# A row as SQLite hands it to a repository (column -> value); only store/ reads one.
Raw = Mapping[str, Any]
# A decoded `*_json` column: an object whose keys its record's field comment names.
Decoded = dict[str, Any]


def json_object(raw: str | None, column: str) -> Decoded:
    """A `*_json` column's object ({} when empty); StoreError naming the column when the text is
    not a JSON object (a hand-edited or damaged state.db)."""
    try:
        found = json.loads(raw) if raw else {}
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise StoreError(
            f"state.db: {column} is not a JSON object ({str(raw)[:80]!r}); restore state.db "
            "from a copy, or start a new run."
        )
    return found


# Whether a run's score counts (store/gradings.py's SCORED) or why not (docs/design.md §7).
GradingStatus = Literal["ok", "judge_error", "exec_error", "gated", "unscored"]


class KeyColumns(TypedDict):
    """A run key's parts, as the columns of gradings (store/keys.py)."""

    prefix: str
    eval_id: int
    configuration: str
    run_number: int


class GradingRow(KeyColumns):
    key: str
    status: GradingStatus
    score: float | None
    pass_rate: float | None
    passed: int | None
    total: int | None
    rubric_normalized: float | None
    gate_passed: int | None
    grading_json: str | None
    structural_json: str | None
    error: str | None
    completed_at: str


class ScoredTrial(TypedDict):
    eval_id: int
    run_number: int
    score: float | None
    pass_rate: float  # a scored run was graded


class TrialTokens(TypedDict):
    eval_id: int
    run_number: int
    tokens: int | None
    pass_rate: float | None


class UnscoredTrial(TypedDict):
    prefix: str
    eval_id: int
    run_number: int


class UnscoredKey(TypedDict):
    key: str
    error: str | None


class RecordColumns(TypedDict):
    """What an execution records of itself in trials (execute/record.py's TrialRecord)."""

    eval_id: int
    configuration: str
    run_number: int
    status: str
    error: str | None
    skill_invoked: int | None
    tokens: int
    time_seconds: float
    completed_at: str
    confined: int | None
    sandbox: str | None


class TrialRow(TypedDict):
    """One execution of an eval (or a trigger probe, which records no tokens, time or sandbox),
    keyed by its run key."""

    key: str
    version: str
    split: str | None
    eval_id: int
    configuration: str
    run_number: int
    status: str
    error: str | None
    skill_invoked: int | None
    completed_at: str
    tokens: NotRequired[int]
    time_seconds: NotRequired[float]
    confined: NotRequired[int | None]
    sandbox: NotRequired[str | None]


class ProbeRow(TypedDict):
    eval_id: int
    run_number: int
    status: str
    skill_invoked: int | None


class ConfinementRow(TypedDict):
    """How many runs of one mechanism were confined, of the runs that recorded one."""

    sandbox: str
    confined: int | None
    runs: int


class _Decision(TypedDict):
    """The decisions table's columns but its selection, which each reader holds in its form."""

    version: str
    parent: str | None
    phase: str | None
    decision: str
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    reason: str
    decided_at: str


class DecisionRow(_Decision):
    selection_json: str | None


# What became of one proposal (iterations.candidates_json, by the proposal's index as text):
# {"label": vN}, {"duplicate": vM} or {"rejected": [problems], "reasons": [reasons]}.
ProposalOutcome = Mapping[str, str | list[str]]


class CallRow(TypedDict):
    """A model call in the ledger (the calls table). scope and batch_id are written only when the
    call had them, created_at when the row is recorded (Store.record_call)."""

    hash: str
    role: str
    model: str
    sample: int
    outcome: str
    response_json: str | None
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    cost_usd: float
    latency_ms: float
    attempts: int
    error: str | None
    scope: NotRequired[str | None]
    batch_id: NotRequired[str | None]
    created_at: NotRequired[str]


class CacheHit(TypedDict):
    hash: str
    role: str
    saved_usd: float | None


class RoleLongest(TypedDict):
    """Per role, the longest answer in output tokens and how many answers were measured."""

    role: str
    longest: int | None
    n: int


class PricedCall(TypedDict):
    created_at: str | None
    cost_usd: float
    scope: str | None
    role: str


class LedgerTotals(TypedDict, total=False):
    """The ledger's numbers the views show, as SQLite sums them. Not total: a run read from
    history.json has none (report/view.py's RunView)."""

    calls: int
    calls_usd: float
    spent_usd: float
    budgeted_usd: float  # the spend the budget counts: adoptions apart (store/money.py)
    cache_hits: int
    saved_usd: float
    iterations_usd: float


class LedgerSummary(TypedDict):
    """The answered calls' count, cost, tokens and retries, and the cache hits and their saving."""

    n: int
    cost: float
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    retries: int
    cache_hits: int
    saved_usd: float


class Answered(TypedDict):
    """The answered calls: how many, their tokens, their cost, how many came through a batch."""

    calls: int
    tokens: int
    usd: float
    batched: int | None


class BatchMeta(TypedDict):
    """What a batch keeps of each request, by its custom id (the ledger's request hash)."""

    role: str
    model: str
    sample: int
    scope: str | None


class PreviewOutput(TypedDict):
    """One output as a preview lists it: `read` when the page must read the file to show it (an
    image, or text past what a run keeps), `text` when it is kept inline."""

    name: str
    size: int
    read: NotRequired[bool]
    image: NotRequired[bool]
    text: NotRequired[str]
    truncated: NotRequired[bool]


class Preview(TypedDict):
    """What a reader is shown of one run without opening its folder (grade/preview.py), kept in
    the previews table when the run is graded."""

    transcript: str
    judge_view: str
    outputs: list[PreviewOutput]
