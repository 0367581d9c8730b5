"""The settings' sections, their defaults and limits: one frozen model (Settings) passed explicitly,
never read from a global."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.catalog import DEFAULT_MODELS, DEFAULT_PRICES
from optimizer.prices import Price

ROLES = ("executor", "grader", "comparator", "analyzer", "proposer", "trigger")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Models(Section):
    # The catalog's defaults (optimizer/catalog.py): current models, each priced.
    executor: str = DEFAULT_MODELS["executor"]
    grader: str = DEFAULT_MODELS["grader"]
    comparator: str = DEFAULT_MODELS["comparator"]
    analyzer: str = DEFAULT_MODELS["analyzer"]
    proposer: str = DEFAULT_MODELS["proposer"]
    trigger: str = DEFAULT_MODELS["trigger"]


class Llm(Section):
    provider: Literal["sim", "anthropic"] = "sim"
    base_url: str = ""
    max_concurrency: int = Field(8, ge=1)
    max_attempts: int = Field(6, ge=1)
    backoff_initial_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(60.0, ge=0)
    timeout_s: float = Field(600.0, gt=0)
    max_tokens: int = Field(8192, ge=1)
    prompt_caching: bool = True
    attachments: bool = True
    batch: bool = False
    batch_poll_s: float = Field(10.0, gt=0)
    batch_poll_max_s: float = Field(300.0, gt=0)
    batch_settle_s: float = Field(0.5, ge=0)
    batch_hold_s: float = Field(60.0, ge=0)
    batch_max_requests: int = Field(10_000, ge=1, le=100_000)
    failure_streak: int = Field(12, ge=1)


class Loop(Section):
    # None: no limit. The budget, the deadline and the stop rule (budget/stops.py) bound a night;
    # a cap chosen on bench seeds ended a $25 night after $1.34 (issue 48). --max-iterations sets one.
    max_iterations: int | None = Field(None, ge=0)
    proposals_per_iteration: int = Field(2, ge=1, le=99)  # a ledger sample packs (iteration, index)
    # "first": an iteration ends at its first winner; "all": each proposal is judged against the parent.
    judge_proposals: Literal["first", "all"] = "first"
    # Iterations without a win that stop a run; None (the default): off. With cheap steps an equal
    # child wins 40% of the time, so raw wins say little; the stop rule below reads the evidence.
    patience: int | None = Field(None, ge=1)
    # The score a dollar must buy for a run to go on (budget/stops.py); None: derived, the headroom
    # v0 left over the budget, (1 − v0's train score) / budget.usd.
    min_gain_per_usd: float | None = Field(None, ge=0)
    # The proposals the stop rule reads (the last ones since the run's start or resume); it never
    # stops before this many.
    stop_window: int = Field(8, ge=2)
    spend_all: bool = False  # no stop rule: the budget, the deadline or a set limit ends a run
    target_score: float = Field(1.0, ge=0, le=1)
    # Whose child the next proposal is: "best", always the current best; "pareto", a version drawn
    # from the per-eval Pareto front (decide/parents.py). Was loop.parent_selection.
    parent: Literal["best", "pareto"] = "best"
    screen_evals: int = Field(2, ge=0)
    seed: int = 0


class Budget(Section):
    usd: float = Field(20.0, ge=0, allow_inf_nan=False)  # a ceiling no night can keep is refused
    deadline: str = ""


class Evals(Section):
    runs_per_eval: int = Field(3, ge=1)
    test_fraction: float = Field(0.25, ge=0, lt=1)
    structural_gate: bool = True
    baseline_comparison: bool = True
    unscored_retries: int = Field(2, ge=0)
    internal_error_streak: int = Field(3, ge=1)


class Probe(Section):
    # How the description target learns whether a description triggers: "claude-code" runs the
    # real CLI with the skill installed (what users get), "api" one routing request (offline,
    # cheap); "auto" is the CLI when it is installed and the provider is a real endpoint.
    method: Literal["auto", "api", "claude-code"] = "auto"


class Scoring(Section):
    pass_weight: float = Field(0.4, ge=0)
    rubric_weight: float = Field(0.6, ge=0)


class Selection(Section):
    rule: Literal["sequential", "bootstrap"] = "sequential"
    min_effect: float = Field(0.03, ge=0)
    confidence: float = Field(0.95, gt=0, lt=1)
    bootstrap_samples: int = Field(2000, ge=100)
    max_runs_per_eval: int = Field(12, ge=1)
    comparator_majority: float = Field(0.75, gt=0.5, le=1)
    max_judge_error_rate: float = Field(0.25, ge=0, le=1)
    max_unscored_rate: float = Field(0.5, ge=0, le=1)
    # The screen stops a child whose minibatch mean d is below −screen_margin; a negative margin
    # asks the child to improve on the minibatch before any full run (GEPA's acceptance test).
    screen_margin: float = Field(0.15, ge=-1, le=1)
    # Futility stops runs (never promotes), so it holds no α: it is the price of an equal child in
    # runs. `tasks` tests its last look at its share of α (decide/spending.py), stricter than the
    # level a child that gets there mostly wins at earlier, so its last-look chance counts less.
    futility: float = Field(0.40, ge=0, lt=1)
    futility_tasks: float = Field(0.20, ge=0, lt=1)
    few_evals: int = Field(10, ge=1)
    # How a step is decided (a step is a move, not a claim: docs/design.md §16). "cheap": one look at
    # one run an eval of each side, won when the 60% bound of Δ is above zero, no comparator and
    # no night control (decide/step.py CHEAP; the peers bench's choice); "guarded": this section
    # as set (looks up to max_runs_per_eval at confidence, the comparator, selection.night).
    step: Literal["cheap", "guarded"] = "cheap"
    # Runs an eval of a child at a step's first look (0: evals.runs_per_eval, as v0 and the sealed
    # test run). A step is a move, not a claim (docs/design.md §16): fewer runs buy more proposals.
    first_runs: int = Field(0, ge=0)
    # Runs an eval of v0 on the train evals when a run starts (0: the step preset's, 1 under
    # cheap steps, evals.runs_per_eval under guarded ones). A step reads all of them; the sealed
    # test and an adoption take their own.
    v0_runs: int = Field(0, ge=0)
    # The most runs an eval of a parent a step reads, grown by one with each child of it already
    # decided: a parent measured once on a lucky run blocks every child until it is measured
    # again (0: a parent's runs are the child's count; v0 keeps v0_runs either way).
    parent_runs: int = Field(3, ge=0)
    # "decisive": a pair is judged in its second order only when the first is decisive (a
    # first-order tie cannot become a swap-consistent win or loss); "always": both orders.
    second_order: Literal["decisive", "always"] = "decisive"
    # Which run pairs the blind comparator judges: "auto": one pair per eval (run 1 of each side) under
    # the sequential rule, where its verdicts rarely decide (same power and error rates with every
    # pair, bench/selection.py) and feed the analyzer and the record; "all": every pair (docs/selection.md);
    # "none": no comparator at steps (the sequential rule decides on scores alone; a step is a move).
    compare_pairs: Literal["auto", "all", "none"] = "auto"
    # Where a look's extra runs go: "all": every eval; "informative" skips evals whose runs were
    # all identical and gives the run to the runs_share of the rest with the largest variance of
    # d. "all" is the default: bench/selection.py measured less power for "informative" (with
    # pass/fail scores, 3 identical runs often hide a rare failure) for few runs saved.
    runs_to: Literal["all", "informative"] = "all"
    runs_share: float = Field(1.0, gt=0, le=1)
    # The claim a promotion makes: "tasks" (better on these evals; runs are the units), "general"
    # (better on evals like these; evals are the units); "auto": tasks below few_evals evals.
    scope: Literal["auto", "tasks", "general"] = "auto"
    # A night's promotions as a family: "lord" (online false-discovery control, LORD++: each
    # decision's α from the decisions before it) or "none" (each decision at 1 − confidence).
    night: Literal["lord", "none"] = "lord"


class Adopt(Section):
    """The adoption's claim (docs/design.md §16): the chosen version is
    better than the version the user has now, certified on fresh runs of both."""

    # The chance that a certified version is not better, per adoption; steps spend none of it.
    alpha: float = Field(0.05, gt=0, lt=1)
    # "tasks": better on the train evals (runs are the units; fresh runs, so the evals that chose
    # the version may serve); "general": better on evals like these, on the sealed evals only,
    # since a general claim is never certified on the evals that chose the version.
    scope: Literal["tasks", "general"] = "tasks"
    first_runs: int = Field(3, ge=1)  # fresh runs an eval, each side, at the first look
    max_runs: int = Field(
        12, ge=1, le=999
    )  # a look never goes past this; fresh samples start at 1000
    min_effect: float = Field(0.0, ge=0)  # certified only above this Δ
    # When a run adopts by itself, after its sealed test: "never" (the user runs `optimizer
    # adopt`), "always" (`run --adopt`, `schedule --adopt nightly`) or "weekly" (the first night
    # 7 days after the run's last adoption). Its first looks are reserved when the run starts.
    at_end: Literal["never", "always", "weekly"] = "never"
    # "lord": the run's adoptions as a family under online false-discovery control (LORD++ at
    # alpha): each adoption's α from the adoptions before it. "none": each at alpha.
    fdr: Literal["none", "lord"] = "none"


class Execute(Section):
    executor: Literal["anthropic", "claude-code", "command"] = "anthropic"
    command: str = ""
    claude_binary: str = "claude"
    max_turns: int = Field(20, ge=1)
    max_tokens: int = Field(8192, ge=1)
    timeout_s: float = Field(300.0, gt=0)
    model_tokens_per_s: float = Field(100.0, ge=0)
    model_wait_max_s: float = Field(1800.0, gt=0)
    concurrency: int = Field(4, ge=1)
    backend: Literal["local", "ray"] = "local"
    tool_schemas: Literal["auto", "server", "explicit"] = "auto"


class Sandbox(Section):
    mode: Literal["auto", "bwrap", "none", "strict"] = "auto"
    timeout_s: float = Field(60.0, gt=0)
    memory_mb: int = Field(1024, ge=64)
    max_output_bytes: int = Field(1_000_000, ge=1024)
    max_file_bytes: int = Field(50_000_000, ge=1024)
    max_processes: int = Field(256, ge=8)
    max_workspace_mb: int = Field(512, ge=1)


class Sim(Section):
    seed: int = 0
    latency_ms: float = Field(0.0, ge=0)
    fault_rate: float = Field(0.0, ge=0, le=1)
    judge_noise: float = Field(0.05, ge=0, le=1)
    position_bias: float = Field(0.3, ge=0, le=1)
    proposal_quality: float = Field(0.6, ge=0, le=1)
    overfit_rate: float = Field(0.15, ge=0, le=1)
    harmful_rate: float = Field(0.1, ge=0, le=1)
    world: int = 0
    habits: int = Field(8, ge=1, le=8)
    infeasible: float = Field(0.1, ge=0, le=1)
    position_cost: float = Field(0.15, ge=0, le=1)
    length_cost: float = Field(0.02, ge=0, le=1)
    focus_cost: float = Field(0.05, ge=0, le=1)
    batch_delay_s: float = Field(0.0, ge=0)
    fail_role: str = ""
    fail_match: str = ""

    @model_validator(mode="after")
    def _rates_share_one(self) -> Sim:
        total = self.proposal_quality + self.overfit_rate + self.harmful_rate
        if total > 1 + 1e-9:
            raise ValueError(
                f"sim.proposal_quality + sim.overfit_rate + sim.harmful_rate is {total:g}; they are "
                "shares of one proposal, so lower one of them until they sum to at most 1"
            )
        return self


class Ray(Section):
    address: str = ""
    num_cpus_per_run: float = Field(1.0, gt=0)


class StoreSettings(Section):
    busy_timeout_s: float = Field(30.0, gt=0)


class Settings(Section):
    models: Models = Models()
    llm: Llm = Llm()
    loop: Loop = Loop()
    budget: Budget = Budget()
    evals: Evals = Evals()
    scoring: Scoring = Scoring()
    probe: Probe = Probe()
    selection: Selection = Selection()
    adopt: Adopt = Adopt()
    execute: Execute = Execute()
    sandbox: Sandbox = Sandbox()
    sim: Sim = Sim()
    ray: Ray = Ray()
    store: StoreSettings = StoreSettings()
    prices: dict[str, Price] = Field(default_factory=lambda: dict(DEFAULT_PRICES))

    def price(self, model: str) -> Price:
        """The price of a model, of a listed prefix of its name (a dated name), or else of the
        most expensive listed model, so a budget is never under-counted (model.cost warns)."""
        return self.prices[self.priced_as(model)]

    def priced_as(self, model: str) -> str:
        listed = [name for name in self.prices if model.startswith(name)]
        return (
            max(listed, key=len)
            if listed
            else max(self.prices, key=lambda m: self.prices[m].output)
        )


SECTIONS: dict[str, type[Section]] = {
    # pydantic types an annotation as any type form; every field but prices is a Section class
    name: field.annotation  # type: ignore[misc]
    for name, field in Settings.model_fields.items()
    if name != "prices"
}

# An evals file's author knows the suite best: these eval_config keys sit above config.toml.
EVAL_CONFIG_KEYS = {
    "runs_per_eval": "evals.runs_per_eval",
    "structural_gate": "evals.structural_gate",
    "judge_model": "models.grader",
    "baseline_comparison": "evals.baseline_comparison",
}


class Loaded(BaseModel):
    """The effective settings and, for each dotted key that was set, where it came from."""

    model_config = ConfigDict(frozen=True)
    settings: Settings
    sources: dict[str, str]

    def source(self, key: str) -> str:
        return self.sources.get(key, "default")
