"""The optimizer loop of DESIGN §3: choose a parent, propose, screen, benchmark, compare, analyze,
select; then the sealed test. Each step is one call whose result is committed before the next, so
a killed run resumes where it was. Only this module knows the order of the steps."""

from __future__ import annotations

import json
import math
import random
import shutil
from contextlib import suppress

import structlog
from rich.console import Console

from optimizer.config import Settings
from optimizer.errors import BudgetExhausted, RunStopped, WorkFailed, is_systemic
from optimizer.execute import executor_for
from optimizer.grade.unit import SCORED_SQL, Evaluator, eval_means, judge_errors, unscored
from optimizer.inputs import skill as skills
from optimizer.inputs.evals import EvalSet, load_evals
from optimizer.model import scoped
from optimizer.search import evidence, lineage, select, stops
from optimizer.search.analyze import analyze
from optimizer.search.compare import compare_versions
from optimizer.search.propose import Candidate, proposal_markdown, propose
from optimizer.search.reporter import Reporter
from optimizer.search.summaries import write_benchmark
from optimizer.store.db import Store, now
from optimizer.store.files import Workspace, write_json, write_text

log = structlog.get_logger()


class RunState:
    """What the steps of both loops (body and description) share; built once per process from
    state.db."""

    def __init__(self, ws: Workspace, store: Store, client, settings: Settings, reporter: Reporter):
        self.ws, self.store, self.client, self.settings, self.ui = ws, store, client, settings, reporter
        self.row = store.run_row()
        self.skill_name = self.row["skill_name"]
        self.split = json.loads(self.row["split_json"])
        self.train, self.test = self.split["train"], self.split["test"]
        self.stops = stops.StopRules(())  # set by optimize() once the signal handler is in place

    def interrupted(self) -> str | None:
        """The reason to stop now (a signal, the stop file, the budget, the deadline), or None."""
        return self.stops.now(loop_state(self))

    def rng(self, *purpose: object) -> random.Random:
        return random.Random(":".join(map(str, (self.settings.loop.seed, *purpose))))

    def best(self) -> str:
        return lineage.current_best(self.store)

    def set_stage(self, stage: str) -> None:
        with self.store.atomic():
            self.store.db["runs"].update(self.ws.root.name, {"stage": stage})
        self.ui.stage(stage)


class Run(RunState):
    """A body run: its evals, and the evaluator that runs and grades them."""

    def __init__(self, ws: Workspace, store: Store, client, settings: Settings, reporter: Reporter,
                 executor):
        super().__init__(ws, store, client, settings, reporter)
        self.target = self.row["target"]
        self.evalset: EvalSet = load_evals(ws.root / "inputs")
        self.runs_per_eval = settings.evals.runs_per_eval
        self.evaluator = Evaluator(ws, store, client, settings, self.evalset, executor,
                                   skill_name=self.skill_name, inputs_root=ws.root / "inputs",
                                   on_run=lambda s: reporter.run_done(),
                                   should_stop=self.interrupted)


async def optimize(ws: Workspace, store: Store, client, settings: Settings, *,
                   flag: stops.SignalFlag, console: Console) -> str:
    if (store.run_row() or {}).get("target") == "description":
        from optimizer.search import description as describe

        return await describe.optimize(ws, store, client, settings, flag=flag, console=console)
    simulated = getattr(client, "simulated", False)
    with Reporter(console, store, simulated=simulated) as ui, executor_for(None, settings, client) as ex:
        run = Run(ws, store, client, settings, ui, ex)
        _set_status(run, "running")
        run.stops = stop_rules(run, flag)
        try:
            await evaluate_baseline(run)
            while (reason := run.stops.any(loop_state(run))) is None:
                await iterate(run, _next_iteration(run))
        except RunStopped as exc:  # the budget, or an urgent stop inside a stage
            reason = str(exc)
        log.info("run.stopping", reason=reason)
        await seal_test(run)
        finish(run, reason)
    return reason


def stop_rules(run: RunState, flag: stops.SignalFlag) -> stops.StopRules:
    s = run.settings
    return stops.StopRules(
        urgent=(flag.condition(), stops.stop_file(run.ws.stop_file), stops.budget(s.budget.usd),
                stops.deadline(stops.parse_deadline(s.budget.deadline))),
        at_iteration_end=(stops.max_iterations(s.loop.max_iterations),
                          stops.target(s.loop.target_score), stops.plateau(s.loop.patience)))


