"""`optimizer evals suggest RUN_DIR`: a run's eval feedback (eval_feedback_aggregate.json, the
analyst's notes in it) and the evals themselves turned into candidates. Never edits evals.json."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path

from pydantic import ValidationError

from optimizer.errors import BadInput
from optimizer.grow import checks
from optimizer.grow.candidates import candidate_id
from optimizer.grow.rewriting import Ask, Rewriter
from optimizer.inputs import redact
from optimizer.inputs.evals import Eval, EvalSet, load_evals
from optimizer.schemas import (
    AggregateSuggestion,
    Candidate,
    CandidateEval,
    CandidateOrigin,
    EvalFeedbackAggregate,
)
from optimizer.store import runs
from optimizer.store.files import Workspace

_EVAL_NAMED = re.compile(r"\bEval (\d+)\b")
_NO_CHECK = re.compile(
    r"^(eval \d+:\s*)?((nothing|no (assertion|expectation|eval|check)s?) (checks?|verif\w*|covers?|"
    r"tests?)\s*(whether|that|if)?\s*)?",
    re.IGNORECASE,
)
# A rewrite the grader or analyst wrote out in quotes ("better: 'The summary names the peak'").
_QUOTED = re.compile(r"[\"“]([^\"”]{12,240})[\"”]|(?<!\w)'([^']{12,240})'(?!\w)")
# Words that introduce a proposed wording; a quote without one is more likely the output's text.
_PROPOSES = re.compile(
    r"\b(better|instead|rather|rewrite|rephrase|replace|sharpen|e\.g|for example|such as|like|"
    r"try|suggest\w*|should read|could read|would be)\b[^\"“']{0,30}$",
    re.IGNORECASE,
)
# How a grading names a structural check ("S1: The report file was written"): evals.json's
# structural_expectations, which a candidate does not edit.
_STRUCTURAL = re.compile(r"^S\d+: ")
SAME_TASK = (
    0.9  # prompts this alike (difflib ratio, whitespace folded) with the same files: one task
)


@dataclass(frozen=True)
class Suggested:
    skill_dir: Path
    found: list[Candidate]
    # Expectations no output could fail, for which nothing proposed a rewrite: named to the user.
    unrewritten: list[str] = field(default_factory=list)
    # The run's suggestions no candidate comes from (an expectation every output passes, a flaky
    # one, a structural check, a failed run): notes the report lists for the user to read.
    notes: int = 0


@dataclass
class _Raised:
    """Everything the run said about one expectation text (or one missing check)."""

    text: str
    gradings: int = 0
    evals: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def add(self, frequency: int, evals: list[int], reason: str) -> None:
        self.gradings += frequency
        self.evals += [e for e in evals if e not in self.evals]
        self.reasons += [reason] if reason not in self.reasons else []

    def said(self) -> str:
        where = ", ".join(str(e) for e in sorted(self.evals))
        return (
            f"raised in {_count(self.gradings, 'grading')} of eval{'s' if len(self.evals) > 1 else ''} "
            f"{where}: {_clip(self.reasons[0])}"
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def from_run(run_dir: Path, skill: Path | None, rewrite: Rewriter | None = None) -> Suggested:
    """The suggestions, one per expectation the run raised (then the added checks, then the
    duplicates), each a checkable expectation; never the run's own diagnosis as eval text. The
    rewrites are the graders' or the analyst's own, else (with `rewrite`) a model's."""
    ws = Workspace(run_dir)
    skill_dir = skill or _skill_of(ws)
    path = ws.feedback_aggregate
    if not path.is_file():
        raise BadInput(
            f"{path}: missing; the run writes it after its first iteration, so let the "
            f"run go on (`optimizer resume {run_dir}`) and suggest again."
        )
    try:
        aggregate = EvalFeedbackAggregate.model_validate(
            json.loads(path.read_text(encoding="utf-8"))
        )
    except (ValueError, ValidationError) as exc:
        raise BadInput(
            f"{path}: not a valid eval_feedback_aggregate.json "
            f"({str(exc).splitlines()[0]}); `optimizer check-artifact {path}` says more."
        ) from None
    evalset = load_evals(skill_dir)
    origin = CandidateOrigin(source="run", file=str(path), time=_started(ws))
    train = _train_of(ws, evalset)
    raised: dict[str, _Raised] = {}
    missing: dict[str, _Raised] = {}
    for item in aggregate.suggestions:
        reason = redact.text(item.reason)
        if item.assertion is None:
            check = _missing_check(item, reason, train)
            if check:
                named = _EVAL_NAMED.search(reason)
                base = int(named.group(1)) if named and int(named.group(1)) in train else train[0]
                missing.setdefault(check, _Raised(check)).add(item.frequency, [base], reason)
            continue
        targets = [e.id for e in _targets(item, evalset)]
        if targets:
            text = item.assertion
            raised.setdefault(text, _Raised(text)).add(
                item.frequency, targets, f"{reason} {redact.text(item.action)}".strip()
            )
    rewrites = {g.text: (r, "heuristics") for g in raised.values() if (r := _proposed(g))}
    vague = [g for g in raised.values() if g.text not in rewrites and not checks.checkable(g.text)]
    if rewrite is not None and vague:
        asks = [_ask(f"e{n}", g, evalset) for n, g in enumerate(vague, 1)]
        drafted = rewrite.call(skill_dir, asks)
        rewrites |= {a.text: (drafted[a.id], rewrite.label) for a in asks if a.id in drafted}
    found = [
        _sharpen(g, *rewrites[g.text], evalset, origin)
        for g in raised.values()
        if g.text in rewrites
    ]
    unrewritten = [
        f"'{redact.text(g.text)}' (eval {min(g.evals)})" for g in vague if g.text not in rewrites
    ]
    found += [_add_check(group, evalset, origin) for group in missing.values()]
    found += duplicates(evalset, origin)
    notes = sum(
        not becomes_candidate(i.assertion, i.reason, getattr(i, "source", None))
        for i in aggregate.suggestions
    )
    return Suggested(skill_dir, found, unrewritten, notes)


