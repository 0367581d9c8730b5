"""evals.json in any seed dialect -> one normalised EvalSet with a content hash; the train/test split.
Never accept a check that cannot run, and never stop at the first problem: report them all at once."""

from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from optimizer.errors import BadInput
from optimizer.inputs import placement
from optimizer.inputs.eval_checks import semantic_problems
from optimizer.inputs.evalset import Eval, EvalSet
from optimizer.inputs.explain import explain, short
from optimizer.inputs.placement import Split
from optimizer.inputs.skillmd import SKILL_FILE, parse_skill_md
from optimizer.schemas import EvalConfig, EvalRaw, Json, JsonObject, detect_evals_dialect

EVALS_FILE = Path("evals") / "evals.json"
MAX_BYTES = 5 * 1024 * 1024
MIN_EVALS_FOR_TEST = 4


def _read(path: Path) -> tuple[Any, list[str]]:
    """The JSON value of the file, or the problems that stop any further check."""
    if not path.exists():
        return None, [f"{path}: missing; write the evals there or pass --evals PATH."]
    if not path.is_file():
        return None, [f"{path}: not a file; pass the evals.json file itself."]
    size = path.stat().st_size
    if size > MAX_BYTES:
        return None, [
            f"{path}: {size} bytes is over the {MAX_BYTES // (1024 * 1024)} MB limit; keep inputs in "
            "evals/files/ and list them in 'files' instead of inlining them."
        ]
    data = path.read_bytes()
    if b"\0" in data:
        return None, [f"{path}: a binary file, not JSON text; point to the evals.json text file."]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, [f"{path}: not UTF-8 text; save it as UTF-8 JSON."]
    if not text.strip():
        return None, [
            f'{path}: empty; write {{"skill_name": "...", "evals": [...]}} with at least one eval.'
        ]
    try:
        return json.loads(text), []
    except json.JSONDecodeError as exc:
        return None, [
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); fix the syntax there."
        ]


def _skill_md_name(skill_dir: Path) -> str | None:
    """The SKILL.md name when it can be read; SKILL.md's own problems are check_skill's to report."""
    try:
        return parse_skill_md((skill_dir / SKILL_FILE).read_text(encoding="utf-8")).name or None
    except (OSError, UnicodeDecodeError, BadInput):
        return None


def _normalise(raw: EvalRaw) -> Eval:
    return Eval(
        id=raw.id,
        name=raw.name or f"eval-{raw.id}",
        prompt=raw.prompt,
        expected_output=raw.expected_output or "",
        files=list(raw.files),
        expectations=raw.expectation_texts,
        structural=list(raw.structural_expectations),
        rubric=list(raw.quality_rubric.dimensions) if raw.quality_rubric else [],
    )


def _hash(skill_name: str, evals: list[Eval], skill_dir: Path) -> str:
    """sha256 of the normalised content and the bytes of every input file: two files that ask the
    same thing hash alike whatever their dialect, and an edited input file changes the hash (the
    baseline runs are reused per hash). eval_config is left out: it is settings, not content."""
    inputs = sorted({f for e in evals for f in e.files})
    payload = {
        "skill_name": skill_name,
        "evals": [e.model_dump(mode="json") for e in evals],
        "inputs": {f: hashlib.sha256((skill_dir / f).read_bytes()).hexdigest() for f in inputs},
    }
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def load_evals(skill_dir: Path, evals_path: Path | None = None) -> EvalSet:
    """Load and check an evals file of any dialect (default SKILL_DIR/evals/evals.json); BadInput
    lists every problem found. Input file paths are relative to the skill folder."""
    skill_dir = Path(skill_dir)
    source = Path(evals_path) if evals_path is not None else skill_dir / EVALS_FILE
    data = _read_object(source)
    evals_raw, problems = _evals_list(source, data)
    problems += _unknown_keys(source, data)
    skill_name, found = _skill_name(source, skill_dir, data)
    problems += found
    eval_config, found = _eval_config(source, data)
    problems += found
    parsed, seen, found = _parse_evals(source, skill_dir, evals_raw)
    problems += found
    if problems:
        raise BadInput(*problems)

    evals = [_normalise(e) for e in parsed]
    return EvalSet(
        skill_name=skill_name,
        dialect=detect_evals_dialect(data),
        eval_config=dict(eval_config),
        evals=evals,
        hash=_hash(skill_name, evals, skill_dir),
        source=source,
        grown=tuple(i for i in placement.accepted_ids(source.parent) if i in seen),
    )


