"""A run folder before its executor starts: the eval's input files checked (none absolute, none
climbing out with `..` or a symlink, none under outputs/) and copied into the run's working
folder, and the skill staged beside it without its evals, which the agent must not read."""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from optimizer.errors import BadInput
from optimizer.inputs.skill import files_of

WORK = ".work"
SKILL_COPY = ".skill"
OUTPUTS = "outputs"


def resolve_inputs(files: list[str], inputs_root: Path, *, eval_id: int) -> list[tuple[Path, str]]:
    """(host file, path inside /workspace) for each eval input file; BadInput for any path that
    is absolute, climbs with `..`, is missing, or leaves the skill folder through a symlink."""
    root = Path(inputs_root).resolve()
    found: list[tuple[Path, str]] = []
    for rel in files:
        where = f"eval {eval_id}: input file '{rel}'"
        posix = PurePosixPath(rel.replace("\\", "/"))
        if posix.is_absolute() or (len(rel) > 1 and rel[1] == ":"):
            raise BadInput(
                f"{where} is an absolute path; list it relative to the skill folder, "
                "e.g. evals/files/input.csv."
            )
        if ".." in posix.parts:
            raise BadInput(
                f"{where} climbs out with '..'; copy the file under evals/files/ in "
                "the skill folder and list that path."
            )
        target = (root / posix).resolve()
        if not target.is_relative_to(root):
            raise BadInput(
                f"{where} is a symbolic link leading outside the skill folder; copy "
                "the file itself under evals/files/."
            )
        if not target.is_file():
            raise BadInput(
                f"{where} does not exist in the skill folder {root}; add it or fix the path."
            )
        if posix.parts[0] == OUTPUTS:
            raise BadInput(
                f"{where} lies under outputs/, where the agent's results go; move it "
                "under evals/files/."
            )
        # Kept at its relative path inside /workspace, since eval prompts name it that way.
        found.append((target, posix.as_posix()))
    return found


def prepare_work(trial_dir: Path, inputs: list[tuple[Path, str]]) -> Path:
    """A fresh run folder with trial_dir/.work holding the inputs and an empty outputs/."""
    trial_dir = Path(trial_dir)
    if trial_dir.exists():  # a partial folder from an interrupted attempt: start over
        shutil.rmtree(trial_dir)
    work = trial_dir / WORK
    (work / OUTPUTS).mkdir(parents=True)
    for src, name in inputs:
        dest = work / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    return work


def stage_skill(skill_dir: Path, trial_dir: Path) -> Path:
    """A copy of the skill for the agent, without evals/: the expectations it is graded on and
    the expected outputs must not be readable from /skill."""
    dest = Path(trial_dir) / SKILL_COPY
    for rel in files_of(skill_dir, include_evals=False):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(skill_dir) / rel, target)  # keeps the mode: scripts stay executable
    dest.mkdir(exist_ok=True)
    return dest
