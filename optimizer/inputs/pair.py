"""What `optimizer gate` is handed, checked before any model call, folder or file: the two skill
folders, the BASE evals, the margin and where the pull-request comment goes. Kept apart from the
gate's runs (search/gate.py) so a mistyped path is answered before the model stack is imported."""

from __future__ import annotations

from pathlib import Path

from optimizer.errors import BadInput
from optimizer.inputs import skill as skills
from optimizer.inputs.evals import EvalSet, load_evals


def check(base: Path, head: Path, evals_path: Path | None, margin: float) -> EvalSet:
    """Everything the gate needs (BadInput, exit 2). A HEAD whose SKILL.md breaks the skill rules
    is no bad input: it is the pull request's change, and the gate judges it worse."""
    for side, path in (("BASE_SKILL", base), ("HEAD_SKILL", head)):
        if not (path / "SKILL.md").is_file():
            raise BadInput(f"{path}: {side} has no SKILL.md; pass the skill's folder.")
    skills.load_skill(base)
    if not 0 < margin < 1:
        raise BadInput(f"--margin {margin}: use a score difference between 0 and 1, e.g. 0.05.")
    evalset = load_evals(base, evals_path)
    if len(evalset.evals) < 2:
        raise BadInput(
            f"{evalset.source}: holds {len(evalset.evals)} eval; the gate needs at least 2 "
            "to bound a difference (add evals)."
        )
    return evalset


def check_comment(path: Path | None) -> None:
    """The comment is written after the runs are paid for: a path it cannot take is bad input now."""
    if path is None:
        return
    if path.is_dir():
        raise BadInput(f"--comment {path}: is a folder; name a file, e.g. {path / 'gate.md'}.")
    folder = next((p for p in path.absolute().parents if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise BadInput(f"--comment {path}: {folder} is a file, not a folder; name another path.")
