"""What grading is asked to run: a Job is one run of one eval for one configuration, a Side what a
set of runs runs (the configuration, the skill folder, the version), and jobs_for the runs of a
look, keyed as state.db and the run folder name them (store/keys.py). grade/unit.py grades them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from optimizer.store.keys import TrialKey


@dataclass(frozen=True)
class Job:
    """One run to grade. `key` names it everywhere (state.db, the order of results); `skill_dir`
    is the skill it runs with (None for the without_skill baseline); `version` and `split` are
    recorded with it."""

    key: str
    trial_dir: Path
    eval_id: int
    configuration: str
    run_number: int
    skill_dir: Path | None
    version: str
    split: str = "train"
    prefix: str = ""  # the key's folder part ("v1/", "baseline/", "test/v0/"): store/keys.py
    skill_name: str = ""  # the skill's name when not the grader's (the gate's two sides)

    @property
    def run_key(self) -> TrialKey:
        return TrialKey(self.prefix, self.eval_id, self.configuration, self.run_number)


@dataclass(frozen=True)
class Side:
    """What the runs run: the configuration they are filed under (with_skill, without_skill, a gate's
    base or head), the skill folder (None: no skill) and the version they are recorded with."""

    configuration: str
    skill_dir: Path | None
    version: str


BASELINE = Side("without_skill", None, "baseline")  # no skill: what the versions are measured by


def jobs_for(
    evals: Sequence[int],
    runs: int,
    *,
    prefix: str,
    root: Path,
    side: Side,
    split: str = "train",
    first: int = 1,
) -> list[Job]:
    """Runs first..first+runs-1 of each eval, keyed `<prefix>eval-<id>/<configuration>/run-<n>` and
    kept in root/ under the same relative path, in (eval, run) order. The run number is the
    model calls' sample: runs from a `first` no one used are fresh draws, never ledger replays."""
    jobs = []
    for e in evals:
        for n in range(first, first + runs):
            rel = str(TrialKey(prefix, e, side.configuration, n))
            jobs.append(
                Job(
                    key=rel,
                    trial_dir=root / rel,
                    eval_id=e,
                    configuration=side.configuration,
                    run_number=n,
                    skill_dir=side.skill_dir,
                    version=side.version,
                    split=split,
                    prefix=prefix,
                )
            )
    return jobs