def _skill_of(ws: Workspace) -> Path:
    row = runs.read(ws.state_db) if ws.state_db.is_file() else None
    folder = Path(row.skill_dir) if row and row.skill_dir else None
    if folder is None or not folder.is_dir():
        raise BadInput(
            f"{ws.root}: the run does not name a skill folder that still exists; pass "
            "--skill SKILL_DIR."
        )
    return folder


def _train_of(ws: Workspace, evalset: EvalSet) -> list[int]:
    """The run's train evals that the skill folder still holds (all of them without a state.db)."""
    row = runs.read(ws.state_db) if ws.state_db.is_file() else None
    train = row.split.get("train") if row else None
    ids = sorted(evalset.ids)
    return [i for i in ids if i in train] if isinstance(train, list) else ids


def _started(ws: Workspace) -> str:
    row = runs.read(ws.state_db) if ws.state_db.is_file() else None
    return (row.started_at if row else None) or ""


def _targets(item: AggregateSuggestion, evalset: EvalSet) -> list[Eval]:
    named = _EVAL_NAMED.search(item.reason)
    carrying = [e for e in evalset.evals if item.assertion in e.expectations]
    if named:
        carrying = [e for e in carrying if e.id == int(named.group(1))]
    return sorted(carrying, key=lambda e: e.id)


def _missing_check(item: AggregateSuggestion, reason: str, train: list[int]) -> str | None:
    """A failure mode no expectation checks, as the check to add; the analyst's own notes without
    one (errors, a skill that hurts) are about runs, not about a missing check."""
    if getattr(item, "source", None) == "analyst" or not train:
        return None
    check = _NO_CHECK.sub("", reason).strip().rstrip(".")
    if not check:
        return None
    check = check[:1].upper() + check[1:]
    # "the units" names what to check, not a check: said as the answer stating it.
    return check if checks.checkable(check) else f"The answer states {check[:1].lower()}{check[1:]}"


