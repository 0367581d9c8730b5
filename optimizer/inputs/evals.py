"""evals.json in any seed dialect -> one normalised EvalSet with a content hash; the train/test split.
Never accept a check that cannot run, and never stop at the first problem: report them all at once."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from optimizer.errors import BadInput
from optimizer.inputs import placement
from optimizer.inputs.explain import explain, short
from optimizer.inputs.placement import Split
from optimizer.inputs.skillmd import SKILL_FILE, parse_skill_md
from optimizer.schemas import (
    EvalConfig,
    EvalRaw,
    EvalsDialect,
    RubricDimension,
    StructuralExpectation,
    detect_evals_dialect,
)

EVALS_FILE = Path("evals") / "evals.json"
MAX_BYTES = 5 * 1024 * 1024
REQUIRED_ANCHORS = ("1", "3", "5")
MIN_EVALS_FOR_TEST = 4
_EXPECTATION_KEYS = ("expectations", "assertions", "structural_expectations", "quality_rubric")


class Eval(BaseModel):
    """One eval, the same shape whatever dialect it was written in."""

    model_config = ConfigDict(frozen=True)
    id: int
    name: str
    prompt: str
    expected_output: str = ""
    files: list[str] = []
    expectations: list[str] = []  # judged by the grader, as text
    structural: list[StructuralExpectation] = []
    rubric: list[RubricDimension] = []

    @property
    def critical_count(self) -> int:
        return sum(1 for s in self.structural if s.critical)

    @property
    def stratum(self) -> str:
        """What kind of checks the eval carries; the split keeps these kinds in proportion."""
        kinds = [k for k, has in (("structural", self.structural), ("rubric", self.rubric)) if has]
        return "+".join(kinds) or "judged"


class EvalSet(BaseModel):
    model_config = ConfigDict(frozen=True)
    skill_name: str
    dialect: EvalsDialect
    # As written in the file (keys that are absent stay absent): config.load(eval_config=...) layers it.
    eval_config: dict[str, Any] = {}
    evals: list[Eval]
    hash: str
    source: Path
    grown: tuple[int, ...] = ()  # appended by `optimizer evals` accept: placed by hash (placement.py)

    @property
    def ids(self) -> list[int]:
        return [e.id for e in self.evals]

    def by_id(self, eval_id: int) -> Eval:
        for e in self.evals:
            if e.id == eval_id:
                return e
        raise KeyError(eval_id)


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


def _file_problems(source: Path, skill_dir: Path, where: str, rel: Any) -> list[str]:
    if not isinstance(rel, str) or not rel.strip():
        return []  # the schema reports a value of the wrong type
    if rel.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", rel):
        return [
            f"{source}: {where} '{rel}' is an absolute path; give a path relative to the skill "
            "folder, e.g. evals/files/input.csv."
        ]
    root = skill_dir.resolve()
    # resolve() follows symbolic links, so a link that leaves the folder is caught here too.
    target = (skill_dir / rel).resolve()
    if not target.is_relative_to(root):
        return [
            f"{source}: {where} '{rel}' leads outside the skill folder; copy the file under "
            "evals/files/ and list that path."
        ]
    if not target.is_file():
        return [
            f"{source}: {where} '{rel}' does not exist in the skill folder; add the file or fix "
            "the path (relative to the skill folder)."
        ]
    return []


def _semantic_problems(source: Path, skill_dir: Path, i: int, raw: dict[str, Any]) -> list[str]:
    """Checks the schema cannot make: prompts, input files, regexes, anchors, scripts."""
    problems: list[str] = []
    at = f"evals[{i}]"
    prompt = raw.get("prompt")
    if isinstance(prompt, str) and not prompt.strip():
        problems.append(f"{source}: {at}.prompt is empty; write the task the executor should do.")
    if not any(raw.get(k) for k in _EXPECTATION_KEYS):
        problems.append(
            f"{source}: {at} has no expectation of any kind; add 'expectations' (strings), "
            "'structural_expectations' or a 'quality_rubric'."
        )
    files = raw.get("files")
    if isinstance(files, list):
        for j, rel in enumerate(files):
            problems += _file_problems(source, skill_dir, f"{at}.files[{j}]", rel)
    structural = raw.get("structural_expectations")
    for j, item in enumerate(structural if isinstance(structural, list) else []):
        if not isinstance(item, dict):
            continue
        where = f"{at}.structural_expectations[{j}]"
        regex = item.get("match_regex")
        if isinstance(regex, str):
            try:
                re.compile(regex)
            except re.error as exc:
                problems.append(
                    f"{source}: {where}.match_regex {short(regex)} does not compile ({exc}); "
                    "fix the Python regular expression."
                )
        script = item.get("script")
        if (
            item.get("type") == "custom_script"
            and isinstance(script, str)
            and script
            and not script.strip()
        ):
            problems.append(
                f"{source}: {where}.script is blank; give the bash command to run (exit 0 = pass)."
            )
    problems += _repeats(source, at, raw, "structural_expectations", "id", "structural expectation")
    problems += _repeats(source, at, raw, "assertions", "id", "assertion")
    rubric = raw.get("quality_rubric")
    dims = rubric.get("dimensions") if isinstance(rubric, dict) else None
    if isinstance(rubric, dict):
        problems += _repeats(source, f"{at}.quality_rubric", rubric, "dimensions", "name",
                             "rubric dimension")
    for j, dim in enumerate(dims if isinstance(dims, list) else []):
        if not isinstance(dim, dict):
            continue
        scoring = dim.get("scoring")
        if scoring is None or isinstance(scoring, dict):
            missing = [a for a in REQUIRED_ANCHORS if not str((scoring or {}).get(a, "")).strip()]
            if missing:
                problems.append(
                    f"{source}: {at}.quality_rubric.dimensions[{j}].scoring lacks anchor(s) "
                    f"{', '.join(repr(a) for a in missing)}; describe what scores 1, 3 and 5 look like."
                )
    return problems


def _repeats(source: Path, at: str, raw: dict[str, Any], key: str, field: str, what: str) -> list[str]:
    """Items of raw[key] whose `field` repeats an earlier item's: results, evidence and rubric
    scores are keyed by it, so a repeat would silently merge two checks into one."""
    items = raw.get(key)
    seen: dict[str, int] = {}
    problems = []
    for j, item in enumerate(items if isinstance(items, list) else []):
        value = item.get(field) if isinstance(item, dict) else None
        if not isinstance(value, str | int) or isinstance(value, bool):
            continue
        first = seen.setdefault(str(value), j)
        if first != j:
            eval_id = raw.get("id")
            which = f" (eval id {eval_id})" if isinstance(eval_id, int) else ""
            problems.append(
                f"{source}: {at}{which}.{key}[{j}].{field} {short(value)} repeats "
                f"{key}[{first}].{field}; give every {what} of an eval its own {field}."
            )
    return problems


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
    data, problems = _read(source)
    if problems:
        raise BadInput(*problems)
    if not isinstance(data, dict):
        raise BadInput(
            f"{source}: the top level is a JSON {type(data).__name__}, not an object; write "
            '{"skill_name": "...", "evals": [...]}.'
        )
    evals_raw = data.get("evals")
    if not isinstance(evals_raw, list):
        state = "missing" if "evals" not in data else f"a {type(evals_raw).__name__}, not a list"
        problems.append(
            f'{source}: evals is {state}; write "evals": [ {{...}}, ... ] with one object per eval.'
        )
        evals_raw = []
    elif not evals_raw:
        problems.append(f"{source}: evals is an empty list; add at least one eval.")

    for key in data:
        if key not in ("skill_name", "eval_config", "evals"):
            problems.append(explain(source, (), {"type": "extra_forbidden", "loc": (key,)}))
    skill_name = data.get("skill_name")
    if not isinstance(skill_name, str) or not skill_name.strip():
        problems.append(
            f"{source}: skill_name is missing or not text; write the SKILL.md name there."
        )
        skill_name = ""
    else:
        md_name = _skill_md_name(skill_dir)
        if md_name is not None and md_name != skill_name:
            problems.append(
                f"{source}: skill_name is '{skill_name}' but {SKILL_FILE} names the skill "
                f"'{md_name}'; make them the same."
            )
    eval_config = data.get("eval_config")
    if eval_config is not None:
        try:
            EvalConfig.model_validate(eval_config)
        except ValidationError as exc:
            problems += [explain(source, ("eval_config",), e) for e in exc.errors()]
        if not isinstance(eval_config, dict):
            eval_config = {}

    parsed: list[EvalRaw] = []
    seen: dict[int, int] = {}
    for i, raw in enumerate(evals_raw):
        if not isinstance(raw, dict):
            problems.append(
                f"{source}: evals[{i}] is {short(raw)}, not an object; write one object per eval."
            )
            continue
        try:
            parsed.append(EvalRaw.model_validate(raw))
        except ValidationError as exc:
            problems += [explain(source, ("evals", i), e) for e in exc.errors()]
        problems += _semantic_problems(source, skill_dir, i, raw)
        eval_id = raw.get("id")
        if isinstance(eval_id, int) and not isinstance(eval_id, bool):
            if eval_id in seen:
                problems.append(
                    f"{source}: evals[{i}].id {eval_id} repeats the id of evals[{seen[eval_id]}]; "
                    "give every eval its own integer id."
                )
            else:
                seen[eval_id] = i
    if problems:
        raise BadInput(*problems)

    evals = [_normalise(e) for e in parsed]
    return EvalSet(
        skill_name=skill_name,
        dialect=detect_evals_dialect(data),
        eval_config=dict(eval_config or {}),
        evals=evals,
        hash=_hash(skill_name, evals, skill_dir),
        source=source,
        grown=tuple(i for i in placement.accepted_ids(source.parent) if i in seen),
    )


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
        base = evalset.model_copy(update={"evals": [e for e in evalset.evals if e.id not in evalset.grown],
                                          "grown": ()})
        return placement.place(split(base, test_fraction=test_fraction, seed=seed),
                               [evalset.by_id(i) for i in evalset.grown], test_fraction=test_fraction, seed=seed)
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
