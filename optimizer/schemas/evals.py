"""evals.json (input) in its three dialects, seeds 002 (expectations), 001 (assertions) and 004
(extended), and eval_metadata.json beside each eval's runs."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, field_validator, model_validator

from optimizer.schemas.common import InputModel, JsonObject, OutputModel


class EvalConfig(InputModel):
    """Seed 004 `eval_config`; None means "not set here", so settings can layer over it."""

    runs_per_eval: int | None = Field(default=None, ge=1)
    structural_gate: bool | None = None
    judge_model: str | None = None
    baseline_comparison: bool | None = None


class Assertion(InputModel):
    """Seed 001 evals/eval_metadata assertion."""

    id: str
    text: str


StructuralType = Literal[
    "file_exists", "file_contains", "file_not_contains", "no_errors", "file_count", "custom_script"
]


class _Structural(InputModel):
    id: str
    description: str = ""
    critical: bool = False


class FileExists(_Structural):
    type: Literal["file_exists"]
    pattern: str


class _Matching(_Structural):
    pattern: str
    match: str | None = None
    match_any: list[str] | None = Field(default=None, min_length=1)
    match_regex: str | None = None

    @model_validator(mode="after")
    def _one_matcher(self) -> _Matching:
        given = [k for k in ("match", "match_any", "match_regex") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of 'match', 'match_any' or 'match_regex' (got {given or 'none'})"
            )
        return self


class FileContains(_Matching):
    type: Literal["file_contains"]


class FileNotContains(_Matching):
    type: Literal["file_not_contains"]
    except_context: list[str] = []


class NoErrors(_Structural):
    type: Literal["no_errors"]


class FileCount(_Structural):
    type: Literal["file_count"]
    pattern: str
    count: int = Field(ge=0)
    operator: Literal["==", ">=", "<=", ">", "<"] = "=="


class CustomScript(_Structural):
    type: Literal["custom_script"]
    script: str = Field(min_length=1)


StructuralExpectation = Annotated[
    FileExists | FileContains | FileNotContains | NoErrors | FileCount | CustomScript,
    Field(discriminator="type"),
]
STRUCTURAL_TYPES: tuple[str, ...] = get_args(StructuralType)


class RubricDimension(InputModel):
    id: str
    name: str
    description: str
    weight: float = Field(default=1.0, gt=0)
    scoring: dict[str, str] = {}

    @field_validator("scoring")
    @classmethod
    def _anchor_keys(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [k for k in v if k not in {"1", "2", "3", "4", "5"}]
        if bad:
            raise ValueError(f"scoring anchors are keyed '1'..'5', not {bad}")
        return v


class QualityRubric(InputModel):
    dimensions: list[RubricDimension] = Field(min_length=1)


class EvalRaw(InputModel):
    """One eval as written, in any dialect; evals.py normalises it."""

    id: int = Field(strict=True)
    prompt: str
    expected_output: str | None = None
    files: list[str] = []
    name: str | None = None
    expectations: list[str] | None = None
    assertions: list[Assertion] | None = None
    structural_expectations: list[StructuralExpectation] = []
    quality_rubric: QualityRubric | None = None

    @model_validator(mode="after")
    def _one_dialect(self) -> EvalRaw:
        if self.expectations is not None and self.assertions is not None:
            raise ValueError(
                "use either 'expectations' (strings) or 'assertions' ({id, text}), not both"
            )
        return self

    @property
    def expectation_texts(self) -> list[str]:
        """Judged expectations as plain text, whichever dialect carried them."""
        if self.assertions is not None:
            return [a.text for a in self.assertions]
        return list(self.expectations or [])


class EvalsFileRaw(InputModel):
    skill_name: str
    eval_config: EvalConfig | None = None
    evals: list[EvalRaw]


EvalsDialect = Literal["expectations", "assertions", "extended"]
_EXTENDED_EVAL_KEYS = ("name", "structural_expectations", "quality_rubric")


def detect_evals_dialect(data: JsonObject) -> EvalsDialect:
    """Which seed an evals.json follows: 004 `extended`, 001 `assertions`, else 002 `expectations`."""
    listed = data.get("evals")
    evals = [e for e in listed if isinstance(e, dict)] if isinstance(listed, list) else []
    if "eval_config" in data or any(k in e for e in evals for k in _EXTENDED_EVAL_KEYS):
        return "extended"
    if any("assertions" in e for e in evals):
        return "assertions"
    return "expectations"


class EvalMetadata(OutputModel):
    """eval_metadata.json (seed 001 shows `assertions`; `expectations` strings are accepted too)."""

    eval_id: int
    eval_name: str
    prompt: str
    assertions: list[Assertion] | None = None
    expectations: list[str] | None = None
