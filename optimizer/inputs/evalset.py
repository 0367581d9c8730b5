"""One normalised eval and the set of them, the same shape whatever dialect evals.json was written
in: each eval's prompt, input files, judged expectations, structural checks and rubric (and the
stratum the split keeps in proportion), and the set's skill name, eval_config as written, content
hash and source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from optimizer.schemas import EvalsDialect, RubricDimension, StructuralExpectation


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
    grown: tuple[
        int, ...
    ] = ()  # appended by `optimizer evals` accept: placed by hash (placement.py)

    @property
    def ids(self) -> list[int]:
        return [e.id for e in self.evals]

    def by_id(self, eval_id: int) -> Eval:
        for e in self.evals:
            if e.id == eval_id:
                return e
        raise KeyError(eval_id)
