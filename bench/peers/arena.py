"""One world for one (skill, seed): a real run folder, its state.db and ledger, our executor and
grader, and our proposer, opened for any search to use as a user of the engine would. Every
method of bench/peers.py spends from its own arena; the sealed test is measured here the same way
for all of them (the world's own expected score, no model call), and never counted in what a
method spent."""

from __future__ import annotations

import asyncio
import hashlib
import io
import shutil
import tomllib
from collections.abc import Coroutine
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

from optimizer import config, daemon, logs
from optimizer.budget.stops import StopRules
from optimizer.cli.compose import use_the_simulator
from optimizer.errors import BudgetExhausted
from optimizer.execute import executor_for
from optimizer.grade.jobs import Side, jobs_for
from optimizer.grade.unit import eval_means
from optimizer.model import factory as llm
from optimizer.model import scoped
from optimizer.model.budget import Reserve
from optimizer.report.live import Reporter
from optimizer.search import evidence
from optimizer.search.body import BodyTarget
from optimizer.search.propose import Candidate, propose
from optimizer.search.state import RunState
from optimizer.sim import Simulator
from optimizer.sim.expected import pass_rate
from optimizer.store import runs
from optimizer.store.db import Store
from optimizer.store.files import Workspace

# Ledger scopes of measurement, not search: the engine's own sealed test and ours.
MEASURE_SCOPES = ("sealed test%", "measure%")
SEARCH_ONLY = " and ".join("coalesce(scope, '') not like ?" for _ in MEASURE_SCOPES)
UNLIMITED_USD = 1e9  # the arena's client never refuses; each search keeps to its own budget
# Runs per sealed eval of the world's expected score (optimizer/sim/expected.py): seeds 0..199,
# the same for every version, so two versions differ by what their texts do, not by draws.
EXPECTED_RUNS = 200
# Whether a version is worse than v0 when the two are within NEAR of each other at 200 runs:
# decided at SETTLE_RUNS, where an edit that changes no behaviour still moves the score by up to
# about 0.003 at 200 runs (a deleted line on csv-report seed 9017: -0.0033 at 200, +0.0009 at
# 4000), and by about 0.0007 at 4000.
NEAR = 0.01
SETTLE_RUNS = 4000
# The first run number of Arena.product's fresh runs: past any run a search or an adoption makes.
PRODUCT_FIRST = 5001


T = TypeVar("T")


class BudgetSpent(Exception):
    """A search asked for work after its budget was spent."""


@dataclass
class Usage:
    usd: float
    calls: int
    runs: int


def run_settings(skill_dir: Path, seed: int, overrides: list[str]) -> list[str]:
    """The settings every method shares for one (skill, seed): the simulator with this seed, the
    split and every rng with this seed, no no-skill baseline (no method needs it to decide)."""
    # A simulator with latent worlds (sim.world) draws a new world per seed too.
    world = [f"sim.world={seed}"] if "world" in config.Sim.model_fields else []
    return [
        f"loop.seed={seed}",
        f"sim.seed={seed}",
        *world,
        "llm.provider=sim",
        "evals.baseline_comparison=false",
        *overrides,
    ]


def start_run(skill_dir: Path, run_dir: Path, overrides: list[str], flags: dict) -> None:
    """`optimizer run` in this process, quietly; with loop.max_iterations = 0 it only creates the
    folder and grades v0 (the setup a peer's arena starts from)."""
    try:
        daemon.start(
            daemon.NewRun(skill_dir, run_dir=run_dir, fresh=True),
            lambda eval_config: config.load(
                None, eval_config=eval_config, env={}, overrides=overrides, flags=flags
            ),
            Console(file=io.StringIO()),
        )
    finally:
        logs.reset()