def loop_state(run: Run) -> stops.LoopState:
    finished = run.store.query("select number from iterations where finished_at is not null order by number")
    wins = {r["iteration"] for r in run.store.query("select iteration from versions where decision = 'won'")}
    streak = 0
    for row in reversed(finished):
        if row["number"] in wins:
            break
        streak += 1
    best = run.store.get("versions", run.best()) or {}
    return stops.LoopState(iterations_done=len(finished), iterations_without_win=streak,
                           best_score=best.get("score") or 0.0, spent_usd=run.store.spent_usd())


async def evaluate_baseline(run: Run) -> None:
    """v0 on the train evals, and the no-skill baseline once per eval set."""
    if run.settings.evals.baseline_comparison:
        run.set_stage("baseline: without_skill runs")
        await run.evaluator.baseline(run.train, run.runs_per_eval)
    run.set_stage("v0: with_skill runs")
    await run.evaluator.version("v0", run.train, run.runs_per_eval)
    _record_scores(run, "v0")
    if (run.store.get("versions", "v0") or {}).get("decision") is None:
        with run.store.atomic():
            run.store.db["versions"].update("v0", {"decision": "baseline", "stage": "benchmark",
                                                   "status": "evaluated"})
    write_benchmark(run, "v0")
    await retry_unscored(run)
    _write_lineage(run, iteration=0)


async def retry_unscored(run: Run) -> None:
    """Each process tries again the runs a failure of ours left unscored (DESIGN §7) where later
    decisions and the sealed test rest on them: the baseline, v0 and the current best. Decided
    versions keep their decisions; their unscored runs stay counted and shown."""
    wanted: dict[str, set[int]] = {}
    runs: dict[str, int] = {}
    for row in run.store.query("select key from gradings where status = 'unscored' order by key"):
        label, e, n = row["key"].split("/")[0], eval_of(row["key"]), evidence.run_number(row["key"])
        if label in ("baseline", "v0", run.best()) and e in run.train:
            wanted.setdefault(label, set()).add(e)
            runs[label] = max(runs.get(label, 0), n)
    for label in sorted(wanted):
        run.set_stage(f"{label}: retrying unscored runs")
        evals = sorted(wanted[label])
        if label == "baseline":
            await run.evaluator.baseline(evals, runs[label])
            continue
        await run.evaluator.version(label, evals, runs[label])
        _record_scores(run, label)
        write_benchmark(run, label)


def _next_iteration(run: Run) -> int:
    open_ = run.store.query("select number from iterations where finished_at is null order by number limit 1")
    if open_:
        return open_[0]["number"]
    last = run.store.query("select max(number) as n from iterations")[0]["n"]
    return (last or 0) + 1


async def iterate(run: Run, n: int) -> None:
    row = run.store.get("iterations", n) or _start_iteration(run, n)
    parent = row["parent"]
    for k in range(run.settings.loop.proposals_per_iteration):
        if run.interrupted():
            return  # the iteration stays open; a resume continues it with the same parent
        # Gathered afresh for each proposal, after the previous sibling was judged: a resumed
        # iteration then asks exactly what an uninterrupted one asked, and proposal k learns
        # from the loss of proposal k-1.
        feedback = evidence.gather(run.ws, run.store, parent, run.train)
        label = await candidate(run, n, k, parent, feedback)
        if label and not await _judge_safely(run, label, parent):
            return  # stopped before its decision: a resume judges it again from the ledger
    with run.store.atomic():
        run.store.db["iterations"].update(n, {"finished_at": now(), "stage": "done"})
    _write_lineage(run, iteration=n)