def _read_object(source: Path) -> JsonObject:
    """The file's top-level JSON object; BadInput when it cannot be read or is not an object,
    since no other check can run then."""
    data, problems = _read(source)
    if problems:
        raise BadInput(*problems)
    if not isinstance(data, dict):
        raise BadInput(
            f"{source}: the top level is a JSON {type(data).__name__}, not an object; write "
            '{"skill_name": "...", "evals": [...]}.'
        )
    return data


def _evals_list(source: Path, data: JsonObject) -> tuple[list[Json], list[str]]:
    """(the items of 'evals', its problems): an absent or non-list 'evals' reads as no items,
    so that the other checks still run and report."""
    problems: list[str] = []
    evals_raw = data.get("evals")
    if not isinstance(evals_raw, list):
        state = "missing" if "evals" not in data else f"a {type(evals_raw).__name__}, not a list"
        problems.append(
            f'{source}: evals is {state}; write "evals": [ {{...}}, ... ] with one object per eval.'
        )
        evals_raw = []
    elif not evals_raw:
        problems.append(f"{source}: evals is an empty list; add at least one eval.")
    return evals_raw, problems


def _unknown_keys(source: Path, data: JsonObject) -> list[str]:
    """One problem per top-level key no dialect has, worded as the schema's own errors are."""
    return [
        explain(source, (), {"type": "extra_forbidden", "loc": (key,)})
        for key in data
        if key not in ("skill_name", "eval_config", "evals")
    ]


def _skill_name(source: Path, skill_dir: Path, data: JsonObject) -> tuple[str, list[str]]:
    """(skill_name, or "" when it is not usable text; its problems): it must be text and, when
    SKILL.md can be read, the name SKILL.md gives."""
    skill_name = data.get("skill_name")
    if not isinstance(skill_name, str) or not skill_name.strip():
        return "", [f"{source}: skill_name is missing or not text; write the SKILL.md name there."]
    md_name = _skill_md_name(skill_dir)
    if md_name is not None and md_name != skill_name:
        return skill_name, [
            f"{source}: skill_name is '{skill_name}' but {SKILL_FILE} names the skill "
            f"'{md_name}'; make them the same."
        ]
    return skill_name, []


def _eval_config(source: Path, data: JsonObject) -> tuple[JsonObject, list[str]]:
    """(eval_config as written, or empty when absent or not an object; its schema problems)."""
    eval_config = data.get("eval_config")
    problems: list[str] = []
    if eval_config is not None:
        try:
            EvalConfig.model_validate(eval_config)
        except ValidationError as exc:
            problems += [explain(source, ("eval_config",), e) for e in exc.errors()]
    return (eval_config if isinstance(eval_config, dict) else {}), problems


def _parse_evals(
    source: Path, skill_dir: Path, evals_raw: list[Json]
) -> tuple[list[EvalRaw], dict[int, int], list[str]]:
    """(the evals the schema accepts, {id: position} of the integer ids, every problem of the
    evals): each eval is checked in full, its problems named by its id, and a repeated id found."""
    parsed: list[EvalRaw] = []
    seen: dict[int, int] = {}
    problems: list[str] = []
    for i, raw in enumerate(evals_raw):
        if not isinstance(raw, dict):
            problems.append(
                f"{source}: evals[{i}] is {short(raw)}, not an object; write one object per eval."
            )
            continue
        found: list[str] = []
        try:
            parsed.append(EvalRaw.model_validate(raw))
        except ValidationError as exc:
            found += [explain(source, ("evals", i), e) for e in exc.errors()]
        found += semantic_problems(source, skill_dir, i, raw)
        problems += [_named(p, source, raw.get("id")) for p in found]
        eval_id = raw.get("id")
        if isinstance(eval_id, int) and not isinstance(eval_id, bool):
            if eval_id in seen:
                problems.append(
                    f"{source}: evals[{i}].id {eval_id} repeats the id of evals[{seen[eval_id]}]; "
                    "give every eval its own integer id."
                )
            else:
                seen[eval_id] = i
    return parsed, seen, problems


