"""The checks of one eval that the schema cannot make, each a sentence that says what to fix:
an empty prompt, no expectation of any kind, input files that are absolute, leave the skill
folder or are missing, regexes that do not compile, blank scripts, ids and names that repeat,
rubric dimensions without their 1, 3 and 5 anchors."""

from __future__ import annotations

import re
from pathlib import Path

from optimizer.inputs.explain import short
from optimizer.schemas import JsonObject

REQUIRED_ANCHORS = ("1", "3", "5")
_EXPECTATION_KEYS = ("expectations", "assertions", "structural_expectations", "quality_rubric")


def _file_problems(source: Path, skill_dir: Path, where: str, rel: object) -> list[str]:
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


def semantic_problems(source: Path, skill_dir: Path, i: int, raw: JsonObject) -> list[str]:
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
        problems += _repeats(
            source, f"{at}.quality_rubric", rubric, "dimensions", "name", "rubric dimension"
        )
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


def _repeats(source: Path, at: str, raw: JsonObject, key: str, field: str, what: str) -> list[str]:
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
