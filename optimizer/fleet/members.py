"""Which skills a fleet night takes: the skill folders given, the skill folders inside a folder
given, or the skills where Claude Code finds them (`--skills-from claude`: ~/.claude/skills,
./.claude/skills and the skills/ of each plugin under ~/.claude/plugins). A folder is a skill
when it holds SKILL.md; each skill's evals come from its own evals/. Never writes to them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from optimizer.errors import BadInput
from optimizer.inputs.evals import load_evals
from optimizer.inputs.skillmd import SKILL_FILE
from optimizer.schemas import Json

SOURCES = ("claude",)


def is_skill(folder: Path) -> bool:
    return (folder / SKILL_FILE).is_file()


def inside(folder: Path) -> list[Path]:
    """The skill folders directly inside `folder`, in name order."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and is_skill(p))


def claude_skills(home: Path, here: Path) -> list[Path]:
    """Where Claude Code loads skills from: the user's, the project's and each plugin's."""
    found = inside(home / ".claude" / "skills") + inside(here / ".claude" / "skills")
    plugins = home / ".claude" / "plugins"
    if plugins.is_dir():
        found += sorted(p.parent for p in plugins.glob(f"**/skills/*/{SKILL_FILE}"))
    return list(dict.fromkeys(p.resolve() for p in found))


def folders(
    given: Sequence[Path], skills_from: str | None, *, home: Path, here: Path
) -> list[Path] | None:
    """The skill folders of a fleet night, or None when `given` is one skill folder (an ordinary
    night). BadInput when nothing is given, or a fleet holds no skill at all."""
    if skills_from is not None:
        if skills_from not in SOURCES:
            raise BadInput(f"--skills-from {skills_from!r}: use one of {', '.join(SOURCES)}.")
        found = claude_skills(home, here) + [Path(p) for p in given]
        if not found:
            raise BadInput(
                f"--skills-from {skills_from}: no skill in {home / '.claude' / 'skills'}, "
                f"{here / '.claude' / 'skills'} or the plugins under "
                f"{home / '.claude' / 'plugins'}; pass the skill folders instead."
            )
        return found
    if not given:
        raise BadInput("give a skill folder (or a folder of skill folders) to improve.")
    if len(given) == 1:
        only = Path(given[0])
        if is_skill(only):
            return None
        found = inside(only)
        if not found:
            raise BadInput(
                f"{only}: holds no {SKILL_FILE}, and no folder inside it does; pass a skill "
                f"folder, or a folder of skill folders (each with {SKILL_FILE} and "
                "evals/evals.json)."
            )
        return found
    return [Path(p) for p in given]


def folder_names(names: Sequence[str]) -> list[str]:
    """A run folder name per member: the skill's name, with -2, -3 … where two skills share it."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return out


def scheduled_evals(skill_dir: Path) -> tuple[dict[str, Json], list[str]]:
    """What `schedule` checks before a night finds it at 3 a.m.: a skill folder's evals (BadInput
    when a night could not run them) and their own settings; for a folder of skills, each
    member's evals, a note for each broken one (each night skips it) and no settings of their own
    (each member reads its own). BadInput when no member could run."""
    dirs = folders([skill_dir], None, home=Path.home(), here=Path.cwd())
    if dirs is None:
        return dict(load_evals(skill_dir).eval_config), []
    notes = []
    for d in dirs:
        try:
            load_evals(d)
        except BadInput as exc:
            notes.append(f"each night skips {d}: {exc}")
    if len(notes) == len(dirs):
        raise BadInput(
            *notes,
            f"{skill_dir}: none of its {len(dirs)} skills has evals a night can run; fix one, "
            "then schedule it.",
        )
    return {}, notes