# ---------------------------------------------------------------------------
# Split
# ---------------------------------------------------------------------------


def sealed_count(n: int, test_fraction: float) -> int:
    """How many evals the sealed test set gets: none under MIN_EVALS_FOR_TEST, else the rounded
    fraction, at least one, and never more than half (selection needs train evals to compare on)."""
    if n < MIN_EVALS_FOR_TEST or test_fraction <= 0:
        return 0
    return min(max(1, math.floor(n * test_fraction + 0.5)), n // 2)


def split(evalset: EvalSet, *, test_fraction: float, seed: int) -> Split:
    """Seeded, stratified train/test split. Strata are the kinds of checks an eval carries
    (structural expectations, a rubric, both, or judged expectations only), so the sealed test
    set measures the same mix the loop optimises; each stratum gets its share of the test set by
    largest remainder, and the evals within a stratum are drawn with random.Random(seed). Evals
    appended by `optimizer evals` (evalset.grown) are placed by their own hash on top, so adding
    evals never moves one that was already placed."""
    if evalset.grown:
        base = evalset.model_copy(
            update={"evals": [e for e in evalset.evals if e.id not in evalset.grown], "grown": ()}
        )
        return placement.place(
            split(base, test_fraction=test_fraction, seed=seed),
            [evalset.by_id(i) for i in evalset.grown],
            test_fraction=test_fraction,
            seed=seed,
        )
    ids = sorted(evalset.ids)
    n_test = sealed_count(len(ids), test_fraction)
    if n_test == 0:
        why = (
            f"fewer than {MIN_EVALS_FOR_TEST} evals ({len(ids)})"
            if len(ids) < MIN_EVALS_FOR_TEST
            else "test_fraction is 0"
        )
        return Split(
            train=ids, test=[], note=f"no sealed test set: {why}; every eval is used for training."
        )
    rng = random.Random(seed)
    strata: dict[str, list[int]] = {}
    for e in sorted(evalset.evals, key=lambda e: e.id):
        strata.setdefault(e.stratum, []).append(e.id)
    names = sorted(strata)
    for name in names:
        rng.shuffle(strata[name])
    quotas = {name: n_test * len(strata[name]) / len(ids) for name in names}
    take = {name: math.floor(q) for name, q in quotas.items()}
    # Largest remainder; ties go to a seeded order, not to the alphabet.
    order = sorted(names, key=lambda name: (-(quotas[name] - take[name]), rng.random()))
    for name in order[: n_test - sum(take.values())]:
        take[name] += 1
    test = sorted(i for name in names for i in strata[name][: take[name]])
    train = [i for i in ids if i not in test]
    mix = ", ".join(f"{take[name]} of {len(strata[name])} {name}" for name in names)
    note = f"{len(test)} of {len(ids)} evals sealed for the final test (stratified: {mix}; seed {seed})."
    return Split(train=train, test=test, note=note)


def _named(problem: str, source: Path, eval_id: object) -> str:
    """A problem of one eval names it by its id too, as status and the lineage do: the author
    of 'evals[2]' reads '(eval id 3)', never only a position counted from 0."""
    if not isinstance(eval_id, int) or isinstance(eval_id, bool):
        return problem
    return problem.replace(f"{source}: ", f"{source} (eval id {eval_id}): ", 1)
