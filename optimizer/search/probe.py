"""The trigger probe of the description target: one routing request per (query, run), the
description under test listed among realistic distractors; its answers and their metrics.
Never counts a failed probe as "not triggered": it is missing data, asked again later."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from optimizer.config import Settings
from optimizer.decide.keep import Probed, QueryProbes
from optimizer.decide.stats import percentile
from optimizer.errors import BadInput
from optimizer.execute import Executor
from optimizer.execute.claude_env import find_claude
from optimizer.inputs.evals import Eval
from optimizer.inputs.triggers import Query
from optimizer.model import ModelCallFailed
from optimizer.model.prompts import load_prompt
from optimizer.store import trials
from optimizer.store.db import Store, now
from optimizer.tags import data

# Beside the code (package data in pyproject.toml); importlib.resources fails on an editable install.
DISTRACTORS = Path(__file__).resolve().parents[1] / "data" / "distractor_skills.json"
DISTRACTORS_PER_REQUEST = 8
PASS_THRESHOLD = 0.5  # a query passes when its trigger rate is on the right side of this
PROBE_MAX_TOKENS = 1024  # a routing decision is one tool call; the budget estimate uses this
CONFIGURATION = "trigger"  # trials.configuration of a probe row

SKILL_TOOL = {
    "name": "Skill",
    "description": "Load one of the available skills by its exact name; its instructions come back "
    "as the tool result.",
    "input_schema": {
        "type": "object",
        "properties": {"skill": {"type": "string", "description": "The skill's name."}},
        "required": ["skill"],
    },
}


@cache
def distractors() -> tuple[tuple[str, str], ...]:
    """The shipped set of realistic other skills the probe lists beside the one under test."""
    text = DISTRACTORS.read_text(encoding="utf-8")
    return tuple((d["name"], d["description"]) for d in json.loads(text))


def offered(
    skill_name: str,
    description: str,
    query: Query,
    run: int,
    *,
    seed: int,
    pool: Iterable[tuple[str, str]] = (),
    rivals: Sequence[tuple[str, str]] = (),
) -> list[tuple[str, str]]:
    """The skills listed for one request: a seeded sample of distractors, a fleet's siblings
    (`rivals`, every one) and the skill, each at a seeded position. Keyed by the query's text and the run, never the description, so a parent and its
    child meet the same rivals in the same order and their difference is the description alone."""
    rng = random.Random(f"{seed}:offer:{hashlib.sha256(query.query.encode()).hexdigest()}:{run}")
    named = {skill_name} | {name for name, _ in rivals}
    others = [d for d in (pool or distractors()) if d[0] not in named]
    chosen = rng.sample(others, min(DISTRACTORS_PER_REQUEST, len(others)))
    for rival in rivals:  # a fleet's siblings are always listed: they are the rivals that count
        chosen.insert(rng.randrange(len(chosen) + 1), (rival[0], rival[1]))
    chosen.insert(rng.randrange(len(chosen) + 1), (skill_name, description))
    return chosen


def request(
    skill_name: str,
    description: str,
    query: Query,
    run: int,
    *,
    seed: int,
    rivals: Sequence[tuple[str, str]] = (),
) -> dict:
    # A description may be a model's proposal: offered as data, like every skill's.
    listed = "\n".join(
        data("skill", desc, name=name)
        for name, desc in offered(skill_name, description, query, run, seed=seed, rivals=rivals)
    )
    return {
        "system": load_prompt("trigger").render(available_skills=listed),
        "messages": [{"role": "user", "content": query.query}],
        "tools": [SKILL_TOOL],
    }


def _called(block: Any) -> str | None:
    if (
        getattr(block, "type", None) != "tool_use"
        or getattr(block, "name", "") != SKILL_TOOL["name"]
    ):
        return None
    given = block.input if isinstance(block.input, dict) else {}
    name = str(given.get("skill") or given.get("command") or given.get("name") or "")
    return name.strip().lstrip("/").rsplit(":", 1)[-1]  # "/x" and "plugin:x" name x too


@dataclass(frozen=True)
class Probe:
    query_id: int
    run: int
    triggered: bool | None  # None: the probe failed, so this run is missing data
    error: str | None = None


async def probe_one(
    client,
    skill_name: str,
    description: str,
    query: Query,
    run: int,
    *,
    seed: int,
    rivals: Sequence[tuple[str, str]] = (),
) -> Probe:
    """One request; triggered when the first turn calls Skill with this skill's name."""
    try:
        message = await client.message(
            "trigger",
            **request(skill_name, description, query, run, seed=seed, rivals=rivals),
            max_tokens=PROBE_MAX_TOKENS,
            sample=run,
        )
    except ModelCallFailed as exc:
        return Probe(query.id, run, None, str(exc))
    return Probe(query.id, run, any(_called(b) == skill_name for b in message.content))


