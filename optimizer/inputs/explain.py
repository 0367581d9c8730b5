"""One sentence per problem in an evals file: the file, the JSON path an author reads
(evals[2].files[0]), what is wrong and the fix, made from pydantic's errors. Never a traceback."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NotRequired, get_args

from typing_extensions import ReadOnly, TypedDict

from optimizer.schemas import (
    STRUCTURAL_TYPES,
    EvalConfig,
    EvalRaw,
    Json,
    RubricDimension,
    StructuralExpectation,
)


class SchemaError(TypedDict):
    """One schema error as explain() reads it: pydantic's ErrorDetails, or a made one that has
    only a type and a location."""

    type: ReadOnly[str]
    loc: ReadOnly[tuple[int | str, ...]]
    msg: ReadOnly[NotRequired[str]]
    input: ReadOnly[NotRequired[object]]
    ctx: ReadOnly[NotRequired[Mapping[str, Json]]]


_STRUCTURAL_KEYS = sorted(
    {k for model in get_args(get_args(StructuralExpectation)[0]) for k in model.model_fields}
)


def json_path(loc: Iterable[int | str]) -> str:
    """A pydantic location as the JSON path an author reads: evals[2].files[0]."""
    out = ""
    parts = list(loc)
    for i, part in enumerate(parts):
        # A discriminated union puts the member's tag into the location; the file has no such key.
        if (
            isinstance(part, str)
            and part in STRUCTURAL_TYPES
            and i >= 2
            and parts[i - 2] == "structural_expectations"
        ):
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def fields_at(parent: tuple[int | str, ...]) -> list[str]:
    """The keys allowed in the object at `parent`, to suggest the one an unknown key meant."""
    names = [p for p in parent if isinstance(p, str) and p not in STRUCTURAL_TYPES]
    last = names[-1] if names else ""
    if not parent:
        return ["skill_name", "eval_config", "evals"]
    fields = {
        "eval_config": EvalConfig.model_fields,
        "evals": EvalRaw.model_fields,
        "structural_expectations": _STRUCTURAL_KEYS,
        "quality_rubric": ["dimensions"],
        "dimensions": RubricDimension.model_fields,
        "assertions": ["id", "text"],
    }.get(last, [])
    return list(fields)


def explain(source: Path, prefix: tuple[int | str, ...], err: SchemaError) -> str:
    """One sentence for one schema error: the file, the JSON path, what is wrong, the fix."""
    loc = (*prefix, *err["loc"])
    where = json_path(loc)
    kind = err["type"]
    got = err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return f"{source}: {where} is missing; add it."
    if kind == "extra_forbidden":
        known = fields_at(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.5)
        hint = f"did you mean '{close[0]}'?" if close else f"use one of {', '.join(known)}."
        return f"{source}: {where} is not a known field; {hint}"
    if kind == "union_tag_invalid":
        return (
            f"{source}: {where}.type '{ctx.get('tag')}' is not a structural expectation type; "
            f"use one of {', '.join(STRUCTURAL_TYPES)}."
        )
    if kind == "union_tag_not_found":
        return f"{source}: {where} has no 'type'; add one of {', '.join(STRUCTURAL_TYPES)}."
    if kind == "literal_error" and loc[-1] == "operator":
        return f"{source}: {where} is {short(got)}, not a file_count operator; use one of {ctx.get('expected')}."
    if kind == "string_too_short" and loc[-1] == "script":
        return f"{source}: {where} is empty; give the bash command to run (exit 0 = pass)."
    if kind == "greater_than" and loc[-1] == "weight":
        return f"{source}: {where} is {short(got)}; a rubric weight must be greater than 0."
    if kind == "value_error":
        message = str(ctx.get("error") or err["msg"])
        return f"{source}: {where}: {message}."
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"{source}: {where} is {short(got)}; write a whole number such as 1, without quotes."
    if kind.endswith("_type"):
        expected = kind.removesuffix("_type").replace("model", "object").replace("dict", "object")
        return (
            f"{source}: {where} is {short(got)}, not a {expected}; write a JSON {expected} there."
        )
    return f"{source}: {where} is {short(got)}: {err['msg'].lower()}; fix the value."
