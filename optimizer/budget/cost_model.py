"""What one call of each model role costs, modelled from the request and answer sizes of a typical
run (per provider profile), and the tally of calls, tokens and dollars per role that the cost
preview (budget/estimate.py) adds up. Reads the skill's and the prompts' sizes; never calls a model."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from optimizer.config import Settings
from optimizer.inputs.evals import Eval, EvalSet
from optimizer.model.cost import BATCH_PRICE_FACTOR, BATCH_ROLES
from optimizer.schemas import JsonObject

CHARS_PER_TOKEN = 4


class RoleCost(TypedDict):
    calls: int
    tokens: int
    usd: float


class CostPart(TypedDict):
    """Calls, tokens and dollars of one part of a run (its setup, an iteration, the sealed test,
    the whole run), at the standard price and in batch mode; by role when tallied (Tally)."""

    calls: int
    tokens: int
    usd: float
    usd_batch: float
    by_role: NotRequired[dict[str, RoleCost]]


class Resumed(TypedDict):
    iterations_done: int
    spent_usd: float
    remaining: CostPart


class Estimate(TypedDict, total=False):
    """The cost preview of a run (budget/estimate.py), as shown and kept in runs.estimate_json.
    Not total: one read back from an older run folder may lack what was added since."""

    version: int
    provider: str
    batch: bool
    iterations: int  # assumed: the limit, or without one the iterations the budget covers
    iteration_limit: int | None  # loop.max_iterations (None: no limit)
    spend_all: bool  # loop.spend_all: no stop rule, the budget ends the run
    budget_usd: float | None
    train_evals: int
    test_evals: int
    setup: CostPart
    per_iteration: CostPart
    per_proposal: CostPart  # one proposal with its step's first look, typical
    call_headroom_usd: float  # the dearest call admitted at its longest answer, over its typical
    per_iteration_max: CostPart
    sealed_test: CostPart
    run: CostPart
    run_max: CostPart
    assumptions: JsonObject
    reserve_usd: float
    adoption_reserve_usd: float  # the first looks of an adoption at the run's end (adopt.at_end)
    iterations_in_budget: int | None
    unpriced: dict[str, str]  # a model priced as another: which
    resume: Resumed  # a resumed run's: what is left of it


# What a run looks like, per provider (characters). The simulator's numbers are measured on the
# csv-report example; the Messages API's are those of a typical agent on a small task.
PROFILES: dict[str, dict[str, float]] = {
    "sim": {
        "turns_with_skill": 3,
        "turns_without_skill": 2,
        "turn_growth": 900,
        "turn_output": 650,
        "output_files": 1200,
        "grader_output": 700,
        "grader_per_item": 120,
        "comparator_output": 1500,
        "analyzer_output": 2000,
        "proposer_output": 500,
        "feedback": 1500,
    },
    "anthropic": {
        "turns_with_skill": 8,
        "turns_without_skill": 6,
        "turn_growth": 2500,
        "turn_output": 1200,
        "output_files": 4000,
        "grader_output": 800,
        "grader_per_item": 300,
        "comparator_output": 1600,
        "analyzer_output": 4000,
        "proposer_output": 3000,
        "feedback": 4000,
    },
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

    def summary(self) -> CostPart:
        standard = sum(self.usd.values())
        batched = sum(
            v * (BATCH_PRICE_FACTOR if r in BATCH_ROLES else 1.0) for r, v in self.usd.items()
        )
        return {
            "calls": int(round(sum(self.calls.values()))),
            "tokens": int(round(sum(self.tokens.values()))),
            "usd": round(standard, 4),
            "usd_batch": round(batched, 4),
            "by_role": {
                r: {
                    "calls": int(round(self.calls[r])),
                    "tokens": int(round(self.tokens[r])),
                    "usd": round(self.usd[r], 4),
                }
                for r in sorted(self.calls)
                if self.calls[r]
            },
        }


class PriceModel:
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
        usd = (
            (prefix * (price.cache_read if cached else price.input))
            + body * price.input
            + out * price.output
        ) / 1_000_000
        tally = Tally()
        tally.calls[role] += times
        tally.tokens[role] += (prefix + body + out) * times
        tally.usd[role] += usd * times
        return tally

    def run(self, ev: Eval, with_skill: bool) -> Tally:
        """One execution of one eval and its grading."""
        p = self.profile
        turns = int(
            min(
                self.settings.execute.max_turns,
                p["turns_with_skill"] if with_skill else p["turns_without_skill"],
            )
        )
        tally = Tally()
        for k in range(turns):
            body = (
                len(ev.prompt) + k * p["turn_growth"] + (self.skill_body if with_skill and k else 0)
            )
            tally.add(self.call("executor", body, p["turn_output"]))
        if ev.expectations or ev.rubric:
            transcript = min(60_000, turns * (p["turn_growth"] + p["turn_output"]))
            body = _eval_chars(ev) + min(120_000, p["output_files"]) + transcript + 400
            answer = p["grader_output"] + p["grader_per_item"] * (
                len(ev.expectations) + len(ev.rubric)
            )
            tally.add(self.call("grader", body, answer))
        return tally

    def comparison(self, ev: Eval) -> Tally:
        p = self.profile
        body = _eval_chars(ev) + 2 * min(100_000, p["output_files"]) + 200
        return self.call("comparator", body, p["comparator_output"])

    def analysis(self, pairs: int, turns: int, output_chars: float | None = None) -> Tally:
        p = self.profile
        transcripts = min(24_000, 6 * min(3_000, turns * (p["turn_growth"] + p["turn_output"])))
        body = 2 * min(40_000, self.skill_chars) + min(pairs, 12) * 400 + 1_500 + transcripts
        out = p["analyzer_output"] if output_chars is None else output_chars
        return self.call("analyzer", body, out)

    def longest_answer(self, pairs: int, turns: int) -> float:
        """What the client admits an analysis at before it knows its answer's length (an answer
        of llm.max_tokens), over what it typically costs: the room a budget needs beyond the
        typical cost for the step's dearest call to be started (model/cost.Outputs)."""
        worst = self.analysis(pairs, turns, self.settings.llm.max_tokens * CHARS_PER_TOKEN)
        return max(0.0, worst.summary()["usd"] - self.analysis(pairs, turns).summary()["usd"])

    def proposal(self) -> Tally:
        p = self.profile
        return self.call("proposer", self.skill_chars + p["feedback"], p["proposer_output"])


