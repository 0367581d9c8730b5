"""The description target (`--target description`): only the front matter's description is
varied; a candidate is probed on the train and validation trigger queries and decided on
validation. Never shows the proposer a validation or test query."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from optimizer.decide import fdr, keep
from optimizer.errors import WorkFailed
from optimizer.events import Activity, TrialGraded
from optimizer.execute import executor_for
from optimizer.inputs import skillmd
from optimizer.inputs.triggers import Query
from optimizer.model import scoped
from optimizer.schemas import TriggerFile
from optimizer.search import evidence, lineage, probe
from optimizer.search.proposal import Candidate, Feedback, Rejected
from optimizer.search.propose import propose
from optimizer.search.state import RunState, mark_baseline
from optimizer.search.target import TargetDecision
from optimizer.store import decisions, versions
from optimizer.store.files import write_json

log = structlog.get_logger()
_EPS = 1e-12


@contextmanager
def open_target(run: RunState) -> Iterator[DescriptionTarget]:
    method = probe.method_for(run.settings)
    if method != "claude-code":
        yield DescriptionTarget(run, method)
        return
    # One turn is enough: the CLI either calls Skill first or answers without it.
    s = run.settings
    settings = s.model_copy(update={"execute": s.execute.model_copy(update={"max_turns": 1})})
    with executor_for("claude-code", settings, run.client) as cli:
        cli.check()
        yield DescriptionTarget(run, method, cli)


class DescriptionTarget:
    name = "description"
    phase = "probe"  # versions.phase of a version whose train and validation probes are committed

    def __init__(self, run: RunState, method: str = "api", cli: Any = None) -> None:
        self.run = run
        self.method, self.cli = method, cli  # the Claude Code executor when method is claude-code
        self.slots = asyncio.Semaphore(run.settings.execute.concurrency)
        self.queries = {q["id"]: Query(**q) for q in run.split["queries"]}
        # A fleet night's siblings, listed in every probe (inputs/triggers.with_siblings).
        self.rivals = [(str(n), str(d)) for n, d in run.split.get("rivals", [])]
        self.validation: list[int] = run.split["validation"]
        self.runs = run.settings.evals.runs_per_eval

    def metrics(self, label: str, ids: list[int]) -> probe.ProbeMetrics:
        s = self.run.settings.selection
        return probe.metrics(
            probe.recorded(self.run.store, label),
            self.queries,
            ids,
            samples=s.bootstrap_samples,
            confidence=s.confidence,
        )

    def rates(self, label: str, ids: list[int]) -> dict[str, float]:
        """{query id: the share of its probes that fired} on the queries `ids`."""
        return {q: float(row["rate"]) for q, row in self.metrics(label, ids)["per_query"].items()}

    async def probe(self, label: str, split: str) -> None:
        """Every (query, run) of one split for one version that has no answer yet; each answer is
        committed as it comes. Failed probes are kept as errors and asked again on the next call."""
        run = self.run
        ids = {"train": run.train, "validation": self.validation, "test": run.test}[split]
        done = probe.recorded(run.store, label)
        todo = [
            (q, n) for q in ids for n in range(1, self.runs + 1) if done.get(q, {}).get(n) is None
        ]
        if not todo:
            return
        run.emit(Activity(f"{label}: trigger probe, {split} ({len(todo)} requests)"))
        text = (run.ws.skill(label) / "SKILL.md").read_text(encoding="utf-8")
        description = skillmd.parse_skill_md(text).description

        async def one(qid: int, n: int) -> None:
            if self.cli is not None:
                async with self.slots:  # one CLI process per probe: bounded like agent runs
                    result = await probe.probe_cli(
                        self.cli,
                        run.ws.skill(label),
                        run.skill_name,
                        self.queries[qid],
                        n,
                        run.ws.root / ".probes" / label,
                    )
            else:
                result = await probe.probe_one(
                    run.client,
                    run.skill_name,
                    description,
                    self.queries[qid],
                    n,
                    seed=run.settings.loop.seed,
                    rivals=self.rivals,
                )
            if result.error:
                log.warning(
                    "trigger.probe_failed", version=label, query=qid, run=n, error=result.error
                )
            probe.record(run.store, label, split, result)
            run.emit(TrialGraded())

        with scoped(label):  # each task takes a copy of the context when it is created
            tasks = [asyncio.ensure_future(one(q, n)) for q, n in todo]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # A budget stop must not leave probes writing rows behind the steps that follow it.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    def _record(self, label: str) -> None:
        """versions.score and pass_rate are the accuracy over train and validation together (so
        the target stop needs every query right, not only the few validation ones);
        split_scores_json holds the pass of each of those queries, for parent selection and
        `optimizer diff`."""
        run = self.run
        dev = self.metrics(label, run.train + self.validation)
        per_query = {q: float(v["passed"]) for q, v in dev["per_query"].items()}
        versions.record_scores(
            run.store, label, score=dev["pass_rate"], pass_rate=dev["pass_rate"], per_eval=per_query
        )
        write_json(
            run.ws.version(label) / "trigger.json",
            {
                "version": label,
                "probe": self.method,
                "train": self.metrics(label, run.train),
                "validation": self.metrics(label, self.validation),
            },
            TriggerFile,
        )

    async def start(self) -> str | None:
        """v0 on train and validation, and whether a search may start from it. A constant signal
        (v0 triggers on none, or on all, of those queries in every run) stops the run before any
        proposal, with the stop reason saying so: from there the probe cannot tell descriptions
        apart, which usually means a broken probe or trigger evals rather than a description to
        improve. The same check runs on every resume, so a resumed run stops the same way."""
        run = self.run
        dev_ids = run.train + self.validation
        if versions.decision(run.store, "v0") is None:
            await self.probe("v0", "train")
            await self.probe("v0", "validation")
            dev = self.metrics("v0", dev_ids)
            if dev["queries"] == 0:  # v0 stays undecided, so a resume asks these probes again
                raise WorkFailed(
                    f"Every trigger probe of v0 failed ({dev['probe_errors']} requests; see "
                    f"{run.ws.log}); check the provider and models.trigger, then `optimizer "
                    f"resume {run.ws.root}`."
                )
            self._record("v0")
            mark_baseline(run, self.phase)
            self.write_lineage(0)
        dev = self.metrics("v0", dev_ids)
        if dev["constant_signal"]:
            which = "none" if dev["constant_signal"] == "never" else "every one"
            log.warning("trigger.constant_signal", version="v0", kind=dev["constant_signal"])
            return (
                f"constant signal: v0's description triggered on {which} of the "
                f"{dev['queries']} train and validation queries in every run, so descriptions "
                "cannot be told apart; check the probe model and the trigger evals before "
                "optimizing"
            )
        if not self.validation:
            return (
                "no validation queries (a class needs at least 2 trigger queries to give one), "
                "so no child could ever be selected; add trigger queries"
            )
        return None

    def feedback(self, parent: str) -> Feedback:
        """What the proposer may know: the parent's misses on TRAIN queries only, its train
        scores, and the attempts that lost. Validation and test queries never enter it."""
        run = self.run
        found = evidence.gather(run.ws, run.store, parent, [])
        train = self.metrics(parent, run.train)
        found.missed_queries = [
            (self.queries[int(q)].query, v["should_trigger"])
            for q, v in train["per_query"].items()
            if not v["passed"]
        ]
        found.judge_feedback = [
            f"trigger probe on {train['queries']} training queries: accuracy {train['pass_rate']}, "
            f"precision {train['precision']}, recall {train['recall']}; each missed query is listed "
            "in missed_queries (should_trigger=true: the skill was not chosen; false: it was chosen "
            "but should not have been)."
        ]
        return found

    async def propose(self, parent: str, dest: Path, sample: int) -> Candidate | Rejected:
        return await propose(
            self.run.client,
            parent=self.run.ws.skill(parent),
            feedback=self.feedback(parent),
            target=self.name,
            dest=dest,
            sample=sample,
        )

    async def judge(self, label: str, parent: str) -> TargetDecision | None:
        run = self.run
        await self.probe(label, "train")
        await self.probe(label, "validation")
        both = run.train + self.validation
        family = fdr.for_decision(decisions.rule_rows(run.store), run.settings.selection, label)
        chosen: dict[str, Any] = dict(
            keep.queries(
                self.metrics(label, self.validation),
                self.metrics(parent, self.validation),
                self.metrics(label, both)["pass_rate"],
                self.metrics(parent, both)["pass_rate"],
                selection=run.settings.selection,
                rng=run.rng("bootstrap", label),
                alpha=family.alpha if family else None,
            )
        )
        if family:
            chosen["night"] = family.as_json()
        taken = took_from_siblings(self.rates(label, both), self.rates(parent, both), self.queries)
        if taken and chosen["decision"] == "won":
            chosen.update(decision="lost", reason=taken)
        return TargetDecision(self.phase, chosen, (label,))

    async def learn(self, label: str, parent: str, verdict: TargetDecision) -> bool:
        """Nothing to analyze: the next proposal reads the missed queries (feedback)."""
        return True

    def record(self, label: str, phase: str) -> None:
        self._record(label)

    async def measure_test(self, label: str) -> dict[str, Any]:
        await self.probe(label, "test")
        m = self.metrics(label, self.run.test)
        return {"score": m["pass_rate"], **m}

    def write_lineage(self, iteration: int) -> None:
        run = self.run
        lineage.write_files(
            run.ws,
            run.store,
            simulated=run.client.simulated,
            skill_name=run.skill_name,
            iteration=iteration,
        )


def took_from_siblings(
    child: Mapping[str, float], parent: Mapping[str, float], queries: Mapping[int, Query]
) -> str | None:
    """The refusal of a child description that takes a fleet sibling's requests: on some sibling's
    should-trigger queries (this skill's should-not queries with that owner) it fires where the
    parent did not, on train and validation; None when it takes none."""
    taken: dict[str, list[int]] = {}
    owned: dict[str, int] = {}
    before: dict[str, int] = {}
    for qid, q in sorted(queries.items()):
        if not q.owner:
            continue
        owned[q.owner] = owned.get(q.owner, 0) + 1
        mine, theirs = child.get(str(qid)), parent.get(str(qid))
        if mine is None or theirs is None:
            continue
        fires, fired = mine >= probe.PASS_THRESHOLD, theirs >= probe.PASS_THRESHOLD
        before[q.owner] = before.get(q.owner, 0) + fired
        if fires and not fired:
            taken.setdefault(q.owner, []).append(qid)
    if not taken:
        return None
    said = "; ".join(
        f"{owner}'s: it fires on {len(ids)} more of the {owned[owner]} (the parent on "
        f"{before.get(owner, 0)})"
        for owner, ids in sorted(taken.items())
    )
    return (
        f"refused: the description takes requests that should trigger a sibling skill ({said}); "
        "a sibling's requests are this skill's should-not queries."
    )
