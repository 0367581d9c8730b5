"""Check any seed JSON file against its model and name the form it follows (`check-artifact`).
Never modify the file checked, and never let a known misnaming pass as a harmless extra field."""

from __future__ import annotations

import difflib
import json
import re
import types
from pathlib import Path
from typing import NoReturn, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from optimizer import schemas as s
from optimizer.errors import BadInput

MAX_BYTES = 10 * 1024 * 1024

# file name -> kind; comparison-<k>.json is matched separately
FILE_KINDS = {
    "evals.json": "evals",
    "eval_metadata.json": "eval_metadata",
    "grading.json": "grading",
    "metrics.json": "metrics",
    "timing.json": "timing",
    "structural.json": "structural",
    "benchmark.json": "benchmark",
    "comparison.json": "comparison",
    "analysis.json": "analysis",
    "history.json": "history",
    "feedback.json": "feedback",
    "eval_feedback_aggregate.json": "eval_feedback_aggregate",
    "summary.json": "summary",
}
KINDS = tuple(FILE_KINDS.values())

# The model each kind is written with (the full form); history also has HistoryVersions.
WRITE_MODELS: dict[str, type[BaseModel]] = {
    "evals": s.EvalsFileRaw,
    "eval_metadata": s.EvalMetadata,
    "grading": s.Grading,
    "metrics": s.Metrics,
    "timing": s.Timing,
    "structural": s.Structural,
    "benchmark": s.Benchmark,
    "comparison": s.Comparison,
    "analysis": s.Analysis,
    "history": s.History,
    "feedback": s.Feedback,
    "eval_feedback_aggregate": s.EvalFeedbackAggregate,
    "summary": s.MorningSummary,
}

# Why a form is refused under --strict: the viewer reads only the full forms.
_NOT_STRICT = {
    s.CompactGrading: "this is seed 001's compact grading (top-level 'pass_rate', string 'claims'); "
    "--strict needs seed 002's full form with 'summary' {passed, failed, total, pass_rate}, "
    "which the viewer reads",
    s.CompactBenchmark: "this is seed 001's compact benchmark ('config' and 'pass_rate' on each run, "
    "'summaries', 'deltas'); --strict needs seed 002's full form with runs[].configuration, "
    "runs[].result and run_summary, which the viewer reads",
    s.SimpleComparison: "this is seed 001's simple comparison (winner 'output_a'/'output_b', "
    "'scores'); --strict needs seed 002's rubric form with winner 'A'/'B'/'TIE', 'rubric' "
    "and 'output_quality'",
    s.BenchmarkFragment: "this holds only 'run_summary' (the seed 004 excerpt); --strict needs the "
    "whole benchmark.json with 'metadata' and 'runs', which the viewer reads",
}


class ArtifactReport(BaseModel):
    path: str
    kind: str
    form: str
    ok: bool
    problems: list[str] = []


def kind_from_name(path: Path) -> str | None:
    """The kind a file name implies; a prefix such as `002_grading.json` is allowed."""
    name = path.name.lower()
    if re.fullmatch(r"(.*[_.-])?comparison-\d+\.json", name):
        return "comparison"
    for file_name in sorted(FILE_KINDS, key=len, reverse=True):
        if name == file_name or (name.endswith(file_name) and name[-len(file_name) - 1] in "_-."):
            return FILE_KINDS[file_name]
    return None


def read_artifact(path: Path) -> s.Json:
    """The parsed JSON of `path`; anything unreadable is BadInput with one sentence."""
    if not path.exists():
        raise BadInput(f"{path}: no such file; check the path.")
    if not path.is_file():
        raise BadInput(f"{path} is not a regular file; give the path of a JSON file.")
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise BadInput(
                f"{path} is {size / 2**20:.1f} MB, over the 10 MB limit for an artifact; "
                "is it the right file?"
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"{path} cannot be read ({exc.strerror}); check its permissions.") from None
    if not raw.strip():
        raise BadInput(f"{path} is empty; expected a JSON object.")
    try:
        if b"\x00" in raw:
            raise UnicodeDecodeError("utf-8", raw, 0, 1, "NUL byte")
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInput(f"{path} is binary, not UTF-8 JSON text; is it the right file?") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
        ) from None
    except ValueError as exc:
        raise BadInput(f"{path} {exc}") from None
    except RecursionError:
        raise BadInput(f"{path} is nested too deeply to be an artifact.") from None


def _reject_constant(name: str) -> NoReturn:
    # The viewer parses with JavaScript's JSON.parse, which refuses these.
    raise ValueError(f"contains {name}, which JSON does not allow; write a number or null.")


