"""Settings: built-in defaults < config.toml < an evals file's eval_config < OPTIMIZER_<SECTION>_<KEY>
environment variables < --set section.key=value < explicit flags, into one frozen model passed
explicitly. Never read settings from a global; never let an unknown key pass silently."""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from optimizer.errors import BadInput
from optimizer.prices import (
    DEFAULT_PRICES,
    PRICE_FIELDS,
    Price,
    env_prices,
    price_key,
    quoted,
    set_price,
)

ROLES = ("executor", "grader", "comparator", "analyzer", "proposer", "trigger")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Models(Section):
    executor: str = "claude-sonnet-4-6"
    grader: str = "claude-opus-4-6"
    comparator: str = "claude-opus-4-6"
    analyzer: str = "claude-opus-4-6"
    proposer: str = "claude-opus-4-6"
    trigger: str = "claude-haiku-4-5"


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
    max_iterations: int = Field(5, ge=0)
    proposals_per_iteration: int = Field(2, ge=1, le=99)  # a ledger sample packs (iteration, index)
    # "first": an iteration ends at its first winner; "all": each proposal is judged against the parent.
    judge_proposals: Literal["first", "all"] = "first"
    patience: int = Field(3, ge=1)
    min_gain_per_usd: float = Field(0.05, ge=0)  # the plateau of search/stops.py
    min_proposals_without_step: int = Field(4, ge=1)
    spend_all: bool = False  # no plateau stop: the budget or a limit ends a run
    target_score: float = Field(1.0, ge=0, le=1)
    parent_selection: Literal["best", "pareto"] = "best"
    screen_evals: int = Field(2, ge=0)
    seed: int = 0


class Budget(Section):
    usd: float = Field(20.0, ge=0)
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
    screen_margin: float = Field(0.15, ge=0)
    # Futility stops runs (never promotes), so it holds no α: it is the price of an equal child in
    # runs. `tasks` tests its last look at its share of α (search/spending.py), stricter than the
    # level a child that gets there mostly wins at earlier, so its last-look chance counts less.
    futility: float = Field(0.40, ge=0, lt=1)
    futility_tasks: float = Field(0.20, ge=0, lt=1)
    few_evals: int = Field(10, ge=1)
    # "decisive": a pair is judged in its second order only when the first is decisive (a
    # first-order tie cannot become a swap-consistent win or loss); "always": both orders.
    second_order: Literal["decisive", "always"] = "decisive"
    # Which run pairs the blind comparator judges: "auto": one pair per eval (run 1 of each side) under
    # the sequential rule, where its verdicts rarely decide (same power and error rates with every
    # pair, bench/selection.py) and feed the analyzer and the record; "all": every pair (docs/selection.md).
    compare_pairs: Literal["auto", "all"] = "auto"
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
                "shares of one proposal, so lower one of them until they sum to at most 1")
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
        return max(listed, key=len) if listed else max(self.prices, key=lambda m: self.prices[m].output)


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


def known_keys() -> list[str]:
    return [f"{s}.{k}" for s, model in SECTIONS.items() for k in model.model_fields]


def _suggest(key: str) -> str:
    close = difflib.get_close_matches(key, known_keys(), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else "; see config.toml for the known keys."


def _type_name(section: str, key: str) -> str:
    annotation = SECTIONS[section].model_fields[key].annotation
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(annotation))
    return getattr(annotation, "__name__", str(annotation))


def choice_flag(flag: str, value: str | None, dotted: str) -> str | None:
    """A flag whose value is one of a setting's choices, checked where it was typed, so that the
    error names the flag the user wrote rather than the setting it feeds."""
    section, _, key = dotted.partition(".")
    allowed = get_args(SECTIONS[section].model_fields[key].annotation)
    if value is not None and value not in allowed:
        raise BadInput(f"{flag} {value!r}: use one of {', '.join(allowed)}.")
    return value


def _coerce(section: str, key: str, raw: str) -> Any:
    """Text from the environment or --set becomes the field's type; pydantic checks the rest."""
    annotation = SECTIONS[section].model_fields[key].annotation
    if annotation is bool:
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
    return raw


def _set(tree: dict, sources: dict, dotted: str, value: Any, origin: str) -> None:
    section, _, key = dotted.partition(".")
    if section == "prices":
        set_price(tree, sources, *price_key(key, origin), value, origin)
    elif section not in SECTIONS or key not in SECTIONS[section].model_fields:
        raise BadInput(f"{origin}: unknown setting '{dotted}'{_suggest(dotted)}")
    else:
        tree.setdefault(section, {})[key] = value
    sources[dotted] = origin


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: not valid TOML ({exc}); fix the syntax at that line.") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot be read ({exc}); check the path.") from exc


