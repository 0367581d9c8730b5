"""The description loop (`--target description`): probe, propose a description, probe, select on
validation, seal the test; each step commits. Never shows the proposer a validation or test query."""

from __future__ import annotations

import asyncio
import json
import random

import structlog
from rich.console import Console

from optimizer.config import Selection, Settings
from optimizer.errors import RunStopped, WorkFailed
from optimizer.grade.stats import paired_bootstrap
from optimizer.inputs import skill as skills
from optimizer.inputs import triggers as trigger
from optimizer.model import scope
from optimizer.search import evidence, lineage, select, stops

# Shared with the body loop: these touch only ws, store and settings, which both runs have.
from optimizer.search.engine import (
    RunState,
    _next_iteration,
    _set_status,
    loop_state,
    score_sealed_test,
    stop_rules,
)
from optimizer.search.engine import candidate as propose_candidate
from optimizer.search.engine import finish as finish_run
from optimizer.search.propose import Feedback
from optimizer.search.reporter import Reporter
from optimizer.store.db import Store, now
from optimizer.store.files import Workspace, write_json

log = structlog.get_logger()
STAGE = "probe"  # versions.stage of a version whose train and validation probes are committed
_EPS = 1e-12


class DescRun(RunState):
    """A description run: its trigger queries, split into train, validation and sealed test."""

    def __init__(self, ws: Workspace, store: Store, client, settings: Settings, reporter: Reporter):
        super().__init__(ws, store, client, settings, reporter)
        self.queries = {q["id"]: trigger.Query(**q) for q in self.split["queries"]}
        self.validation = self.split["validation"]
        self.runs = settings.evals.runs_per_eval

    def metrics(self, label: str, ids: list[int]) -> dict:
        s = self.settings.selection
        return trigger.metrics(trigger.recorded(self.store, label), self.queries, ids,
                               samples=s.bootstrap_samples, confidence=s.confidence)


async def optimize(ws: Workspace, store: Store, client, settings: Settings, *,
                   flag: stops.SignalFlag, console: Console) -> str:
    with Reporter(console, store, simulated=getattr(client, "simulated", False)) as ui:
        run = DescRun(ws, store, client, settings, ui)
        _set_status(run, "running")
        run.stops = stop_rules(run, flag)
        try:
            reason = await evaluate_v0(run)
            while reason is None and (reason := run.stops.any(loop_state(run))) is None:
                await iterate(run, _next_iteration(run))
        except RunStopped as exc:  # the budget, or an urgent stop inside a stage
            reason = str(exc)
        log.info("run.stopping", reason=reason)
        await seal_test(run)
        finish(run, reason)
    return reason


async def probe(run: DescRun, label: str, split: str) -> None:
    """Every (query, run) of one split for one version that has no answer yet; each answer is
    committed as it comes. Failed probes are kept as errors and asked again on the next call."""
    ids = getattr(run, split)
    done = trigger.recorded(run.store, label)
    todo = [(q, n) for q in ids for n in range(1, run.runs + 1) if done.get(q, {}).get(n) is None]
    if not todo:
        return
    run.set_stage(f"{label}: trigger probe, {split} ({len(todo)} requests)")
    text = (run.ws.skill(label) / "SKILL.md").read_text(encoding="utf-8")
    description = skills.parse_skill_md(text).description

    async def one(qid: int, n: int) -> None:
        result = await trigger.probe_one(run.client, run.skill_name, description, run.queries[qid],
                                         n, seed=run.settings.loop.seed)
        if result.error:
            log.warning("trigger.probe_failed", version=label, query=qid, run=n, error=result.error)
        trigger.record(run.store, label, split, result)
        run.ui.run_done()

    token = scope.set(label)
    try:
        tasks = [asyncio.ensure_future(one(q, n)) for q, n in todo]
    finally:
        scope.reset(token)  # each task took a copy of the context when it was created
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        # A budget stop must not leave probes writing rows behind the steps that follow it.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _record(run: DescRun, label: str) -> None:
    """versions.score and pass_rate are the accuracy over train and validation together (so the
    target stop needs every query right, not only the few validation ones); split_scores_json
    holds the pass of each of those queries, for parent selection and `optimizer diff`."""
    dev = run.metrics(label, run.train + run.validation)
    per_query = {q: float(v["passed"]) for q, v in dev["per_query"].items()}
    with run.store.atomic():
        run.store.db["versions"].update(label, {
            "score": dev["pass_rate"], "pass_rate": dev["pass_rate"],
            "split_scores_json": json.dumps(per_query)})
    write_json(run.ws.version(label) / "trigger.json", {
        "version": label, "train": run.metrics(label, run.train),
        "validation": run.metrics(label, run.validation)})