def detect_form(kind: str, data: s.JsonObject) -> tuple[str, type[BaseModel]]:
    """The form `data` follows and the model to check it with."""
    if kind == "evals":
        label = {"expectations": "seed 002", "assertions": "seed 001", "extended": "seed 004"}
        dialect = s.detect_evals_dialect(data)
        return f"{dialect} ({label[dialect]})", s.EvalsFileRaw
    if kind == "eval_metadata":
        if "expectations" in data and "assertions" not in data:
            return "expectations", s.EvalMetadata
        return "assertions (seed 001)", s.EvalMetadata
    if kind == "grading":
        if "summary" not in data and "pass_rate" in data:
            return "compact (seed 001)", s.CompactGrading
        if "rubric_scores" in data or "rubric_summary" in data:
            return "extended (seed 004)", s.Grading
        return "full (seed 002)", s.Grading
    if kind == "timing":
        full = any(k.startswith(("executor_", "grader_")) for k in data)
        return ("full (seed 002)" if full else "core (seed 001)"), s.Timing
    if kind == "benchmark":
        if "run_summary" not in data and ("summaries" in data or "deltas" in data):
            return "compact (seed 001)", s.CompactBenchmark
        if set(data) == {"run_summary"}:
            return "run_summary fragment (seed 004)", s.BenchmarkFragment
        return (
            "extended (seed 004)" if _has_rubric_stats(data) else "full (seed 002)"
        ), s.Benchmark
    if kind == "comparison":
        simple = data.get("winner") in ("output_a", "output_b", "tie") or "scores" in data
        if simple and "rubric" not in data:
            return "simple (seed 001)", s.SimpleComparison
        return "rubric (seed 002)", s.Comparison
    if kind == "history":
        if "versions" in data and "iterations" not in data:
            return "versions (seed 001)", s.HistoryVersions
        return "iterations (seed 002)", s.History
    if kind == "summary":  # ours, not a seed format: the morning summary of a run
        return "morning summary", s.MorningSummary
    seed = {"structural": "004", "eval_feedback_aggregate": "004", "feedback": "001"}
    return f"full (seed {seed.get(kind, '002')})", WRITE_MODELS[kind]


def _has_rubric_stats(data: s.JsonObject) -> bool:
    summary = data.get("run_summary")
    if not isinstance(summary, dict):
        return False
    extra = ("rubric_normalized", "overall_efficiency", "consistency", "rubric_dimensions")
    return any(isinstance(c, dict) and any(k in c for k in extra) for c in summary.values())


def check_artifact(path: Path, kind: str | None = None, strict: bool = False) -> ArtifactReport:
    """Validate one file against its seed model; problems name the JSON path and the fix."""
    path = Path(path)
    if kind is None:
        kind = kind_from_name(path)
        if kind is None:
            raise BadInput(
                f"{path}: cannot tell the kind of artifact from its name; "
                f"pass --kind, one of: {', '.join(KINDS)}."
            )
    elif kind not in KINDS:
        raise BadInput(
            f"--kind {kind!r} is not a kind of artifact; use one of: {', '.join(KINDS)}."
        )
    data = read_artifact(path)
    if not isinstance(data, dict):
        problem = f"$: expected a JSON object, got {_json_type(data)}"
        return ArtifactReport(
            path=str(path), kind=kind, form="unknown", ok=False, problems=[problem]
        )
    form, model = detect_form(kind, data)
    problems = check_data(model, data)
    if strict and model in _NOT_STRICT:
        problems.insert(0, f"$: {_NOT_STRICT[model]}.")
    return ArtifactReport(path=str(path), kind=kind, form=form, ok=not problems, problems=problems)


def check_data(model: type[BaseModel], data: s.Json) -> list[str]:
    """Problems of `data` against `model`, misnamings first, each led by its JSON path."""
    misnamed: list[tuple[str, str]] = []
    clean = _strip_misnamed(model, data, "", misnamed)
    problems = [_misnamed_problem(p, right) for p, right in misnamed]
    # a field reported as misnamed is not reported again as missing
    covered = {f"{_parent(p)}.{right}".lstrip(".") for p, right in misnamed}
    try:
        model.model_validate(clean)
    except ValidationError as exc:
        vocabulary = _field_names(model)
        for err in exc.errors(include_url=False):
            p = _json_path(err["loc"], clean, final_is_field=err["type"] == "missing")
            if err["type"] == "missing" and p in covered:
                continue
            problems.append(_problem(p, err, vocabulary))
    return list(dict.fromkeys(problems))


def validate_for_write(kind_or_model: str | type[BaseModel], data: object) -> BaseModel:
    """The model instance `data` makes in the form we write; raises pydantic's ValidationError."""
    if isinstance(kind_or_model, str):
        model = WRITE_MODELS[kind_or_model]
        if kind_or_model == "history" and isinstance(data, dict) and "versions" in data:
            model = s.HistoryVersions
    else:
        model = kind_or_model
    return model.model_validate(data)