def load(
    config_path: Path | None = None,
    *,
    eval_config: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    flags: Mapping[str, Any] | None = None,
    base: Mapping[str, Any] | None = None,
) -> Loaded:
    """Build the effective settings. `base` (a run.toml's settings) replaces the built-in
    defaults when a run is resumed; `flags` maps dotted keys to explicit command-line values."""
    tree: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if base:
        _set_tables(tree, sources, {k: v for k, v in base.items() if isinstance(v, dict)}, "run.toml")
    if config_path is not None and config_path.is_file():
        _set_tables(tree, sources, _read_toml(config_path), str(config_path))
    for key, value in (eval_config or {}).items():
        if key in EVAL_CONFIG_KEYS and value is not None:
            _set(tree, sources, EVAL_CONFIG_KEYS[key], value, "evals.json eval_config")
    for name, raw in sorted((env if env is not None else os.environ).items()):
        if name == "OPTIMIZER_PRICES" or name.startswith("OPTIMIZER_PRICES_"):
            _set_tables(tree, sources, {"prices": env_prices(name, raw)}, f"env {name}")
            continue
        if not name.startswith("OPTIMIZER_") or name.count("_") < 2:
            continue
        section, _, key = name[len("OPTIMIZER_") :].lower().partition("_")
        if section in SECTIONS:
            dotted = f"{section}.{key}"
            if key not in SECTIONS[section].model_fields:
                raise BadInput(f"environment variable {name}: unknown setting{_suggest(dotted)}")
            _set(tree, sources, dotted, _coerce(section, key, raw), f"env {name}")
    for item in overrides:
        dotted, eq, raw = item.partition("=")
        dotted = dotted.strip()
        if not eq or "." not in dotted:
            raise BadInput(f"--set {item!r}: expected section.key=value, e.g. --set loop.seed=3.")
        section, _, key = dotted.partition(".")
        value = _coerce(section, key, raw) if section in SECTIONS and key in SECTIONS[section].model_fields else raw
        _set(tree, sources, dotted, value, f"--set {dotted}")
    for dotted, value in (flags or {}).items():
        if value is not None:
            _set(tree, sources, dotted, value, "command-line flag")
    if "prices" in tree:
        listed = {k: v.model_dump() for k, v in DEFAULT_PRICES.items()}
        tree["prices"] = {**listed, **{m: {**listed.get(m, {}), **p} for m, p in tree["prices"].items()}}
    try:
        settings = Settings.model_validate(tree)
    except ValidationError as exc:
        raise BadInput(*(_explain(err, sources) for err in exc.errors())) from None
    return Loaded(settings=settings, sources=sources)


def _set_tables(tree: dict, sources: dict, tables: Mapping[str, Any], origin: str) -> None:
    for section, values in tables.items():
        if not isinstance(values, dict):
            raise BadInput(f"{origin}: '{section}' must be a [section] table of settings.")
        for key, value in values.items():
            if section == "prices":
                set_price(tree, sources, key, None, value, origin)
            else:
                _set(tree, sources, f"{section}.{key}", value, origin)


def _explain(err: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    loc = [str(p) for p in err["loc"]]
    if loc[0] == "prices" and len(loc) == 3:
        origin, key = sources.get(f"prices.{loc[1]}", "settings"), f"prices.{quoted(loc[1])}"
        if err["type"] == "missing":
            return (f"{origin}: {key} has no {loc[2]} price; set it too (e.g. --set '{key}.{loc[2]}"
                    f"=0'), or {key} = 0 for a free model.")
        if err["type"] == "extra_forbidden":
            return f"{origin}: {key}.{loc[2]} is not a price field; use {', '.join(PRICE_FIELDS)}."
        return f"{origin}: {key}.{loc[2]} {err['msg'].lower()} (USD per million tokens)."
    dotted = ".".join(loc[:2])
    origin = sources.get(dotted, "settings")
    if err["type"] == "value_error" and len(loc) == 1:
        # A rule across a section's keys: name where those keys were set.
        origins = sorted({v for k, v in sources.items() if k.startswith(f"{loc[0]}.")})
        where = ", ".join(origins) or "settings"
        return f"{where}: {str(err['msg']).removeprefix('Value error, ')}."
    if err["type"] == "extra_forbidden":
        return f"{origin}: unknown setting '{'.'.join(loc)}'{_suggest('.'.join(loc))}"
    if len(loc) >= 2 and loc[0] in SECTIONS and loc[1] in SECTIONS[loc[0]].model_fields:
        expected = _type_name(loc[0], loc[1])
        return f"{origin}: '{dotted}' must be {expected} ({err['msg'].lower()})."
    return f"{origin}: '{'.'.join(loc)}' {err['msg'].lower()}."
