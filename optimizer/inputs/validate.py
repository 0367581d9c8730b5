"""`optimizer validate`: check a skill folder and its evals together and summarise what a run would use.
Never write a file and never stop at the first problem: SKILL.md and evals problems come out together.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from optimizer.config import Settings
from optimizer.decide import power
from optimizer.errors import BadInput
from optimizer.inputs import placement
from optimizer.inputs import triggers as trigger
from optimizer.inputs.evals import EvalSet, Split, load_evals, sealed_count, split
from optimizer.inputs.skeleton import placeholder_sentence
from optimizer.inputs.skill import carried_as_is, check_skill, content_hash
from optimizer.inputs.skillmd import parse_skill_md

# Below this many evals in a split, a 95% interval spans most of [0, 1] (t has few degrees of
# freedom) and the sealed test is a handful of tasks: numbers to read as anecdotes, not evidence.
MIN_SPLIT_EVALS = 5


def small_suite(train: int, test: int, test_fraction: float) -> str | None:
    """One plain sentence when a split holds fewer than MIN_SPLIT_EVALS evals, with how many evals
    to add so that train and (when one is sealed) the test both reach it; None when both do."""
    wants_test = test_fraction > 0
    if train >= MIN_SPLIT_EVALS and (test >= MIN_SPLIT_EVALS or not wants_test):
        return None
    total = need = train + test
    while True:  # the split rounds, so find the first total whose split gives enough to both
        sealed = sealed_count(need, test_fraction)
        if need - sealed >= MIN_SPLIT_EVALS and (sealed >= MIN_SPLIT_EVALS or not wants_test):
            break
        need += 1
    add = f"add {_evals(need - total)} ({need} in all"
    if not wants_test:
        return (
            f"small suite: train has {_evals(train)}, too few for the intervals to mean much; "
            f"{add}) for at least {MIN_SPLIT_EVALS}."
        )
    if train >= MIN_SPLIT_EVALS:
        what = f"the sealed test has {_evals(test)}, too few for it to mean much"
    elif test:
        what = (
            f"train has {_evals(train)} and the sealed test {test}, too few for the intervals "
            "and the sealed test to mean much"
        )
    else:
        what = (
            f"train has {_evals(train)} and there is no sealed test, too few for the intervals "
            "to mean much, and nothing checks the result on unseen evals"
        )
    return (
        f"small suite: {what}; {add}: {need - sealed} train, {sealed} sealed test) for at "
        f"least {MIN_SPLIT_EVALS} in each split."
    )


def _evals(n: int) -> str:
    return f"{n} eval" if n == 1 else f"{n} evals"


class ValidationSummary(BaseModel):
    model_config = ConfigDict(frozen=True)
    skill_dir: Path
    skill_name: str
    skill_hash: str
    description_length: int
    evals_source: Path
    evals_hash: str
    dialect: str
    eval_count: int
    judged: int
    structural_by_type: dict[str, int]
    critical: int
    rubric_dimensions: int
    evals_with_rubric: int
    split: Split
    power: str = (
        ""  # the chance to find +0.10 with these train evals, and with the pending candidates
    )
    eval_config: dict[str, Any]
    warnings: list[str] = []  # the evals are valid, but a run on them would say little
    carried: list[str] = []  # files of the skill kept as they are (inputs/skill.carried_as_is)


def _summarise(skill_dir: Path, evalset: EvalSet, settings: Settings) -> ValidationSummary:
    doc = parse_skill_md(
        (skill_dir / "SKILL.md").read_text(encoding="utf-8"), skill_dir / "SKILL.md"
    )
    by_type = Counter(s.type for e in evalset.evals for s in e.structural)
    parts = split(evalset, test_fraction=settings.evals.test_fraction, seed=settings.loop.seed)
    small = small_suite(len(parts.train), len(parts.test), settings.evals.test_fraction)
    return ValidationSummary(
        skill_dir=skill_dir,
        skill_name=doc.name,
        skill_hash=content_hash(skill_dir),
        description_length=len(doc.description),
        evals_source=evalset.source,
        evals_hash=evalset.hash,
        dialect=evalset.dialect,
        eval_count=len(evalset.evals),
        judged=sum(len(e.expectations) for e in evalset.evals),
        structural_by_type=dict(sorted(by_type.items())),
        critical=sum(e.critical_count for e in evalset.evals),
        rubric_dimensions=sum(len(e.rubric) for e in evalset.evals),
        evals_with_rubric=sum(1 for e in evalset.evals if e.rubric),
        split=parts,
        power=_power(skill_dir, evalset, settings, len(parts.train)),
        eval_config=evalset.eval_config,
        warnings=[small] if small else [],
        carried=carried_as_is(skill_dir),
    )


def _power(skill_dir: Path, evalset: EvalSet, settings: Settings, train: int) -> str:
    _, later = train_counts(
        skill_dir,
        evalset.source,
        test_fraction=settings.evals.test_fraction,
        seed=settings.loop.seed,
    )
    waiting = (
        ""
        if later == train
        else " once the pending candidates in evals/candidates.json are accepted"
    )
    scope, few = settings.selection.scope, settings.selection.few_evals
    return (
        power.line(train, later, scope=scope, few_evals=few)
        + waiting
        + " (selection bench, optimizer/data/power.json)"
    )


def run(skill_dir: Path, evals_path: Path | None, settings: Settings) -> ValidationSummary:
    """Check SKILL.md, the folder and the evals; BadInput lists every problem of all three."""
    skill_dir = Path(skill_dir)
    problems = check_skill(skill_dir)
    evalset: EvalSet | None = None
    if skill_dir.is_dir() or evals_path is not None:
        try:
            evalset = load_evals(skill_dir, evals_path)
        except BadInput as exc:
            problems += [p for p in exc.problems if p not in problems]
    triggers = skill_dir / trigger.TRIGGER_FILE
    if triggers.exists():  # optional: only `run --target description` needs it
        try:
            trigger.load(skill_dir)
        except BadInput as exc:
            problems += [p for p in exc.problems if p not in problems]
    # The rule of `optimizer run`: a placeholder left is bad input, said beside any other problem.
    fix = "replace each with your own task or check (evals/README.md says how), then validate again"
    todo = placeholder_sentence(evalset.source, fix) if evalset is not None else None
    if todo:
        problems.append(todo)
    if problems or evalset is None:
        raise BadInput(*problems)
    return _summarise(skill_dir, evalset, settings)


def render(summary: ValidationSummary) -> str:
    """The summary as a few aligned lines for a terminal."""
    s = summary
    structural = sum(s.structural_by_type.values())
    kinds = ", ".join(f"{t} {n}" for t, n in s.structural_by_type.items()) or "none"
    config = (
        ", ".join(f"{k}={json.dumps(v)}" for k, v in s.eval_config.items())
        or "(none; config.toml decides)"
    )
    split_line = (
        f"train {len(s.split.train)} {s.split.train}, test {len(s.split.test)} {s.split.test}"
    )
    rows = [
        ("skill", f"{s.skill_name}  (version {s.skill_hash}, {s.skill_dir})"),
        ("description", f"{s.description_length} characters (at most 1024)"),
        ("evals file", f"{s.evals_source}  (dialect {s.dialect}, hash {s.evals_hash})"),
        ("evals", str(s.eval_count)),
        ("judged", f"{s.judged} expectations"),
        ("structural", f"{structural} ({kinds}); {s.critical} critical"),
        ("rubric", f"{s.rubric_dimensions} dimensions over {s.evals_with_rubric} evals"),
        ("split", split_line),
        ("", s.split.note),
        ("power", s.power),
        ("eval_config", config),
        *([("carried", "as is: " + "; ".join(s.carried))] if s.carried else []),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    warned = "".join(f"warning: {w}\n" for w in s.warnings)
    return "OK: the skill and its evals are valid.\n" + "\n".join(lines) + "\n" + warned


def train_counts(
    skill_dir: Path, evals_path: Path | None, *, test_fraction: float, seed: int
) -> tuple[int, int]:
    """(train evals now, train evals once every pending candidate is accepted): what `validate`,
    `status` and the report turn into the power line."""
    evalset = load_evals(skill_dir, evals_path)
    parts = split(evalset, test_fraction=test_fraction, seed=seed)
    found = placement.read_candidates(evalset.source.parent / placement.CANDIDATES_FILE)
    waiting = [c for c in (found.candidates if found else []) if c.status == "pending"]
    added = sum(
        1
        for c in waiting
        if c.kind == "new_eval"
        and placement.side(c.eval.prompt, test_fraction=test_fraction, seed=seed) == "train"
    )
    dropped = len(
        {c.target_eval_id for c in waiting if c.kind == "drop" and c.target_eval_id in parts.train}
    )
    return len(parts.train), len(parts.train) + added - dropped