async def evaluate_v0(run: DescRun) -> str | None:
    """v0 on train and validation, and whether a search may start from it. A constant signal
    (v0 triggers on none, or on all, of those queries in every run) stops the run before any
    proposal, with the stop reason saying so: from there the probe cannot tell descriptions apart,
    which usually means a broken probe or trigger evals rather than a description to improve.
    The same check runs on every resume, so a resumed run stops the same way."""
    dev_ids = run.train + run.validation
    if (run.store.get("versions", "v0") or {}).get("decision") is None:
        await probe(run, "v0", "train")
        await probe(run, "v0", "validation")
        dev = run.metrics("v0", dev_ids)
        if dev["queries"] == 0:  # v0 stays undecided, so a resume asks these probes again
            raise WorkFailed(
                f"Every trigger probe of v0 failed ({dev['probe_errors']} requests; see "
                f"{run.ws.log}); check the provider and models.trigger, then `optimizer resume "
                f"{run.ws.root}`.")
        _record(run, "v0")
        with run.store.atomic():
            run.store.db["versions"].update("v0", {"decision": "baseline", "stage": STAGE,
                                                   "status": "evaluated"})
        _write_lineage(run, iteration=0)
    dev = run.metrics("v0", dev_ids)
    if dev["constant_signal"]:
        which = "none" if dev["constant_signal"] == "never" else "every one"
        log.warning("trigger.constant_signal", version="v0", kind=dev["constant_signal"])
        return (f"constant signal: v0's description triggered on {which} of the {dev['queries']} "
                f"train and validation queries in every run, so descriptions cannot be told apart; "
                "check the probe model and the trigger evals before optimizing")
    if not run.validation:
        return ("no validation queries (a class needs at least 2 trigger queries to give one), so "
                "no child could ever be selected; add trigger queries")
    return None


async def iterate(run: DescRun, n: int) -> None:
    row = run.store.get("iterations", n) or _start_iteration(run, n)
    parent = row["parent"]
    for k in range(run.settings.loop.proposals_per_iteration):
        if run.interrupted():
            return  # the iteration stays open; a resume continues it with the same parent
        label = await candidate(run, n, k, parent)
        if label and not (run.store.get("versions", label) or {}).get("decision"):
            await probe(run, label, "train")
            await probe(run, label, "validation")
            _record(run, label)
            _decide(run, label, parent)
    with run.store.atomic():
        run.store.db["iterations"].update(n, {"finished_at": now(), "stage": "done"})
    _write_lineage(run, iteration=n)


def _start_iteration(run: DescRun, n: int) -> dict:
    run.set_stage(f"iteration {n}: choosing a parent")
    known = [select.VersionScores(v.label, _per_query(run, v.label), v.label == run.best())
             for v in lineage.versions(run.store) if v.stage == STAGE and v.decision]
    parent = select.select_parent(known, strategy=run.settings.loop.parent_selection,
                                  rng=run.rng("parent", n))
    row = {"number": n, "parent": parent, "stage": "propose", "candidates_json": "{}",
           "started_at": now()}
    with run.store.atomic():
        run.store.db["iterations"].insert(row)
    return row


def _score(run: DescRun, label: str) -> float:
    return (run.store.get("versions", label) or {}).get("score") or 0.0


def _per_query(run: DescRun, label: str) -> dict[int, float]:
    raw = (run.store.get("versions", label) or {}).get("split_scores_json")
    return {int(k): v for k, v in json.loads(raw).items()} if raw else {}


def feedback(run: DescRun, parent: str) -> Feedback:
    """What the proposer may know: the parent's misses on TRAIN queries only, its train scores,
    human feedback and the attempts that lost. Validation and test queries never enter it."""
    found = evidence.gather(run.ws, run.store, parent, [])
    train = run.metrics(parent, run.train)
    found.missed_queries = [(run.queries[int(q)].query, v["should_trigger"])
                            for q, v in train["per_query"].items() if not v["passed"]]
    found.judge_feedback = [
        f"trigger probe on {train['queries']} training queries: accuracy {train['pass_rate']}, "
        f"precision {train['precision']}, recall {train['recall']}; each missed query is listed "
        "in missed_queries (should_trigger=true: the skill was not chosen; false: it was chosen "
        "but should not have been)."]
    return found


async def candidate(run: DescRun, n: int, k: int, parent: str) -> str | None:
    """Proposal k of iteration n, as a new version label; None when rejected or a duplicate."""
    return await propose_candidate(run, n, k, parent, feedback(run, parent))


