"""A run's identity: (prefix, eval, configuration, run number). The string form names its folder
and its state.db rows; the parts are real, indexed columns of `gradings` (migration m010), so a
query selects runs by column and never by matching key text (docs/design.md §2, §5)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from optimizer.store.rows import KeyColumns

# `<prefix>eval-<id>/<configuration>/run-<n>`; the prefix is "v3/", "baseline/", "test/v0/", or
# empty for `optimizer execute`, whose keys carry no eval segment (`with_skill/run-2`).
_KEY = re.compile(
    r"^(?P<prefix>(?:[^/]+/)*?)(?:eval-(?P<eval>-?\d+)/)?(?P<conf>[^/]+)/run-(?P<run>\d+)$"
)


@dataclass(frozen=True, order=True)
class TrialKey:
    prefix: str
    eval_id: int
    configuration: str
    run_number: int

    def __str__(self) -> str:
        return f"{self.prefix}eval-{self.eval_id}/{self.configuration}/run-{self.run_number}"

    @property
    def label(self) -> str:
        """The version (or `baseline`) whose run this is: the prefix's first part."""
        return self.prefix.split("/", 1)[0]

    def columns(self) -> KeyColumns:
        return {
            "prefix": self.prefix,
            "eval_id": self.eval_id,
            "configuration": self.configuration,
            "run_number": self.run_number,
        }

    @classmethod
    def parse(cls, key: str, eval_id: int | None = None) -> TrialKey:
        """Only for rows written before the columns existed (m010) and for tests; new rows carry
        their parts. `eval_id` fills in keys without an eval segment."""
        found = _KEY.match(key)
        if found is None or (found["eval"] is None and eval_id is None):
            raise ValueError(f"not a run key: {key!r}")
        return cls(
            found["prefix"],
            int(found["eval"]) if found["eval"] is not None else eval_id or 0,
            found["conf"],
            int(found["run"]),
        )