def _proposed(group: _Raised) -> str | None:
    """A rewrite the graders or the analyst wrote out themselves, checkable and new."""
    return next((r for reason in group.reasons if (r := _offered(reason, group.text))), None)


def _offered(reason: str, text: str) -> str | None:
    for found in _QUOTED.finditer(reason):
        said = (found.group(1) or found.group(2)).strip().rstrip(".")
        offered = _PROPOSES.search(reason[max(0, found.start() - 40) : found.start()])
        if offered and said != text and said[:1].isupper() and checks.checkable(said):
            return said
    return None


def becomes_candidate(assertion: str | None, reason: str, source: str | None) -> bool:
    """Whether `evals suggest` can turn one suggestion of eval_feedback_aggregate.json into a
    candidate: a vague expectation of an eval (rewritten by the graders' words, else with
    --provider by a model) or a failure mode no expectation checks. The rest (an expectation every
    output passes, a flaky one, a structural check, a run that failed) are notes for the user."""
    if assertion is None:
        return source != "analyst" and bool(_NO_CHECK.sub("", reason).strip())
    if _STRUCTURAL.match(assertion):
        return False
    return not checks.checkable(assertion) or _offered(reason, assertion) is not None


def _ask(key: str, group: _Raised, evalset: EvalSet) -> Ask:
    target = evalset.by_id(min(group.evals))
    return Ask(
        id=key,
        text=redact.text(group.text),
        prompt=redact.text(target.prompt),
        expected_output=redact.text(target.expected_output),
        others=[redact.text(e) for e in target.expectations if e != group.text],
        reasons=[_clip(r, 300) for r in group.reasons],
    )


def _sharpen(
    group: _Raised, rewrite: str, by: str, evalset: EvalSet, origin: CandidateOrigin
) -> Candidate:
    """The rewrite of an expectation no output could fail, or of one whose graders proposed a
    sharper wording; a precise expectation ("at most 150 words") is never called vague."""
    target = evalset.by_id(min(group.evals))
    return Candidate(
        id=candidate_id("run", "sharpen", group.text),
        kind="sharpen",
        origin=origin,
        target_eval_id=target.id,
        replaces=redact.text(group.text),
        eval=CandidateEval(name=target.name, expectations=[redact.text(rewrite)]),
        reason=group.said(),
        drafted_by=by,
    )


def _add_check(group: _Raised, evalset: EvalSet, origin: CandidateOrigin) -> Candidate:
    # A check on a train eval where the runs showed it, not a twin of that eval: a twin placed by
    # its own hash could put one task on both sides of the split.
    base = evalset.by_id(group.evals[0])
    return Candidate(
        id=candidate_id("run", "add_check", group.text),
        kind="add_check",
        origin=origin,
        target_eval_id=base.id,
        eval=CandidateEval(name=base.name, expectations=[group.text]),
        reason=f"no expectation checks it; {group.said()}",
    )


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _folded(text: str) -> str:
    return " ".join(text.lower().split())


def duplicates(evalset: EvalSet, origin: CandidateOrigin) -> list[Candidate]:
    """The later of two evals that ask the same task of the same files: one to drop."""
    out: list[Candidate] = []
    ordered = sorted(evalset.evals, key=lambda e: e.id)
    dropped: set[int] = set()
    for i, first in enumerate(ordered):
        for later in ordered[i + 1 :]:
            if (
                later.id in dropped
                or first.id in dropped
                or sorted(first.files) != sorted(later.files)
            ):
                continue
            ratio = SequenceMatcher(None, _folded(first.prompt), _folded(later.prompt)).ratio()
            if ratio >= SAME_TASK:
                dropped.add(later.id)
                out.append(
                    Candidate(
                        id=candidate_id("run", "drop", str(later.id), later.prompt),
                        kind="drop",
                        origin=origin,
                        target_eval_id=later.id,
                        eval=CandidateEval(name=later.name, prompt=later.prompt),
                        reason=f"asks what eval {first.id} asks ({ratio:.0%} alike, same files); "
                        "a duplicate adds runs, not evidence",
                    )
                )
    return out
