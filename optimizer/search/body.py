"""The body target: SKILL.md and the skill's files are varied, and a candidate is run on the train
evals, graded, compared blind with its parent and decided by the promotion rule (docs/design.md §8).
Never shows the proposer or the analyzer anything of the sealed test split."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from optimizer.decide import fdr, keep, parents, step
from optimizer.decide import screen as screening
from optimizer.decide.comparison import Asked, ComparisonTally, Measured
from optimizer.events import Activity, TrialGraded
from optimizer.execute import executor_for
from optimizer.grade.compare import compare_versions
from optimizer.grade.jobs import BASELINE, Side, jobs_for
from optimizer.grade.judge import warn_same_model
from optimizer.grade.unit import (
    Grader,
    GradingHooks,
    Scored,
    eval_means,
    judge_errors,
    unscored_within,
)
from optimizer.inputs.evals import EvalSet, load_evals
from optimizer.model import scoped
from optimizer.schemas import RuleDecision
from optimizer.search import copied, evidence, lineage
from optimizer.search.analyze import Pairing, analyze, first_transcripts
from optimizer.search.proposal import Candidate, Rejected
from optimizer.search.propose import propose
from optimizer.search.state import RunState, mark_baseline
from optimizer.search.summaries import analyst_suggestions, means, record_scores, write_benchmark
from optimizer.search.target import TargetDecision
from optimizer.store import decisions, gradings, versions
from optimizer.words import plural

Results = dict[int, list[Scored]]


@contextmanager
def open_target(run: RunState) -> Iterator[BodyTarget]:
    with executor_for(None, run.settings, run.client) as executor:
        yield BodyTarget(run, executor)


class BodyTarget:
    name = "body"
    phase = "benchmark"

    def __init__(self, run: RunState, executor: Any) -> None:
        self.run = run
        self.evalset: EvalSet = load_evals(run.ws.root / "inputs")
        train = [e for e in self.evalset.evals if e.id in set(run.train)]  # search/copied.py
        self.train_values = copied.train_values(train, run.ws.root / "inputs")
        self.train_wording = copied.wording_of(train)
        self.runs_per_eval = run.settings.evals.runs_per_eval
        # A step's first look and v0's runs on train; the sealed test keeps evals.runs_per_eval.
        self.selection = step.for_steps(run.settings.selection)  # what a step is decided under
        self.rule = step.rule_for(self.selection)
        # The comparator's tally of a child judged and not yet recorded: judge() hands it to learn().
        self._tallies: dict[str, ComparisonTally] = {}
        self.step_runs = self.selection.first_runs or self.runs_per_eval
        self.v0_runs = self.selection.v0_runs or self.runs_per_eval
        warn_same_model(run.settings)
        self.grader = Grader(
            run.store,
            run.client,
            run.settings,
            self.evalset,
            executor,
            skill_name=run.skill_name,
            inputs_root=run.ws.root / "inputs",
            hooks=GradingHooks(
                on_run=lambda _: run.emit(TrialGraded()), should_stop=run.interrupted
            ),
        )

    # -- runs of a version ----------------------------------------------------------------------

    async def version(self, label: str, evals: list[int], runs: int | dict[int, int]) -> Results:
        """with_skill runs 1..runs of `label` on train evals (runs: one count, or one per eval)."""
        ws = self.run.ws
        counts = runs if isinstance(runs, dict) else dict.fromkeys(evals, runs)
        return await self.grader.grade(
            [
                job
                for e in evals
                for job in jobs_for(
                    [e],
                    counts[e],
                    prefix=f"{label}/",
                    root=ws.root,
                    side=Side("with_skill", ws.skill(label), label),
                )
            ],
            scope=label,
        )

    async def fresh(self, order: list[tuple[str, int, int]], *, scope: str) -> dict[str, Results]:
        """with_skill runs (version, eval, run number) in the order given, as one phase: fresh
        evidence under `<scope>/`, back per version and eval by run number (order decides nothing)."""
        ws, test = self.run.ws, set(self.run.test)
        jobs = [
            jobs_for(
                [e],
                1,
                prefix=f"{scope.replace(' ', '-')}/{label}/",
                root=ws.root,
                side=Side("with_skill", ws.skill(label), label),
                split="test" if e in test else "train",
                first=n,
            )[0]
            for label, e, n in order
        ]
        graded = await self.grader.grade(jobs, scope=scope)
        side = {job.key: job.version for job in jobs}
        out: dict[str, Results] = {label: {} for label, _, _ in order}
        for e in sorted(graded):
            for one in sorted(graded[e], key=lambda r: r.run_number):
                out[side[one.key]].setdefault(e, []).append(one)
        return out

    async def baseline(self, evals: list[int], runs: int) -> Results:
        return await self.grader.grade(
            jobs_for(evals, runs, prefix="baseline/", root=self.run.ws.root, side=BASELINE),
            scope="baseline",
        )

    # -- the target ----------------------------------------------------------------------------

    async def start(self) -> str | None:
        """v0 on the train evals, and the no-skill baseline once per eval set."""
        run = self.run
        if run.settings.evals.baseline_comparison:
            run.emit(Activity("baseline: without_skill runs"))
            await self.baseline(run.train, self.runs_per_eval)
        run.emit(Activity("v0: with_skill runs"))
        await self.version("v0", run.train, self.v0_runs)
        record_scores(run, "v0")
        mark_baseline(run, self.phase)
        write_benchmark(run, self.evalset, "v0")
        await self.retry_unscored()
        self.write_lineage(0)
        return None

    async def retry_unscored(self) -> None:
        """Each process tries again the runs a failure of ours left unscored (docs/design.md §7) where
        later decisions and the sealed test rest on them: the baseline, v0 and the current best.
        Decided versions keep their decisions; their unscored runs stay counted and shown."""
        run = self.run
        wanted: dict[str, set[int]] = {}
        runs: dict[str, int] = {}
        for row in gradings.unscored_runs(run.store):
            label, e, n = row["prefix"].split("/")[0], row["eval_id"], row["run_number"]
            if label in ("baseline", "v0", run.best()) and e in run.train:
                wanted.setdefault(label, set()).add(e)
                runs[label] = max(runs.get(label, 0), n)
        for label in sorted(wanted):
            run.emit(Activity(f"{label}: retrying unscored runs"))
            if label == "baseline":
                await self.baseline(sorted(wanted[label]), runs[label])
                continue
            await self.version(label, sorted(wanted[label]), runs[label])
            record_scores(run, label)
            write_benchmark(run, self.evalset, label)

    async def propose(self, parent: str, dest: Path, sample: int) -> Candidate | Rejected:
        feedback = evidence.gather(self.run.ws, self.run.store, parent, self.run.train)
        return await propose(
            self.run.client,
            parent=self.run.ws.skill(parent),
            feedback=feedback,
            target=self.name,
            dest=dest,
            sample=sample,
            values=self.train_values,
            wording=self.train_wording,
        )

    async def judge(self, label: str, parent: str) -> TargetDecision | None:
        """screen → benchmark → compare → the step rule, looking again while decide/keep.plan asks
        for more runs. An urgent stop between (or inside) these steps leaves the version
        undecided, with everything done so far committed, never with an interim decision."""
        run, s = self.run, self.run.settings
        runs = self.step_runs
        parent_res = await self.version(parent, run.train, self._parent_runs(parent, runs))
        if 0 < s.loop.screen_evals < len(run.train):
            run.emit(Activity(f"{label}: screening"))
            batch = screening.choose_minibatch(
                run.train,
                means(eval_means(parent_res)),
                s.loop.screen_evals,
                run.rng("minibatch", label),
            )
            child_mb = await self.version(label, batch, 1)
            passed, why = screening.screen(
                eval_means(child_mb),
                {e: eval_means(parent_res)[e] for e in batch},
                margin=self.selection.screen_margin,
            )
            if not passed:
                # The parent's runs may have grown for this step (selection.parent_runs).
                return TargetDecision(
                    "screening", {"decision": "lost", "reason": why}, (label, parent)
                )
        # One claim for the whole decision: the claims spend α over the looks differently, so a
        # claim that changed between looks (an eval scored only later) could overspend it.
        claim = step.claim_scope(self.selection, len(run.train))
        family = fdr.for_decision(decisions.rule_rows(run.store), self.selection, label)
        looking = keep.first_look(run.train, runs)
        while True:  # decide/keep.plan says what to run next, or the verdict
            if run.interrupted():
                return None
            runs = looking.runs
            run.emit(Activity(f"{label}: benchmark ({plural(runs, 'run')} per eval)"))
            counts = dict(looking.counts)
            child_res = await self.version(label, run.train, counts)
            parent_res = await self.version(parent, run.train, self._parent_runs(parent, counts))
            if run.interrupted():
                return None
            pairs = step.compared_runs(self.selection, runs)
            tally = await self._compare(
                label, parent, {e: min(n, pairs) for e, n in counts.items()}
            )
            looked = self._decide(
                label, parent, (child_res, parent_res), tally, runs, family, claim
            )
            planned = keep.plan(
                looking, looked, eval_means(child_res), eval_means(parent_res), self.selection
            )
            if isinstance(planned, RuleDecision):
                decision = planned
                break
            looking = planned
        self._tallies[label] = tally  # for learn(), which the engine calls next
        chosen = decision.model_dump(mode="json")
        if family:
            chosen["night"] = family.as_json()
        return TargetDecision(self.phase, chosen, (label, parent))

    async def learn(self, label: str, parent: str, verdict: TargetDecision) -> bool:
        """The analyzer's reading of the winner against the loser (analysis.json beside the
        child, which the next proposal reads); none after a screening loss."""
        tally = self._tallies.pop(label, None)
        if verdict.phase != self.phase or tally is None:
            return True
        if self.run.interrupted():
            return False
        self.run.emit(Activity(f"{label}: analysis"))
        await self._analyze(label, parent, str(verdict.selection["decision"]), tally)
        return True

    def record(self, label: str, phase: str) -> None:
        """The version's train score; after a benchmark decision also v<N>/benchmark.json (a child
        screening stopped has the minibatch's runs only: no benchmark of the train evals)."""
        record_scores(self.run, label)
        if phase == self.phase:
            write_benchmark(self.run, self.evalset, label)

    def _parent_runs(self, parent: str, counts: int | dict[int, int]) -> dict[int, int]:
        """decide/parents.runs_read over the ledger: all of v0's runs (paid already, chosen by no
        outcome), and one more for each child of the parent decided so far."""
        per = counts if isinstance(counts, dict) else dict.fromkeys(self.run.train, counts)
        return parents.runs_read(
            per,
            floor=self.v0_runs if parent == "v0" else 0,
            judged=len(versions.decided_children(self.run.store, parent)),
            most=self.selection.parent_runs,
        )

    async def _compare(self, label: str, parent: str, compared: dict[int, int]) -> ComparisonTally:
        """The blind comparator on the first `compared` run pairs of each eval; no call at all
        when no pair is to be judged (selection.compare_pairs = "none")."""
        run, s = self.run, self.run.settings
        if not any(compared.values()):
            return ComparisonTally()
        run.emit(Activity(f"{label}: blind comparison with {parent}"))
        with scoped(label):  # the comparison's calls are part of what the child cost
            return await compare_versions(
                run.client,
                evals=[self.evalset.by_id(e) for e in run.train],
                child_runs=self._dirs(label, compared),
                parent_runs=self._dirs(parent, compared),
                out_dir=run.ws.comparison_dir(label),
                rng_seed=s.loop.seed,
                second_order=self.selection.second_order,
            )

    def _decide(
        self,
        label: str,
        parent: str,
        measured: tuple[Results, Results],
        tally: ComparisonTally,
        runs: int,
        family: fdr.Night | None,
        claim: str,
    ) -> RuleDecision:
        """The step rule at this look, on the child's and the parent's runs so far."""
        run = self.run
        child, parent_res = measured
        errors, total = judge_errors(child, parent_res)
        lost = unscored_within(
            (child, parent_res),
            self.selection.max_unscored_rate,
            runs_of=f"runs of {label} and its parent {parent}",
            then=f"{label} stays undecided. Fix the cause, then `optimizer resume {run.ws.root}`.",
        )
        measured_now = Measured(
            eval_means(child), eval_means(parent_res), tally, errors, total, len(lost)
        )
        alpha = family.alpha if family else None
        asked = Asked(first_runs=self.step_runs, look=runs, scope=claim, alpha=alpha)
        return self.rule.decide(measured_now, asked, run.rng("bootstrap", label, runs))

    async def _analyze(
        self, label: str, parent: str, decision: str, tally: ComparisonTally
    ) -> None:
        run = self.run
        winner, loser = (label, parent) if decision == "won" else (parent, label)
        gathered = evidence.gather(run.ws, run.store, loser, run.train)
        found = gathered.failures
        with scoped(label):
            pair = Pairing(
                winner_skill=run.ws.skill(winner),
                loser_skill=run.ws.skill(loser),
                winner_label=winner,
                loser_label=loser,
                tally=tally,
                failed_expectations=[(f.eval_id, f.text, f.count) for f in found],
                transcripts=first_transcripts(run.ws, winner, loser, run.train[:3]),
                costs=gathered.costs,
                repeated_work=gathered.repeated_work,
            )
            await analyze(run.client, pair, run.ws.version(label) / "analysis.json")

    async def measure_test(self, label: str) -> dict[str, Any]:
        ws = self.run.ws
        res = await self.grader.grade(
            jobs_for(
                self.run.test,
                self.runs_per_eval,
                prefix=f"test/{label}/",
                root=ws.root,
                side=Side("with_skill", ws.skill(label), label),
                split="test",
            ),
            scope=f"sealed test {label}",
        )  # apart from what the version cost to evaluate
        per_eval = means(eval_means(res))
        return {
            "score": round(math.fsum(per_eval.values()) / len(per_eval), 4) if per_eval else None,
            "per_eval": {str(e): round(v, 4) for e, v in per_eval.items()},
        }

    def write_lineage(self, iteration: int) -> None:
        run = self.run
        lineage.write_files(
            run.ws,
            run.store,
            simulated=run.client.simulated,
            skill_name=run.skill_name,
            iteration=iteration,
            extra_notes=analyst_suggestions(run, self.evalset),
        )

    def _dirs(self, label: str, counts: dict[int, int]) -> dict[int, list[Path]]:
        ws = self.run.ws
        return {
            e: [ws.trial_dir(label, e, "with_skill", n) for n in range(1, counts[e] + 1)]
            for e in self.run.train
        }