def method_for(settings: Settings) -> str:
    """The probe a run uses: "claude-code" or "api". `auto` keeps the simulator runs offline and
    fast, and measures what Claude Code does wherever its CLI is installed."""
    chosen = settings.probe.method
    if chosen != "auto":
        return chosen
    if settings.llm.provider == "sim":
        return "api"
    try:
        find_claude(settings)
    except BadInput:
        return "api"
    return "claude-code"


async def probe_cli(
    executor: Executor, skill_dir: Path, skill_name: str, query: Query, run: int, scratch: Path
) -> Probe:
    """One `claude -p QUERY` in a fresh project with the skill under .claude/skills/, as
    skill-creator's run_eval measures it: triggered when the CLI calls Skill with this skill. A
    run that failed before the model answered is missing data, as a failed API probe is."""
    where = scratch / f"q-{query.id}-run-{run}"
    ask = Eval(id=query.id, name=f"trigger query {query.id}", prompt=query.query)
    try:
        record = await executor.execute(
            skill_dir=skill_dir,
            skill_name=skill_name,
            eval=ask,
            inputs_root=scratch,
            trial_dir=where,
            run_number=run,
            sample=run,
        )
    finally:
        shutil.rmtree(where, ignore_errors=True)
    if record.skill_invoked:
        return Probe(query.id, run, True)
    # The probe is the first turn: once the model answered it without Skill, how the one-turn run
    # ended (max turns reached after some other tool) says nothing more.
    if record.tokens and record.status != "unscored":
        return Probe(query.id, run, False)
    return Probe(query.id, run, None, record.error or record.status)


def record(store: Store, label: str, split_name: str, probe: Probe) -> None:
    key = f"{label}/trigger/q-{probe.query_id}/run-{probe.run}"
    trials.record(
        store,
        {
            "key": key,
            "version": label,
            "eval_id": probe.query_id,
            "configuration": CONFIGURATION,
            "run_number": probe.run,
            "split": split_name,
            "status": "ok" if probe.triggered is not None else "error",
            "error": probe.error,
            "skill_invoked": None if probe.triggered is None else int(probe.triggered),
            "completed_at": now(),
        },
    )


def recorded(store: Store, label: str) -> dict[int, dict[int, bool | None]]:
    """{query id: {run: triggered, or None for a failed probe}} of one version, every split."""
    out: dict[int, dict[int, bool | None]] = {}
    for r in trials.probes(store, label, CONFIGURATION):
        ok = r["status"] == "ok"
        out.setdefault(r["eval_id"], {})[r["run_number"]] = bool(r["skill_invoked"]) if ok else None
    return out


# -- metrics -------------------------------------------------------------------------------------


def _stats(items: list[tuple[bool, bool]]) -> dict[str, float | None]:
    """Accuracy, precision, recall, F1 of (should_trigger, predicted) pairs; None when undefined."""
    tp = sum(s and p for s, p in items)
    fp = sum(p and not s for s, p in items)
    fn = sum(s and not p for s, p in items)
    acc = sum(s == p for s, p in items) / len(items) if items else None
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None
    return {"pass_rate": acc, "precision": precision, "recall": recall, "f1": f1}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


class ProbeMetrics(Probed):
    """probe.metrics of one split, as trigger.json keeps it (schemas.TriggerMetrics)."""

    ci: dict[str, list[float | None] | None]
    queries: int
    missing_queries: int
    probe_errors: int