class Arena:
    """An opened run folder. Async methods run on the arena's event loop; `sync` lets a peer's
    synchronous search (GEPA's, SkillOpt's, in a worker thread) call them."""

    def __init__(self, run_dir: Path) -> None:
        self.ws = Workspace(run_dir)
        logs.configure(self.ws.log, console=False)  # the run's log, not the bench's table
        self.store = Store(self.ws.state_db)
        base = tomllib.loads(self.ws.run_toml.read_text(encoding="utf-8"))
        self.settings = config.load(base=base, env={}).settings
        use_the_simulator()  # the bench is its own composition root (optimizer/cli/compose.py)
        self.client = llm.make_client(self.settings, self.store, budget_usd=UNLIMITED_USD)
        self._stack = ExitStack()
        self.ui = self._stack.enter_context(
            Reporter(None, self.store, simulated=True, settings=self.settings)
        )
        # No stop rules: the bench holds each method to the budget itself.
        self.run = RunState(
            self.ws, self.store, self.client, self.settings, self.ui.on, StopRules(())
        )
        executor = self._stack.enter_context(executor_for(None, self.settings, self.client))
        self.target = BodyTarget(self.run, executor)
        self.train, self.test = list(self.run.train), list(self.run.test)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.budget_usd = UNLIMITED_USD
        self._mark = 0  # ledger rowid and trials rowid before the search began
        self._runs_mark = 0
        self._hits_mark = 0
        self._samples: dict[tuple[str, int], int] = {}
        self._client_at_mark = 0.0
        self.refused = False  # the per-call ceiling refused a call: the budget is spent
        self._proposals = 0
        self._expected: dict[tuple[str, int, tuple[int, ...]], float] = {}
        # A search whose current choice is observable says it here: (dollars spent, label) each
        # time it chooses (greedy after every child it judged).
        self.trace: list[tuple[float, str]] = []

    async def aclose(self) -> None:
        await self.client.aclose()
        self._stack.close()
        self.store.close()
        logs.reset()

    # -- what a search spent -------------------------------------------------------------------

    def begin(self, budget_usd: float, *, from_start: bool = False) -> None:
        """From here on (or from the run's start), what is spent is the search's, up to
        budget_usd."""
        self.budget_usd = budget_usd
        if from_start:
            return
        top = "select coalesce(max(rowid), 0) as m from "
        self._mark = self.store.query(top + "calls")[0]["m"]
        self._runs_mark = self.store.query(top + "trials")[0]["m"]
        self._hits_mark = self.store.query(top + "cache_hits")[0]["m"]
        # The same hard ceiling per call as ours (the client's guard): no call starts that would
        # take the search past its budget, so no method overspends it (issue 48).
        self.client.budget.allow(budget_usd)
        self._client_at_mark = self.client.budget.counted_usd

    def usage(self) -> Usage:
        row = self.store.query(
            f"select count(*) as n, coalesce(sum(cost_usd), 0) as usd from calls "
            f"where rowid > ? and {SEARCH_ONLY}",
            [self._mark, *MEASURE_SCOPES],
        )[0]
        # An answer the setup paid for (v0's train runs) and the ledger served to this search is
        # charged to it once, as if asked afresh the first time: a peer on its own would have
        # paid for it once and kept it, as ours keeps every answer in its ledger.
        served = (
            self.store.query(
                "select count(*) as n, coalesce(sum(usd), 0) as usd from ("
                "select max(h.saved_usd) as usd from cache_hits h join calls on calls.hash = h.hash "
                f"where h.rowid > ? and calls.rowid <= ? and {SEARCH_ONLY} group by h.hash)",
                [self._hits_mark, self._mark, *MEASURE_SCOPES],
            )[0]
            if self._mark
            else {"n": 0, "usd": 0.0}
        )
        runs = self.store.query(
            "select count(*) as n from trials where rowid > ? and split != 'test'",
            [self._runs_mark],
        )[0]["n"]
        return Usage(
            float(row["usd"]) + float(served["usd"]), int(row["n"]) + int(served["n"]), int(runs)
        )

    def usd_at_last_win(self) -> float:
        """For our engine's run (counted from its start): what it had spent when it decided its
        last winner, or its setup when nothing won. The gain per dollar of a run that stopped
        right there is the most any stop rule could give the same decisions."""
        won = self.store.query(
            "select version from decisions where decision = 'won' order by decided_at desc, "
            "rowid desc limit 1"
        )
        if won:
            # Its decision's last calls: its comparisons and its analysis carry its label. Its
            # runs do too, but it keeps running later as the next children's parent.
            end = self.store.query(
                "select coalesce(max(rowid), 0) as m from calls where scope = ? "
                "and role in ('comparator', 'analyzer')",
                [won[0]["version"]],
            )[0]["m"]
            cond, args = "rowid <= ?", [end]
        else:  # the calls before the first proposal: the baseline and v0
            first = self.store.query(
                "select min(rowid) as m from calls where scope like 'proposal %'"
            )[0]["m"]
            cond, args = ("rowid < ?", [first]) if first is not None else ("1", [])
        return float(
            self.store.query(
                f"select coalesce(sum(cost_usd), 0) as usd from calls where {cond} and {SEARCH_ONLY}",
                [*args, *MEASURE_SCOPES],
            )[0]["usd"]
        )

    def chose(self, label: str) -> None:
        """A search's current choice, with what it has spent so far (the anytime curve)."""
        self.trace.append((self.usage().usd, label))

    def spent(self) -> bool:
        return self.refused or self.usage().usd >= self.budget_usd

    def check(self) -> None:
        used = self.usage().usd
        if self.refused or used >= self.budget_usd:
            raise BudgetSpent(f"spent ${used:.2f} of ${self.budget_usd:.2f}")
        # What the search is charged beyond the client's own calls (setup answers served to it)
        # lowers the client's ceiling by as much.
        budget = self.client.budget
        budget.keep(Reserve(max(0.0, used - (budget.counted_usd - self._client_at_mark))))

    # -- versions as texts ---------------------------------------------------------------------

    def skill_md(self, label: str) -> str:
        return (self.ws.skill(label) / "SKILL.md").read_text(encoding="utf-8")

    def add(self, skill_md: str) -> str:
        """A candidate SKILL.md (the other files are v0's) as a label of its own, by content."""
        label = "c-" + hashlib.sha256(skill_md.encode()).hexdigest()[:10]
        folder = self.ws.skill(label)
        if not folder.is_dir():
            shutil.copytree(self.ws.skill("v0"), folder)
            (folder / "SKILL.md").write_text(skill_md, encoding="utf-8")
        return label

    # -- the engine's public pieces --------------------------------------------------------------

    async def evaluate(self, label: str, evals: list[int]) -> dict[int, float]:
        """One new rollout of `label` on each eval (executor + structural checks + judge), as a
        peer's metric call is: asked again, the same eval is run again, and paid again."""
        self.check()
        counts = {}
        for e in evals:
            self._samples[(label, e)] = self._samples.get((label, e), 0) + 1
            counts[e] = self._samples[(label, e)]
        results = await self._ceiled(self.target.version(label, sorted(set(evals)), counts))
        out = {}
        for e in evals:
            latest = next((s for s in results.get(e, []) if s.run_number == counts[e]), None)
            scored = [s.score for s in results.get(e, []) if s.score is not None]
            # A peer needs a number for every example: an unscored newest run (none in the
            # fault-free simulator) stands as the mean of the eval's scored runs, never as 0.
            if latest is not None and latest.score is not None:
                out[e] = latest.score
            else:
                out[e] = sum(scored) / len(scored) if scored else 0.0
        return out

    async def evaluate_mean(self, label: str, evals: list[int], runs: int) -> float:
        """Mean over evals of runs 1..runs (shared with any earlier rollout of the label)."""
        self.check()
        for e in evals:
            self._samples[(label, e)] = max(self._samples.get((label, e), 0), runs)
        return mean_over_evals(await self._ceiled(self.target.version(label, evals, runs))) or 0.0

    async def propose(self, parent: str, evals: list[int]) -> str | None:
        """Our proposer, shown the failures of the parent's runs on `evals` (train only): the new
        SKILL.md's label, or None when the proposal was rejected."""
        self.check()
        self._proposals += 1
        scratch = self.ws.root / ".proposals" / f"peer-{self._proposals}"
        feedback = evidence.gather(self.ws, self.store, parent, sorted(set(evals)))
        try:
            with scoped(f"proposal peer-{self._proposals}"):
                made = await self._ceiled(
                    propose(
                        self.client,
                        parent=self.ws.skill(parent),
                        feedback=feedback,
                        target="body",
                        dest=scratch,
                        sample=self._proposals,
                    )
                )
            if not isinstance(made, Candidate):
                return None
            return self.add((made.folder / "SKILL.md").read_text(encoding="utf-8"))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    async def _ceiled(self, work: Coroutine[Any, Any, T]) -> T:
        """The work, with the per-call ceiling's refusal as the search's budget spent: from then
        on `spent()` says so, though the spend stopped short of the budget."""
        try:
            return await work
        except BudgetExhausted as exc:
            self.refused = True
            raise BudgetSpent(str(exc)) from exc

    def measure(self, label: str, runs: int = EXPECTED_RUNS) -> float | None:
        """The sealed test score of `label`: the world's own expected judged pass rate of the
        version's SKILL.md (optimizer/sim/expected.py, `runs` runs of each sealed eval, each
        eval's input files read from the run's inputs/ as the executor reads them), averaged over
        the sealed evals as the world's ceiling is. No model call and no ledger row: the same
        number for the same text in every method, so a version worse than v0 is worse in the
        world, not in a draw of runs."""
        if not self.test:
            return None
        return self.expected(label, self.test, runs)

    def expected(self, label: str, evals: list[int], runs: int = EXPECTED_RUNS) -> float:
        """The world's expected judged pass rate of `label` over `evals` (`measure`'s number on
        any split): no model call, no ledger row. Only the oracle reads it on train."""
        key = (label, runs, tuple(evals))
        if key not in self._expected:
            world = Simulator.from_settings(self.settings.sim).knobs.world
            folder = self.ws.root / "inputs"  # the skill folder's copy that runs read inputs from
            text = (self.ws.skill(label) / "SKILL.md").read_text(encoding="utf-8")
            per_eval = []
            for e in evals:
                ev = self.target.evalset.by_id(e)
                shown = {
                    "prompt": ev.prompt,
                    "expectations": list(ev.expectations),
                    "files": list(ev.files),
                }
                per_eval.append(pass_rate(text, [shown], world, runs, folder))
            self._expected[key] = sum(per_eval) / len(per_eval)
        return self._expected[key]

    async def product(self, label: str, runs: int, evals: list[int] | None = None) -> float | None:
        """The sealed test score of `label` as the product scores a run (structural checks with
        their gate, judged expectations and the rubric, docs/design.md §7): `runs` fresh runs of
        each sealed eval (run numbers from PRODUCT_FIRST, which no search uses), in the ledger
        under a measurement scope, so no method pays for it. The mean over the sealed evals of
        each eval's mean; None without sealed evals. Texts measured in one arena by content
        (Arena.add) share their runs: the same text gets the same number. `evals`: other evals
        than the sealed ones (the product oracle reads train)."""
        evals = self.test if evals is None else evals
        if not evals:
            return None
        # What the measurement costs moves the search's ceiling (paid_apart) and mark by as
        # much: a search that measures on the way (the product oracle) keeps its whole budget.
        with self.client.budget.paid_apart() as cost:
            jobs = jobs_for(
                evals,
                runs,
                prefix=f"measure/{label}/",
                root=self.ws.root,
                side=Side("with_skill", self.ws.skill(label), label),
                split="test",
                first=PRODUCT_FIRST,
            )
            try:
                with scoped(f"measure {label}"):
                    results = await self.target.grader.grade(jobs, scope=f"measure {label}")
            finally:
                self._client_at_mark += self.client.budget.counted_usd - cost.before_usd
        return mean_over_evals(results)

    def worse_than_v0(self, label: str) -> bool | None:
        """Whether `label` is worse than v0 in the world: by their expected scores at 200 runs an
        eval, or, when those are within NEAR of each other, at SETTLE_RUNS; never for v0's own
        text. None without sealed evals."""
        mine, base = self.measure(label), self.measure("v0")
        if mine is None or base is None:
            return None
        if self.skill_md(label) == self.skill_md("v0"):
            return False
        if abs(mine - base) >= NEAR:
            return mine < base
        return (self.measure(label, SETTLE_RUNS) or 0.0) < (self.measure("v0", SETTLE_RUNS) or 0.0)

    def sync(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run one of the coroutines above from a peer's worker thread."""
        assert self.loop is not None, "call the peer through Arena.in_thread"
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def in_thread(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A synchronous search in a worker thread, its calls served by this loop."""
        self.loop = asyncio.get_running_loop()
        return await asyncio.to_thread(fn, *args, **kwargs)


def mean_over_evals(results: dict[int, list[Any]]) -> float | None:
    """The mean over evals of each eval's mean scored run (judge errors and unscored runs left
    out); None when no eval has one."""
    per_eval = [sum(v) / len(v) for v in eval_means(results).values() if v]
    return sum(per_eval) / len(per_eval) if per_eval else None


def best_over_spend(store: Store) -> list[tuple[float, str]]:
    """Our engine's current best after each of its decisions, with what the run had spent when it
    decided (from the ledger: the calls before the next proposal, the decision's comparisons and
    analysis included), replaying state.record_decision's promotion. The last entry is the run's
    recorded best at its whole spend."""
    calls = store.query(
        f"select coalesce(scope, '') as scope, cost_usd from calls where {SEARCH_ONLY} "
        "order by rowid",
        list(MEASURE_SCOPES),
    )
    scores = {
        r["label"]: r["score"] or 0.0 for r in store.query("select label, score from versions")
    }
    best, out = "v0", []
    row = runs.row(store) or runs.Run()
    for d in store.query("select version, parent, decision from decisions order by rowid"):
        label = d["version"]
        start = next((i for i, c in enumerate(calls) if c["scope"] == label), None)
        if start is None:
            continue
        end = next(
            (j for j in range(start, len(calls)) if calls[j]["scope"].startswith("proposal ")),
            len(calls),
        )
        if d["decision"] == "won" and (
            d["parent"] == best or scores.get(label, 0.0) > scores.get(best, 0.0)
        ):
            best = label
        out.append((sum(float(c["cost_usd"] or 0.0) for c in calls[:end]), best))
    total = sum(float(c["cost_usd"] or 0.0) for c in calls)
    out.append((total, row.best))
    return out
