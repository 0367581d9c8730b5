"""Cost preview: model calls, tokens and money per iteration and for a whole run, from the eval set,
the settings and the price table, with and without batch mode; and, after a run, the estimate
against what the ledger says was spent. Never calls a model and never writes (but `record`).

The model of one run (every number an assumption, listed under "assumptions" in the estimate):
- setup: the without_skill baseline (when evals.baseline_comparison) and v0, each train eval ×
  runs_per_eval runs; the sealed test: v0 and the final best on the test evals, same runs.
- per iteration, for each of loop.proposals_per_iteration candidates (an iteration that ends at
  its first winner, loop.judge_proposals, asks fewer: the estimate leans high): one proposer
  call; the screening minibatch (loop.screen_evals runs, when 0 < screen_evals < train evals); the child's
  train evals × runs_per_eval runs; two comparator calls (both orders) per run pair compared
  (step.compared_runs: the first pair of each eval under the sequential rule; the second order
  is skipped after a first-order tie, selection.second_order: the estimate leans high); one
  analyzer call. "Typical" assumes every candidate passes screening and no runs are added;
  "at most" adds runs for child and parent up to selection.max_runs_per_eval, with their
  comparisons.
- a run is an agent loop of a typical number of turns (fewer on the simulator, which answers in
  two or three), each turn re-sending the conversation so far; its grader call carries the
  transcript and outputs; runs whose structural gate fails would skip the grader (not modelled:
  the estimate leans high).
- tokens are characters / 4 (the simulator counts the same way); with llm.prompt_caching the
  system prompt and tool definitions of each call are priced as cache reads.
- batch mode prices the grader, comparator and analyzer calls at 50% (optimizer/batch.py); the
  executor and proposer calls are never batched.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from optimizer.config import Settings
from optimizer.decide import step
from optimizer.inputs.evals import Eval, EvalSet, split
from optimizer.model.cost import BATCH_PRICE_FACTOR, BATCH_ROLES, unpriced
from optimizer.store import readonly
from optimizer.store.files import Workspace

log = structlog.get_logger()

VERSION = 1
CHARS_PER_TOKEN = 4
# The sealed test's share kept from the search: its estimate and a quarter more, since the final
# best may be a longer skill than the one the estimate read (docs/design.md §9).
RESERVE_MARGIN = 1.25

# What a run looks like, per provider (characters). The simulator's numbers are measured on the
# csv-report example; the Messages API's are those of a typical agent on a small task.
PROFILES: dict[str, dict[str, float]] = {
    "sim": {"turns_with_skill": 3, "turns_without_skill": 2, "turn_growth": 900,
            "turn_output": 650, "output_files": 1200, "grader_output": 700,
            "grader_per_item": 120, "comparator_output": 1500, "analyzer_output": 2000,
            "proposer_output": 500, "feedback": 1500},
    "anthropic": {"turns_with_skill": 8, "turns_without_skill": 6, "turn_growth": 2500,
                  "turn_output": 1200, "output_files": 4000, "grader_output": 800,
                  "grader_per_item": 300, "comparator_output": 1600, "analyzer_output": 4000,
                  "proposer_output": 3000, "feedback": 4000},
}


class _Sums(dict[str, float]):
    """Fractional sums per role; a missing role reads 0, as in a Counter (typed for ints only)."""

    def __missing__(self, key: str) -> float:
        return 0


@dataclass
class Tally:
    """Calls, tokens and USD per role for one part of a run."""

    calls: _Sums = field(default_factory=_Sums)
    tokens: _Sums = field(default_factory=_Sums)
    usd: _Sums = field(default_factory=_Sums)

    def add(self, other: Tally, times: float = 1.0) -> Tally:
        for role in set(other.calls) | set(other.usd):
            self.calls[role] += other.calls[role] * times
            self.tokens[role] += other.tokens[role] * times
            self.usd[role] += other.usd[role] * times
        return self

    def summary(self) -> dict[str, Any]:
        standard = sum(self.usd.values())
        batched = sum(v * (BATCH_PRICE_FACTOR if r in BATCH_ROLES else 1.0) for r, v in self.usd.items())
        return {
            "calls": int(round(sum(self.calls.values()))),
            "tokens": int(round(sum(self.tokens.values()))),
            "usd": round(standard, 4),
            "usd_batch": round(batched, 4),
            "by_role": {r: {"calls": int(round(self.calls[r])), "tokens": int(round(self.tokens[r])),
                            "usd": round(self.usd[r], 4)} for r in sorted(self.calls) if self.calls[r]},
        }


class _Model:
    """Prices one call of a role from its request and answer sizes."""

    def __init__(self, settings: Settings, skill_dir: Path | None, evalset: EvalSet) -> None:
        self.settings = settings
        self.profile = PROFILES["sim" if settings.llm.provider == "sim" else "anthropic"]
        self.prefix = _prefixes(settings, skill_dir, evalset)
        self.skill_chars, self.skill_body = _skill_sizes(skill_dir)

    def call(self, role: str, body_chars: float, output_chars: float, times: float = 1.0) -> Tally:
        price = self.settings.price(getattr(self.settings.models, role))
        prefix = self.prefix.get(role, 0) / CHARS_PER_TOKEN
        body = body_chars / CHARS_PER_TOKEN
        out = output_chars / CHARS_PER_TOKEN
        cached = self.settings.llm.prompt_caching
        usd = ((prefix * (price.cache_read if cached else price.input)) + body * price.input
               + out * price.output) / 1_000_000
        tally = Tally()
        tally.calls[role] += times
        tally.tokens[role] += (prefix + body + out) * times
        tally.usd[role] += usd * times
        return tally

    def run(self, ev: Eval, with_skill: bool) -> Tally:
        """One execution of one eval and its grading."""
        p = self.profile
        turns = int(min(self.settings.execute.max_turns,
                        p["turns_with_skill"] if with_skill else p["turns_without_skill"]))
        tally = Tally()
        for k in range(turns):
            body = len(ev.prompt) + k * p["turn_growth"] + (self.skill_body if with_skill and k else 0)
            tally.add(self.call("executor", body, p["turn_output"]))
        if ev.expectations or ev.rubric:
            transcript = min(60_000, turns * (p["turn_growth"] + p["turn_output"]))
            body = _eval_chars(ev) + min(120_000, p["output_files"]) + transcript + 400
            answer = p["grader_output"] + p["grader_per_item"] * (len(ev.expectations) + len(ev.rubric))
            tally.add(self.call("grader", body, answer))
        return tally

    def comparison(self, ev: Eval) -> Tally:
        p = self.profile
        body = _eval_chars(ev) + 2 * min(100_000, p["output_files"]) + 200
        return self.call("comparator", body, p["comparator_output"])

    def analysis(self, pairs: int, turns: int) -> Tally:
        p = self.profile
        transcripts = min(24_000, 6 * min(3_000, turns * (p["turn_growth"] + p["turn_output"])))
        body = 2 * min(40_000, self.skill_chars) + min(pairs, 12) * 400 + 1_500 + transcripts
        return self.call("analyzer", body, p["analyzer_output"])

    def proposal(self) -> Tally:
        p = self.profile
        return self.call("proposer", self.skill_chars + p["feedback"], p["proposer_output"])


def estimate(settings: Settings, evalset: EvalSet, skill_dir: Path | None = None, *,
             train: list[int] | None = None, test: list[int] | None = None) -> dict[str, Any]:
    """The estimate as a JSON-ready dict (stored in state.db when a run starts)."""
    if train is None or test is None:
        parts = split(evalset, test_fraction=settings.evals.test_fraction, seed=settings.loop.seed)
        train, test = parts.train, parts.test
    by_id = {e.id: e for e in evalset.evals}
    train_evals = [by_id[i] for i in train if i in by_id]
    test_evals = [by_id[i] for i in test if i in by_id]
    m = _Model(settings, skill_dir, evalset)
    s = settings
    sel = step.for_steps(s.selection)  # what a step is decided under (selection.step)
    runs = s.evals.runs_per_eval
    step_runs = sel.first_runs or runs  # a child's first look
    max_runs = max(step_runs, sel.max_runs_per_eval)
    proposals = s.loop.proposals_per_iteration

    setup = Tally()
    for ev in train_evals:
        if s.evals.baseline_comparison:
            setup.add(m.run(ev, False), runs)
        setup.add(m.run(ev, True), runs)

    one = Tally().add(m.proposal())  # one candidate, typical
    screen = s.loop.screen_evals if 0 < s.loop.screen_evals < len(train_evals) else 0
    for ev in sorted(train_evals, key=lambda e: e.id)[:screen]:
        one.add(m.run(ev, True))
    pairs = step.compared_runs(sel, step_runs)
    for ev in train_evals:
        one.add(m.run(ev, True), step_runs)
        one.add(m.comparison(ev), 2 * pairs)
    turns = int(m.profile["turns_with_skill"])
    one.add(m.analysis(len(train_evals) * step_runs, turns))
    extra = Tally()  # one more run per eval for child and parent, and its comparisons if compared
    more_pairs = step.compared_runs(sel, max_runs) > pairs
    for ev in train_evals:
        extra.add(m.run(ev, True), 2)
        extra.add(m.comparison(ev), 2 * more_pairs)
    iteration = Tally().add(one, proposals)
    most = Tally().add(iteration).add(extra, proposals * (max_runs - step_runs))

    sealed = Tally()
    for ev in test_evals:
        sealed.add(m.run(ev, True), 2 * runs)

    iterations = s.loop.max_iterations
    whole = Tally().add(setup).add(iteration, iterations).add(sealed)
    whole_most = Tally().add(setup).add(most, iterations).add(sealed)
    est: dict[str, Any] = {
        "version": VERSION,
        "provider": s.llm.provider,
        "batch": s.llm.batch,
        "iterations": iterations,
        "budget_usd": s.budget.usd,
        "train_evals": len(train_evals),
        "test_evals": len(test_evals),
        "setup": setup.summary(),
        "per_iteration": iteration.summary(),
        "per_iteration_max": most.summary(),
        "sealed_test": sealed.summary(),
        "run": whole.summary(),
        "run_max": whole_most.summary(),
        "assumptions": {
            **{k: v for k, v in m.profile.items()},
            "chars_per_token": CHARS_PER_TOKEN,
            "prompt_caching": s.llm.prompt_caching,
            "batch_price_factor": BATCH_PRICE_FACTOR,
            "screening_passes": True,
            "runs_added": f"none (typical); up to {max_runs} per eval (at most)",
        },
    }
    est["reserve_usd"] = round(mode_usd(est["sealed_test"], s.llm.batch) * RESERVE_MARGIN, 4)
    est["iterations_in_budget"] = _iterations_in_budget(est)
    # Models priced as another (the dearest listed), so the preview and status can say so.
    roles = ("executor", "grader", "comparator", "analyzer", "proposer")
    models = sorted({getattr(s.models, role) for role in roles})
    est["unpriced"] = {m: f for m in models if (f := unpriced(s, m)) is not None}
    return est


def mode_usd(part: dict[str, Any], batch: bool) -> float:
    return part["usd_batch"] if batch else part["usd"]


def per_iteration_usd(est: dict[str, Any]) -> float | None:
    """The preview's cost of one iteration in the run's mode, None for a run without one."""
    return mode_usd(est["per_iteration"], bool(est.get("batch"))) if "per_iteration" in est else None


def _iterations_in_budget(est: dict[str, Any]) -> int | None:
    budget, batch = est["budget_usd"], est["batch"]
    per = mode_usd(est["per_iteration"], batch)
    if not budget or per <= 0:
        return None
    left = budget - mode_usd(est["setup"], batch) - est.get("reserve_usd", 0.0)
    return max(0, int(math.floor(left / per + 1e-9)))


def reserve(est: dict[str, Any] | None, *, per_run_usd: float | None, runs: int) -> float:
    """What the search leaves for the sealed test of `runs` runs: the estimate's reserve, or more
    once the runs measured so far (per_run_usd) say they cost more than it assumed."""
    planned = 0.0
    if est and "sealed_test" in est:
        planned = est.get("reserve_usd", mode_usd(est["sealed_test"], bool(est.get("batch"))) * RESERVE_MARGIN)
    return max(planned, (per_run_usd or 0.0) * runs * RESERVE_MARGIN)


def for_start(settings: Settings, evalset: Any, skill_dir: Path, target: str = "body") -> dict[str, Any] | None:
    """The estimate of a run about to start from skill_dir; None for a description run (its
    trigger probes are not modelled) or when the preview itself fails (it never stops a run)."""
    if target != "body" or not isinstance(evalset, EvalSet):
        return None
    try:
        return estimate(settings, evalset, skill_dir)
    except Exception as exc:  # noqa: BLE001 - a preview must never stop an overnight run
        log.warning("preview.failed", error=str(exc))
        return None


def for_workspace(ws: Workspace, settings: Settings) -> dict[str, Any] | None:
    """The estimate of a resumed run, from its own inputs, split and current best: what remains
    plus what the ledger says was already spent (see `resumed`)."""
    from optimizer.inputs.evals import load_evals

    try:
        row = readonly.run_row(ws.state_db) or {}
        if (row.get("target") or "body") != "body":
            return None
        evalset = load_evals(ws.root / "inputs")
        parts = json.loads(row.get("split_json") or "{}")
        best = row.get("current_best") or "v0"
        whole = estimate(settings, evalset, ws.skill(best), train=parts.get("train"),
                         test=parts.get("test"))
        conn = readonly.connect(ws.state_db)
        try:
            spent = conn.execute("select coalesce(sum(cost_usd), 0) from calls").fetchone()[0]
            done, begun = conn.execute("select count(finished_at), count(*) from iterations").fetchone()
        finally:
            conn.close()
        return resumed(whole, spent_usd=float(spent), iterations_done=done, setup_done=begun > 0)
    except Exception as exc:  # noqa: BLE001 - a preview never stops a resume
        log.warning("preview.failed", error=str(exc))
        return None


def resumed(est: dict[str, Any], *, spent_usd: float, iterations_done: int,
            setup_done: bool) -> dict[str, Any]:
    """A whole-run estimate turned into one of a resumed run: the iterations left, the sealed test
    and, when no iteration began yet, the unspent part of the setup; plus the money already spent.
    The ledger answers every call already paid for again for free, so nothing is counted twice."""
    left = max(0, est["iterations"] - iterations_done)

    def setup_left(mode: str) -> float:
        return 0.0 if setup_done else max(0.0, est["setup"][mode] - spent_usd)

    def ahead(per: dict[str, Any], spent: float) -> dict[str, Any]:
        part = {k: per[k] * left + est["sealed_test"][k] for k in ("calls", "tokens")}
        return part | {k: round(per[k] * left + est["sealed_test"][k] + setup_left(k) + spent, 4)
                       for k in ("usd", "usd_batch")}

    out = {**est, "iterations": left,
           "resume": {"iterations_done": iterations_done, "spent_usd": round(spent_usd, 4),
                      "remaining": ahead(est["per_iteration"], 0.0)},
           # What is paid before the next iteration: the budget note's floor.
           "setup": {**est["setup"], **{k: round(spent_usd + setup_left(k), 4)
                                        for k in ("usd", "usd_batch")}},
           "run": ahead(est["per_iteration"], spent_usd),
           "run_max": ahead(est["per_iteration_max"], spent_usd)}
    out["iterations_in_budget"] = _iterations_in_budget(out)
    return out


def record(ws: Workspace, est: dict[str, Any]) -> None:
    """Keep the estimate shown at the start in state.db (runs.estimate_json)."""
    from optimizer.store.db import Store

    store = Store(ws.state_db)
    try:
        with store.atomic():
            store.table("runs").update(ws.root.name, {"estimate_json": json.dumps(est)})
    finally:
        store.close()


# -- sizes ---------------------------------------------------------------------------------------


def _eval_chars(ev: Eval) -> int:
    rubric = sum(len(d.name) + len(d.description) + sum(len(v) for v in d.scoring.values()) + 60
                 for d in ev.rubric)
    return len(ev.prompt) + len(ev.expected_output) + sum(len(t) + 40 for t in ev.expectations) + rubric + 200


def _skill_sizes(skill_dir: Path | None) -> tuple[int, int]:
    if skill_dir is None or not Path(skill_dir).is_dir():
        return 4_000, 3_000
    from optimizer.inputs.skill import files_of
    from optimizer.inputs.skillmd import parse_skill_md

    files = files_of(Path(skill_dir), include_evals=False)
    total = sum(len(c) for c in files.values())
    body = 0
    text = files.get("SKILL.md")
    if isinstance(text, str):
        try:
            body = len(parse_skill_md(text).body)
        except Exception:
            body = len(text)
    return total, body


def _prefixes(settings: Settings, skill_dir: Path | None, evalset: EvalSet) -> dict[str, int]:
    """System prompt + tool definitions of each role: the part prompt caching reads back."""
    from optimizer.execute.agent import agent_tools
    from optimizer.grade.answer import answer_schema
    from optimizer.model.prompts import load_prompt
    from optimizer.model.structured import forced_tool
    from optimizer.schemas import Analysis, Comparison
    from optimizer.search.propose import ProposalAnswer

    def tool(schema: Any) -> int:
        return len(json.dumps(forced_tool(schema, "submit")))  # the definition the client sends

    description = ""
    if skill_dir is not None and (Path(skill_dir) / "SKILL.md").is_file():
        from optimizer.inputs.skillmd import parse_skill_md

        try:
            description = parse_skill_md((Path(skill_dir) / "SKILL.md").read_text(encoding="utf-8")).description
        except Exception:
            description = ""
    texts = [e.expectations for e in evalset.evals]
    dims = [[d.name for d in e.rubric] for e in evalset.evals]
    grader_tool = max((tool(answer_schema(t, d)) for t, d in zip(texts, dims, strict=True)), default=0)
    return {
        "executor": len(load_prompt("executor").render(input_files="", skills="")) + 900 + len(description)
        + len(json.dumps(agent_tools(settings, with_skill=True))),
        "grader": len(load_prompt("grader").render()) + grader_tool,
        "comparator": len(load_prompt("comparator").render()) + tool(Comparison),
        "analyzer": len(load_prompt("analyzer").render()) + tool(Analysis),
        "proposer": len(load_prompt("proposer").render()) + tool(ProposalAnswer),
    }