async def _judge_safely(run: Run, label: str, parent: str) -> bool:
    """judge_candidate, with a failure of ours inside it recorded on the version (status failed,
    with the error) instead of stopping the run; the version stays undecided."""
    try:
        return await judge_candidate(run, label, parent)
    except Exception as exc:
        if is_systemic(exc):
            raise
        log.exception("version.failed", version=label)
        with run.store.atomic():
            run.store.db["versions"].update(label, {
                "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500]})
        return True


def _start_iteration(run: Run, n: int) -> dict:
    run.set_stage(f"iteration {n}: choosing a parent")
    versions = [select.VersionScores(v.label, _per_eval(run, v.label), v.label == run.best())
                for v in lineage.versions(run.store) if v.stage == "benchmark" and v.decision]
    parent = select.select_parent(versions, strategy=run.settings.loop.parent_selection,
                                  rng=run.rng("parent", n))
    row = {"number": n, "parent": parent, "stage": "propose", "candidates_json": "{}",
           "started_at": now()}
    with run.store.atomic():
        run.store.db["iterations"].insert(row)
    return row


async def candidate(run: RunState, n: int, k: int, parent: str, feedback) -> str | None:
    """Proposal k of iteration n, as a new version label; None when rejected or a duplicate. Any
    failure of this one candidate (a bad answer, an edit that cannot be applied, a bug of ours
    on an odd file) is recorded as its rejection with the reason, and the loop goes on; a resume
    replays the same answer from the ledger and records the same outcome."""
    made = json.loads(run.store.get("iterations", n)["candidates_json"] or "{}")
    if str(k) in made:
        return made[str(k)].get("label")
    run.set_stage(f"iteration {n}: proposal {k + 1} from {parent}")
    scratch = run.ws.root / ".proposals" / f"{n}-{k}"
    try:
        with scoped(f"proposal {n}-{k}"):
            result = await propose(run.client, parent=run.ws.skill(parent), feedback=feedback,
                                   target=run.row["target"], dest=scratch, sample=n * 100 + k)
        if isinstance(result, Candidate):
            outcome = _register(run, n, parent, result)
        else:
            outcome = {"rejected": result.problems, "reasons": result.reasons}
    except Exception as exc:
        if is_systemic(exc):
            raise
        log.exception("proposal.failed", iteration=n, k=k)
        outcome = {"rejected": [f"internal error: {type(exc).__name__}: {exc}"[:500]],
                   "reasons": ["internal error"]}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        with suppress(OSError):  # the scratch root goes too once no proposal is in it
            scratch.parent.rmdir()
    made[str(k)] = outcome
    with run.store.atomic():
        run.store.db["iterations"].update(n, {"candidates_json": json.dumps(made)})
    log.info("proposal.made", iteration=n, k=k, **{key: str(v) for key, v in outcome.items()})
    return outcome.get("label")


def _register(run: Run, n: int, parent: str, cand: Candidate) -> dict:
    digest = skills.content_hash(cand.folder)
    same = run.store.query("select label, parent, iteration from versions where hash = ?", [digest])
    if same:
        # Registered by this very proposal in a process killed before it recorded the outcome in
        # the iteration's row: the same version, not a duplicate of another proposal.
        made = json.loads(run.store.get("iterations", n)["candidates_json"] or "{}")
        recorded = {outcome.get("label") for outcome in made.values()}
        if (same[0]["iteration"], same[0]["parent"]) == (n, parent) and same[0]["label"] not in recorded:
            return {"label": same[0]["label"]}
        return {"duplicate": same[0]["label"]}
    label = f"v{run.store.db['versions'].count}"
    dest = run.ws.skill(label)
    if dest.exists():  # left by a process killed before it committed the row
        shutil.rmtree(dest)
    skills.snapshot(cand.folder, dest)
    diff = skills.unified_diff(run.ws.skill(parent), dest)
    write_text(run.ws.version(label) / "proposal.md", proposal_markdown(label, parent, cand, diff))
    with run.store.atomic():
        run.store.db["versions"].insert({
            "label": label, "hash": digest, "parent": parent, "iteration": n, "created_at": now(),
            "status": "proposed", "summary": cand.summary, "rationale": cand.rationale,
        })
    return {"label": label}


async def judge_candidate(run: Run, label: str, parent: str) -> bool:
    """screen → benchmark → compare (adding runs while undecided) → select → analyze. Returns
    whether the version is decided: an urgent stop between (or inside) these steps leaves it
    undecided, with everything done so far committed, never with an interim decision."""
    if (run.store.get("versions", label) or {}).get("decision"):
        return True
    ev, s = run.evaluator, run.settings
    runs = run.runs_per_eval
    parent_res = await ev.version(parent, run.train, runs)
    if 0 < s.loop.screen_evals < len(run.train):
        run.set_stage(f"{label}: screening")
        batch = select.choose_minibatch(run.train, _means(eval_means(parent_res)), s.loop.screen_evals,
                                        run.rng("minibatch", label))
        child_mb = await ev.version(label, batch, 1)
        passed, why = select.screen(eval_means(child_mb), {e: eval_means(parent_res)[e] for e in batch},
                                    margin=s.selection.screen_margin)
        if not passed:
            _record_scores(run, label)
            _decide(run, label, parent, "screening", {"decision": "lost", "reason": why})
            return True
    while True:
        if run.interrupted():
            return False
        run.set_stage(f"{label}: benchmark ({runs} runs per eval)")
        child_res = await ev.version(label, run.train, runs)
        parent_res = await ev.version(parent, run.train, runs)
        if run.interrupted():
            return False
        run.set_stage(f"{label}: blind comparison with {parent}")
        with scoped(label):  # the comparison's calls are part of what the child cost
            tally = await compare_versions(
                run.client, evals=[run.evalset.by_id(e) for e in run.train],
                child_runs=_dirs(run, label, runs), parent_runs=_dirs(run, parent, runs),
                out_dir=run.ws.comparison_dir(label), rng_seed=run.settings.loop.seed)
        errors, total = judge_errors(child_res, parent_res)
        lost = unscored(child_res, parent_res)
        if total and len(lost) / total > s.selection.max_unscored_rate:
            # Deciding on what is left would let our failure decide: stop, the child undecided.
            raise WorkFailed(
                f"{len(lost)} of {total} runs of {label} and its parent {parent} could not be "
                f"scored, more than selection.max_unscored_rate = {s.selection.max_unscored_rate} "
                f"(the last cause: {lost[-1].error or 'unknown'}); {label} stays undecided. Fix the "
                f"cause, then `optimizer resume {run.ws.root}`.")
        decision = select.decide(eval_means(child_res), eval_means(parent_res), tally,
                                 selection=s.selection, rng=run.rng("bootstrap", label, runs),
                                 judge_errors=errors, total_runs=total, unscored=len(lost))
        if not (decision.needs_more_runs and runs < s.selection.max_runs_per_eval):
            break
        runs += 1
    if run.interrupted():
        return False
    _record_scores(run, label)
    _record_scores(run, parent)
    write_benchmark(run, label)
    write_benchmark(run, parent)
    run.set_stage(f"{label}: analysis")
    await _analyze(run, label, parent, decision, tally)
    _decide(run, label, parent, "benchmark", select.selection_json(decision), decision)
    return True


async def _analyze(run: Run, label: str, parent: str, decision, tally) -> None:
    winner, loser = (label, parent) if decision.decision == "won" else (parent, label)
    failed = [(f.eval_id, f.text, f.count) for f in evidence.gather(run.ws, run.store, loser, run.train).failures]
    transcripts = {}
    for lab in (winner, loser):
        for e in run.train[:3]:
            path = run.ws.run_dir(lab, e, "with_skill", 1) / "transcript.md"
            if path.is_file():
                transcripts[f"{'winner' if lab == winner else 'loser'} eval {e}"] = path.read_text(encoding="utf-8")[:4000]
    with scoped(label):
        await analyze(run.client, winner_skill=run.ws.skill(winner), loser_skill=run.ws.skill(loser),
                      winner_label=winner, loser_label=loser, tally=tally, failed_expectations=failed,
                      transcripts=transcripts, out_path=run.ws.version(label) / "analysis.json")


def _decide(run: Run, label: str, parent: str, stage: str, selection: dict, decision=None) -> None:
    write_json(run.ws.version(label) / "selection.json", {**selection, "stage": stage, "parent": parent})
    verdict = selection["decision"]
    best = run.best()
    promote = verdict == "won" and (parent == best or _score(run, label) > _score(run, best))
    with run.store.atomic():
        run.store.upsert("decisions", {
            "version": label, "parent": parent, "stage": stage, "decision": verdict,
            "delta": getattr(decision, "delta", None), "ci_low": getattr(decision, "ci_low", None),
            "ci_high": getattr(decision, "ci_high", None), "reason": selection["reason"],
            "selection_json": json.dumps(selection), "decided_at": now()}, pk="version")
        run.store.db["versions"].update(label, {"decision": verdict, "stage": stage, "status": "decided"})
        if promote:
            run.store.db["runs"].update(run.ws.root.name, {"current_best": label})
    log.info("selection.decided", version=label, parent=parent, decision=verdict, stage=stage,
             reason=selection["reason"], promoted=promote)
    run.ui.decided(label, verdict, selection["reason"])


async def seal_test(run: Run) -> None:
    """The sealed test split scores v0 and the final best, whatever stopped the loop."""
    root = Workspace(run.ws.root / "test")

    async def measure(label: str) -> dict:
        res = await run.evaluator.version(label, run.test, run.runs_per_eval, root=root, split="test")
        per_eval = {e: sum(v) / len(v) for e, v in eval_means(res).items() if v}
        return {"score": round(sum(per_eval.values()) / len(per_eval), 4) if per_eval else None,
                "per_eval": {str(e): round(v, 4) for e, v in per_eval.items()}}

    await score_sealed_test(run, measure)


async def score_sealed_test(run, measure, **extra: object) -> None:
    """v0 and the final best on the sealed test split, each scored by `measure(label)`; shared
    by the body and description loops. A budget that runs out here is recorded, not raised."""
    if not run.test:
        return
    best = run.best()
    result: dict = {**extra, "evals": run.test, "versions": {}}
    try:
        for label in dict.fromkeys(["v0", best]):
            run.set_stage(f"sealed test: {label}")
            result["versions"][label] = await measure(label)
        scores = [result["versions"][lab]["score"] for lab in ("v0", best)]
        result.update(best=best, delta=round(scores[1] - scores[0], 4) if None not in scores else None)
    except BudgetExhausted as exc:
        result["incomplete"] = f"the budget ran out during the sealed test: {exc}"
    with run.store.atomic():
        run.store.db["runs"].update(run.ws.root.name, {"test_json": json.dumps(result)})


def finish(run, reason: str, write_lineage=None) -> None:
    with run.store.atomic():
        run.store.db["runs"].update(run.ws.root.name, {"status": "stopped", "stop_reason": reason,
                                                       "finished_at": now(), "stage": "stopped"})
    (write_lineage or _write_lineage)(run, iteration=loop_state(run).iterations_done)
    run.ui.finished(reason, run.best())


def _set_status(run: RunState, status: str) -> None:
    # A run that starts again has no stop reason and no error yet: the old ones are history.
    with run.store.atomic():
        run.store.db["runs"].update(run.ws.root.name, {"status": status, "stop_reason": None,
                                                       "last_error": None})


def _write_lineage(run: Run, *, iteration: int) -> None:
    from optimizer.search.summaries import analyst_suggestions

    lineage.write_files(run.ws, run.store, simulated=getattr(run.client, "simulated", False),
                        skill_name=run.skill_name, iteration=iteration,
                        extra_notes=analyst_suggestions(run))


def _record_scores(run: Run, label: str) -> None:
    """A version's score is over every committed, scored train run it has, whichever stage added
    them; never over what one caller happens to hold (a resume would record fewer runs). Runs are
    read in (eval, run number) order and summed exactly, so no completion order shows in the
    number; unscored runs and judge errors are left out (DESIGN §7)."""
    rows = run.store.query("select key, score, pass_rate from gradings where key like ? and "
                           f"status in {SCORED_SQL}", [f"{label}/eval-%/with_skill/run-%"])
    scores: dict[int, list[float]] = {}
    rates: dict[int, list[float]] = {}
    for row in sorted(rows, key=lambda r: (eval_of(r["key"]), evidence.run_number(r["key"]))):
        e = eval_of(row["key"])
        if e in run.train:
            rates.setdefault(e, []).append(row["pass_rate"])
            if row["score"] is not None:
                scores.setdefault(e, []).append(row["score"])
    per_eval = _means(scores)
    rate = _means(rates)
    with run.store.atomic():
        run.store.db["versions"].update(label, {
            "score": math.fsum(per_eval.values()) / len(per_eval) if per_eval else None,
            "pass_rate": math.fsum(rate.values()) / len(rate) if rate else None,
            "split_scores_json": json.dumps(per_eval)})


def eval_of(key: str) -> int:
    """The eval id of a gradings key (v1/eval-3/with_skill/run-2 → 3)."""
    return int(key.split("/eval-", 1)[1].split("/", 1)[0])


def _means(scores: dict[int, list[float]]) -> dict[int, float]:
    return {e: math.fsum(v) / len(v) for e, v in sorted(scores.items()) if v}


def _per_eval(run: Run, label: str) -> dict[int, float]:
    raw = (run.store.get("versions", label) or {}).get("split_scores_json")
    return {int(k): v for k, v in json.loads(raw).items()} if raw else {}


def _score(run: Run, label: str) -> float:
    return (run.store.get("versions", label) or {}).get("score") or 0.0


def _dirs(run: Run, label: str, runs: int) -> dict[int, list]:
    return {e: [run.ws.run_dir(label, e, "with_skill", n) for n in range(1, runs + 1)] for e in run.train}