# -- sizes ---------------------------------------------------------------------------------------


def _eval_chars(ev: Eval) -> int:
    rubric = sum(
        len(d.name) + len(d.description) + sum(len(v) for v in d.scoring.values()) + 60
        for d in ev.rubric
    )
    return (
        len(ev.prompt)
        + len(ev.expected_output)
        + sum(len(t) + 40 for t in ev.expectations)
        + rubric
        + 200
    )


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
    from optimizer.execute.tools import agent_tools
    from optimizer.grade.answer import answer_schema
    from optimizer.model.prompts import load_prompt
    from optimizer.model.structured import forced_tool
    from optimizer.schemas import Analysis, Comparison, ProposalAnswer

    def tool(schema: Any) -> int:
        return len(json.dumps(forced_tool(schema, "submit")))  # the definition the client sends

    description = ""
    if skill_dir is not None and (Path(skill_dir) / "SKILL.md").is_file():
        from optimizer.inputs.skillmd import parse_skill_md

        try:
            description = parse_skill_md(
                (Path(skill_dir) / "SKILL.md").read_text(encoding="utf-8")
            ).description
        except Exception:
            description = ""
    texts = [e.expectations for e in evalset.evals]
    dims = [[d.name for d in e.rubric] for e in evalset.evals]
    grader_tool = max(
        (tool(answer_schema(t, d)) for t, d in zip(texts, dims, strict=True)), default=0
    )
    return {
        "executor": len(load_prompt("executor").render(input_files="", skills=""))
        + 900
        + len(description)
        + len(json.dumps(agent_tools(settings, with_skill=True))),
        "grader": len(load_prompt("grader").render()) + grader_tool,
        "comparator": len(load_prompt("comparator").render()) + tool(Comparison),
        "analyzer": len(load_prompt("analyzer").render()) + tool(Analysis),
        "proposer": len(load_prompt("proposer").render()) + tool(ProposalAnswer),
    }