def metrics(
    outcomes: dict[int, dict[int, bool | None]],
    queries: dict[int, Query],
    ids: list[int],
    *,
    samples: int = 2000,
    confidence: float = 0.95,
) -> ProbeMetrics:
    """The scores of one description on the queries `ids`. Per query the trigger rate over its
    observed runs; it passes when the rate is ≥ 0.5 for should_trigger and < 0.5 otherwise. Failed
    probes are left out (a query with none observed is `missing`, not a fail). Intervals: the
    percentile bootstrap over queries, seeded by the ids, resamples where a ratio is undefined
    (no predicted or no actual positives) skipped. Never and always triggering is `constant_signal`."""
    seen = _observe(outcomes, queries, ids)
    point = _stats(seen.items)
    ci = _bootstrap_ci(seen.items, point, ids, samples=samples, confidence=confidence)
    return {
        "pass_rate": _round(point["pass_rate"]),
        "precision": _round(point["precision"]),
        "recall": _round(point["recall"]),
        "f1": _round(point["f1"]),
        "ci": ci,
        "queries": len(seen.items),
        "missing_queries": seen.missing,
        "probe_errors": seen.errors,
        "constant_signal": _constant(seen.observed),
        "per_query": seen.per_query,
    }


@dataclass(frozen=True)
class _Observed:
    """What the probes of the queries `ids` showed: per query its rate and verdict, the
    (should_trigger, predicted) pairs of the queries observed, every observed probe's outcome,
    and how many probes failed and how many queries had none observed."""

    per_query: dict[str, QueryProbes]
    items: list[tuple[bool, bool]]
    observed: list[bool]
    errors: int
    missing: int


def _observe(
    outcomes: dict[int, dict[int, bool | None]], queries: dict[int, Query], ids: list[int]
) -> _Observed:
    """Each query's trigger rate over its observed probes and whether it passes; failed probes
    are left out, and a query with none observed is counted missing, not failed."""
    per_query: dict[str, QueryProbes] = {}
    items: list[tuple[bool, bool]] = []
    observed: list[bool] = []
    errors = missing = 0
    for qid in ids:
        runs = outcomes.get(qid, {})
        seen = [t for t in runs.values() if t is not None]
        errors += sum(t is None for t in runs.values())
        observed += seen
        if not seen:
            missing += 1
            continue
        rate = sum(seen) / len(seen)
        predicted = rate >= PASS_THRESHOLD
        want = queries[qid].should_trigger
        items.append((want, predicted))
        per_query[str(qid)] = {
            "rate": round(rate, 4),
            "runs": len(seen),
            "passed": predicted == want,
            "should_trigger": want,
        }
    return _Observed(per_query, items, observed, errors, missing)


def _bootstrap_ci(
    items: list[tuple[bool, bool]],
    point: dict[str, float | None],
    ids: list[int],
    *,
    samples: int,
    confidence: float,
) -> dict[str, list[float | None] | None]:
    """The percentile bootstrap interval of each statistic over queries, seeded by the ids (the
    same queries give the same interval); draws where a ratio is undefined are skipped, and a
    statistic undefined on the queries themselves has none."""
    rng = random.Random(f"trigger-ci:{','.join(map(str, ids))}")
    draws: dict[str, list[float]] = {k: [] for k in point}
    for _ in range(samples if items else 0):
        for k, v in _stats(rng.choices(items, k=len(items))).items():
            if v is not None:
                draws[k].append(v)
    tail = (1 - confidence) / 2
    return {
        k: [_round(percentile(sorted(v), tail)), _round(percentile(sorted(v), 1 - tail))]
        if v and point[k] is not None
        else None
        for k, v in draws.items()
    }


def _constant(observed: list[bool]) -> str | bool:
    """Whether the description never or always triggered ("never", "always"), else False."""
    constant: str | bool = False  # not None: history.json drops null extras
    if observed and not any(observed):
        constant = "never"
    elif observed and all(observed):
        constant = "always"
    return constant
