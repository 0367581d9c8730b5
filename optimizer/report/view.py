"""One typed view of a run (RunView, as inspect_ai's EvalLog is of an eval): what status, lineage,
show, summary, the report and the review server read, built once by report/read.py from state.db
(or, for a folder that has none, from its history.json). Its versions are Nodes; a field a node
was never given (a history.json in the versions form has no Δ) is left out of what it shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from optimizer.decide import adopt as rule
from optimizer.errors import BadInput
from optimizer.schemas import Adoption
from optimizer.store.files import Workspace
from optimizer.store.iterations import Iteration
from optimizer.store.resumes import Resume
from optimizer.store.rows import LedgerTotals, PricedCall, UnscoredKey
from optimizer.store.runs import Run


class Node(BaseModel):
    """One version as the views show it: its row and decision (state.db) or its history.json
    entry, and what caveats.annotate and read.load add (verdict, intervals)."""

    model_config = ConfigDict(extra="forbid")

    label: str
    parent: str | None = None
    iteration: int | None = None
    decision: str | None = None
    phase: str | None = None
    status: str | None = None
    error: str | None = None
    summary: str = ""
    rationale: str = ""
    score: float | None = None
    pass_rate: float | None = None
    delta: float | None = None
    ci: list[float] | None = None
    ci_level: str = ""
    reason: str | None = None
    # the selection's, as selection.json holds them (one shape per phase: schemas.SelectionFile)
    comparator: JsonValue = None
    scope: JsonValue = None
    alpha: JsonValue = None
    night: JsonValue = None
    delta_evals: int | None = None
    cost_usd: float | None = None
    seconds: float | None = None
    created_at: str | None = None
    decided_at: str | None = None
    is_best: bool = False
    per_eval: dict[str, float | None] = Field(default_factory=dict)  # mean score by eval id
    # a description run's history.json (seed 001, the versions form)
    description: str | None = None
    precision: float | None = None
    recall: float | None = None
    # added once every node is read (caveats.annotate, read.load)
    verdict: str | None = None
    delta_unit: str | None = None
    score_ci: list[float] | None = None
    score_evals: int | None = None

    def shown(self) -> dict[str, Any]:
        """The node as JSON-able data, with the fields it was given (and only those)."""
        return self.model_dump(exclude_unset=True)


class RunView(BaseModel):
    """What the views know about a run, typed: its row (store Run), its versions, the ledger's
    totals, its iterations, resumes and adoptions."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    root: Path
    source: Literal["state.db", "history.json"]
    form: Literal["iterations", "versions"] = "iterations"  # history.json's form
    run: Run = Field(default_factory=Run)
    nodes: list[Node] = Field(default_factory=list)
    current_best: str | None = None
    simulated: bool = False
    ledger: LedgerTotals = Field(default_factory=lambda: LedgerTotals())
    iterations: list[Iteration] = Field(default_factory=list)
    resumes: list[Resume] = Field(default_factory=list)  # oldest first; `changed` per key
    calls: list[PricedCall] = Field(default_factory=list)
    history: dict[str, Any] = Field(default_factory=dict)  # only for a folder with no state.db
    unscored: list[UnscoredKey] = Field(default_factory=list)  # runs our infrastructure failed
    warnings: list[str] = Field(default_factory=list)  # caveats.annotate: what numbers do not say
    adoptions: list[Adoption] = Field(default_factory=list)  # oldest first (docs/design.md §16)

    @property
    def settings(self) -> dict[str, Any]:
        """The settings the run recorded (config.Settings as JSON; {} from history.json)."""
        return self.run.settings

    @property
    def adopted(self) -> str:
        """The version the user has: the last certified adoption's, else v0."""
        return rule.base_of(self.adoptions)

    @property
    def ws(self) -> Workspace:
        return Workspace(self.root)

    @property
    def labels(self) -> list[str]:
        return [n.label for n in self.nodes]

    def node(self, label: str) -> Node:
        for n in self.nodes:
            if n.label == label:
                return n
        known = ", ".join(self.labels) or "none"
        raise BadInput(f"{self.root}: has no version '{label}'; known versions: {known}.")