def decide(child: dict, parent: dict, child_dev: float | None, parent_dev: float | None, *,
           selection: Selection, rng: random.Random) -> dict:
    """won / lost / tie of a child description against its parent on the validation queries.
    d per query = child pass − parent pass (each 0 or 1), over queries observed for both; Δ is
    their mean (the accuracy difference) with the paired bootstrap interval over queries. `won`
    when the interval lies above min_effect; `lost` when below zero. An inconclusive interval
    (small validation splits are) has no comparator to consult, so it is settled by Δ itself,
    with train and validation together as the check against luck: `won` when Δ > 0 and that
    accuracy did not drop, `lost` when Δ < 0, `tie` (the parent stays) otherwise."""
    both = sorted(set(child["per_query"]) & set(parent["per_query"]), key=int)
    ds = [float(child["per_query"][q]["passed"]) - float(parent["per_query"][q]["passed"]) for q in both]
    out = {"delta": None, "interval": None, "queries": len(ds), "split": "validation",
           "child": {k: child[k] for k in ("pass_rate", "precision", "recall", "f1", "constant_signal")},
           "parent": {k: parent[k] for k in ("pass_rate", "precision", "recall", "f1", "constant_signal")},
           "dev_pass_rate": {"child": child_dev, "parent": parent_dev}, "min_effect": selection.min_effect}
    if not ds:
        return {**out, "decision": "tie", "reason": "tie: no validation query has probe results "
                "for both the child and the parent."}
    delta, low, high = paired_bootstrap(ds, confidence=selection.confidence,
                                        samples=selection.bootstrap_samples, rng=rng)
    out.update(delta=round(delta, 6), interval={"low": round(low, 6), "high": round(high, 6),
                                                "confidence": selection.confidence})
    where = (f"validation accuracy Δ = {delta:+.3f} with {selection.confidence:.0%} interval "
             f"[{low:+.3f}, {high:+.3f}] over {len(ds)} queries")
    kept = child_dev is not None and parent_dev is not None and child_dev >= parent_dev - _EPS
    if low > selection.min_effect + _EPS:
        verdict, why = "won", f"won: {where} lies above the minimum effect {selection.min_effect}."
    elif high < -_EPS:
        verdict, why = "lost", f"lost: {where} lies below zero."
    elif delta > _EPS and kept:
        verdict, why = "won", (f"won: {where} is inconclusive, but Δ > 0 and the accuracy on train "
                               f"and validation did not drop ({parent_dev} → {child_dev}).")
    elif delta < -_EPS:
        verdict, why = "lost", f"lost: {where} is inconclusive and Δ < 0."
    elif delta > _EPS:
        verdict, why = "tie", (f"tie: {where} is inconclusive, and the accuracy on train and "
                               f"validation dropped ({parent_dev} → {child_dev}).")
    else:
        verdict, why = "tie", f"tie: {where}; the parent stays."
    if child["constant_signal"]:
        why += f" The child's signal is constant (it triggers {child['constant_signal']})."
    return {**out, "decision": verdict, "reason": why}


def _decide(run: DescRun, label: str, parent: str) -> None:
    s = run.settings.selection
    both = run.train + run.validation
    chosen = decide(run.metrics(label, run.validation), run.metrics(parent, run.validation),
                    run.metrics(label, both)["pass_rate"], run.metrics(parent, both)["pass_rate"],
                    selection=s, rng=run.rng("bootstrap", label))
    write_json(run.ws.version(label) / "selection.json", {**chosen, "stage": STAGE, "parent": parent})
    verdict, best = chosen["decision"], run.best()
    promote = verdict == "won" and (parent == best or _score(run, label) > _score(run, best))
    interval = chosen["interval"] or {}
    with run.store.atomic():
        run.store.upsert("decisions", {
            "version": label, "parent": parent, "stage": STAGE, "decision": verdict,
            "delta": chosen["delta"], "ci_low": interval.get("low"), "ci_high": interval.get("high"),
            "reason": chosen["reason"], "selection_json": json.dumps(chosen), "decided_at": now()},
            pk="version")
        run.store.db["versions"].update(label, {"decision": verdict, "stage": STAGE, "status": "decided"})
        if promote:
            run.store.db["runs"].update(run.ws.root.name, {"current_best": label})
    log.info("selection.decided", version=label, parent=parent, decision=verdict, stage=STAGE,
             reason=chosen["reason"], promoted=promote)
    run.ui.decided(label, verdict, chosen["reason"])


async def seal_test(run: DescRun) -> None:
    """The sealed test queries score v0 and the final best, whatever stopped the loop."""

    async def measure(label: str) -> dict:
        await probe(run, label, "test")
        m = run.metrics(label, run.test)
        return {"score": m["pass_rate"], **m}

    await score_sealed_test(run, measure, split="test")


def finish(run: DescRun, reason: str) -> None:
    finish_run(run, reason, _write_lineage)


def _write_lineage(run: DescRun, *, iteration: int) -> None:
    lineage.write_files(run.ws, run.store, simulated=getattr(run.client, "simulated", False),
                        skill_name=run.skill_name, iteration=iteration)
