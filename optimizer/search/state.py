"""What every step of a run reads (RunState, built once per process from state.db) and the records
every target writes the same way: registered versions, decisions, promotions. Never decides
anything: a target decides, this module records what it decided."""

from __future__ import annotations

import json
import random
import shutil
from typing import Any

from optimizer import events
from optimizer.budget import stops
from optimizer.config import Settings
from optimizer.decide import keep
from optimizer.inputs import skill as skills
from optimizer.model.port import Client
from optimizer.schemas import SelectionFile
from optimizer.search import lineage
from optimizer.search.proposal import Candidate
from optimizer.search.propose import proposal_markdown
from optimizer.store import decisions, iterations, ledger, money, runs, versions
from optimizer.store.db import Store, now
from optimizer.store.files import Workspace, write_json, write_text
from optimizer.store.rows import DecisionRow
from optimizer.store.runs import Run


class RunState:
    """One run's folder, database, model client, settings, split and stop rules."""

    def __init__(
        self,
        ws: Workspace,
        store: Store,
        client: Client,
        settings: Settings,
        listen: events.Handler,
        stop_rules: stops.StopRules,
    ) -> None:
        self.ws, self.store, self.client, self.settings = ws, store, client, settings
        # What the search reports, in this order: state.db first, since the live line reads the
        # activity and spend from it; then the log; then the live line.
        self.events = events.Events()
        self.events.subscribe(self._write)
        self.events.subscribe(events.to_log)
        self.events.subscribe(listen)  # the live line, or whoever watches the run
        self.row: Run = runs.row(store) or Run()
        self.skill_name: str = self.row.skill_name or ""
        self.split: dict[str, Any] = self.row.split
        self.train: list[int] = self.split["train"]
        self.test: list[int] = self.split["test"]
        self.stops = stop_rules
        # A resume after a plateau searches again: where a plateau rule would stop it at once,
        # the counts of iterations and proposals without a win start here. An interrupted run (a
        # stop, a crash) keeps its counts, so its resume ends where the uninterrupted run ends
        # (docs/design.md §11).
        self.plateau_from = 0
        before = loop_state(self)
        if stops.first(stop_rules.plateaus, before):
            self.plateau_from = before.iterations_done

    def go_on_under(self, settings: Settings, stop_rules: stops.StopRules) -> None:
        """Work on under other settings and stop rules (an adoption's own budget, once the user
        saw its estimate). The plateau counts stay where they were: only the search reads them."""
        self.settings, self.stops = settings, stop_rules

    def interrupted(self) -> str | None:
        """The reason to stop now (a signal, the stop file, the budget, the deadline), or None.
        Asked before every run starts, so it reads the spend from the client, not the ledger."""
        return self.stops.now(stops.LoopState(spent_usd=self.client.budget.counted_usd))

    def rng(self, *purpose: object) -> random.Random:
        return random.Random(":".join(map(str, (self.settings.loop.seed, *purpose))))

    def best(self) -> str:
        return lineage.current_best(self.store)

    def emit(self, event: events.Event) -> None:
        self.events.emit(event)

    def _write(self, event: events.Event) -> None:
        """The run's subscriber that writes to state.db: the activity `optimizer status` shows."""
        if isinstance(event, events.Activity):
            runs.show_activity(self.store, self.ws.root.name, event.text)

    def score(self, label: str) -> float:
        return versions.score(self.store, label) or 0.0

    def per_eval(self, label: str) -> dict[int, float]:
        """The version's mean score per train eval (or per query), as recorded by its target."""
        return versions.per_eval(self.store, label)


def loop_state(run: RunState) -> stops.LoopState:
    """What the stop rules read, from the ledger alone (stops.from_ledger)."""
    return stops.from_ledger(
        finished=iterations.finished(run.store),
        versions=versions.outcomes(run.store),
        spent=ledger.summed_by_scope(run.store),
        best=run.best(),
        spent_usd=money.account(run.store).budgeted_usd,
        plateau_from=run.plateau_from,
    )


def register(run: RunState, n: int, parent: str, cand: Candidate) -> dict[str, str]:
    """A proposed skill folder as a new version (`{"label": vN}`), or the version it repeats
    (`{"duplicate": vM}`): two identical proposals are one version."""
    digest = skills.content_hash(cand.folder)
    same = versions.by_hash(run.store, digest)
    if same:
        # Registered by this very proposal in a process killed before it recorded the outcome in
        # the iteration's row: the same version, not a duplicate of another proposal.
        begun = iterations.get(run.store, n)
        recorded = {
            outcome.get("label") for outcome in (begun.candidates if begun else {}).values()
        }
        if (same.iteration, same.parent) == (n, parent) and same.label not in recorded:
            return {"label": same.label}
        return {"duplicate": same.label}
    label = f"v{versions.count(run.store)}"
    dest = run.ws.skill(label)
    if dest.exists():  # left by a process killed before it committed the row
        shutil.rmtree(dest)
    skills.snapshot(cand.folder, dest)
    diff = skills.unified_diff(run.ws.skill(parent), dest)
    write_text(run.ws.version(label) / "proposal.md", proposal_markdown(label, parent, cand, diff))
    versions.register(
        run.store,
        label,
        digest=digest,
        parent=parent,
        iteration=n,
        summary=cand.summary,
        rationale=cand.rationale,
    )
    return {"label": label}


def record_decision(
    run: RunState, label: str, parent: str, phase: str, selection: dict[str, Any]
) -> None:
    """selection.json, the decisions row and the version's state, in one step; a won child
    becomes the current best when it beats the best (with Pareto parents it may not). The row's
    delta and interval are read from the selection itself, never passed beside it."""
    write_json(
        run.ws.version(label) / "selection.json",
        {**selection, "stage": phase, "parent": parent},  # the file's field, as old folders hold it
        SelectionFile,
    )
    verdict = selection["decision"]
    best = run.best()
    promote = keep.promotes(verdict, parent, best, run.score(label), run.score(best))
    # The row's delta and interval are read from the selection itself.
    interval = selection.get("interval") or {}
    row: DecisionRow = {
        "version": label,
        "parent": parent,
        "phase": phase,
        "decision": verdict,
        "delta": selection.get("delta"),
        "ci_low": interval.get("low"),
        "ci_high": interval.get("high"),
        "reason": selection["reason"],
        "selection_json": json.dumps(selection),
        "decided_at": now(),
    }
    decisions.record(run.store, run_id=run.ws.root.name, row=row, promote=promote)
    run.emit(events.Decided(label, parent, verdict, phase, selection["reason"], promote))


def mark_baseline(run: RunState, phase: str) -> None:
    """v0 is evaluated: it enters the lineage as the baseline every child is measured against."""
    versions.mark_baseline(run.store, phase)