def render_report(report: ArtifactReport) -> str:
    head = f"{report.path}: {report.kind}, {report.form}: "
    if report.ok:
        return head + "ok"
    n = len(report.problems)
    return "\n".join(
        [head + f"{n} problem{'s' if n > 1 else ''}"] + [f"  {p}" for p in report.problems]
    )


# --- misnamings, checked explicitly because output models allow extra fields ----------------


def _strip_misnamed(
    model: type[BaseModel], data: s.Json, path: str, found: list[tuple[str, str]]
) -> s.Json:
    """A copy of `data` without misnamed keys (collected in `found`), so the rest still checks."""
    if not isinstance(data, dict):
        return data
    table: dict[str, str] = getattr(model, "misnamed", {})
    clean: dict[str, s.Json] = {}
    for key, value in data.items():
        if key in table:
            found.append((_join(path, key), table[key]))
            continue
        clean[key] = value
        field = model.model_fields.get(key)
        if field is None:
            continue
        sub, container = _submodel(field.annotation)
        here = _join(path, key)
        if sub is None:
            continue
        if container is list and isinstance(value, list):
            clean[key] = [
                _strip_misnamed(sub, v, f"{here}[{i}]", found) for i, v in enumerate(value)
            ]
        elif container is dict and isinstance(value, dict):
            clean[key] = {
                k: _strip_misnamed(sub, v, _join(here, k), found) for k, v in value.items()
            }
        elif container is None:
            clean[key] = _strip_misnamed(sub, value, here, found)
    return clean


def _submodel(annotation: object) -> tuple[type[BaseModel] | None, type | None]:
    """The single model inside an annotation, and whether it sits in a list or a dict."""
    ann = _drop_none(annotation)
    origin = get_origin(ann)
    container = None
    if origin in (list, dict):
        container = origin
        ann = _drop_none(get_args(ann)[-1])
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann, container
    return None, None


def _drop_none(annotation: object) -> object:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _misnamed_problem(path: str, right: str) -> str:
    problem = f"{path}: unknown field; did you mean '{right}'?"
    if "." in right:
        problem += f" (the viewer reads it nested under '{right.rsplit('.', 1)[0]}')"
    return problem


# --- pydantic errors as one line each ---------------------------------------------------


QUOTE = "'"


def _problem(path: str, err: ErrorDetails, vocabulary: set[str]) -> str:
    kind = err["type"]
    if kind == "missing":
        return f"{path}: required field is missing"
    if kind == "extra_forbidden":
        name = str(err["loc"][-1])
        close = difflib.get_close_matches(name, vocabulary, n=1, cutoff=0.75)
        hint = f"; did you mean '{close[0]}'?" if close else "; remove it or check its spelling"
        return f"{path}: unknown field{hint}"
    if kind == "union_tag_not_found":
        return f"{_join(path, err['ctx']['discriminator'].strip(QUOTE))}: required field is missing"
    if kind == "union_tag_invalid":
        tag, tags = err["ctx"]["tag"], err["ctx"]["expected_tags"]
        close = difflib.get_close_matches(tag, [t.strip(QUOTE + " ") for t in tags.split(",")], n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"use one of {tags}"
        return f"{_join(path, err['ctx']['discriminator'].strip(QUOTE))}: unknown '{tag}'; {hint}"
    msg = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    # echo only scalars: an object's whole text would bury the message
    if kind == "literal_error" or isinstance(value, dict | list) or "input" not in err:
        return f"{path}: {msg}"
    shown = json.dumps(value, ensure_ascii=False, default=str)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{path}: {msg} (got {shown})"


def _json_path(loc: tuple[int | str, ...], data: s.Json, final_is_field: bool) -> str:
    """`runs[1].result.tokens` from a pydantic location, skipping union member labels."""
    path, node = "", data
    for i, seg in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, list) and isinstance(seg, int) and 0 <= seg < len(node):
            path, node = f"{path}[{seg}]", node[seg]
        elif isinstance(node, dict) and seg in node:
            path, node = _join(path, str(seg)), node[seg]
        elif last and final_is_field:
            path = _join(path, str(seg))
        # anything else is a union member's label (a tag or a type name), not in the JSON
    return path or "$"


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _join(path: str, key: str) -> str:
    if not _PLAIN.fullmatch(key):
        return f"{path}[{json.dumps(key, ensure_ascii=False)}]"
    return f"{path}.{key}" if path else key


def _parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def _field_names(model: type[BaseModel], seen: set[type] | None = None) -> set[str]:
    seen = set() if seen is None else seen
    if model in seen:
        return set()
    seen.add(model)
    names = set(model.model_fields)
    for field in model.model_fields.values():
        for sub in _models_in(field.annotation):
            names |= _field_names(sub, seen)
    return names


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _json_type(value: object) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")
