"""Which run folders belong to a skill folder, by the path each run records (its runs row's
skill_dir), never by the skill's name: two folders may share a name. A run written with --out
anywhere is found through the index of run folders this user started
($XDG_STATE_HOME/skill-optimizer/runs, one absolute path a line); ./runs is read as well, for the
runs made before the index. Light on purpose: `status`, `stop` and the other views use it before
anything heavy is imported."""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from optimizer.store import runs
from optimizer.store.errors import StoreError
from optimizer.store.files import Workspace
from optimizer.store.lock import running_pid, starting_pid


def index_path() -> Path:
    home = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(home) / "skill-optimizer" / "runs"


def record(run_dir: Path) -> None:
    """Adds a new run folder to the index. One line appended under O_APPEND, so two runs that
    start at once both land; an index that cannot be written costs only the lookup by skill."""
    line = f"{run_dir.resolve()}\n"
    with suppress(OSError):
        index = index_path()
        index.parent.mkdir(parents=True, exist_ok=True)
        with open(index, "a", encoding="utf-8") as handle:
            handle.write(line)


def skill_of(run_dir: Path) -> Path | None:
    """The skill folder a run records, resolved (an older run's relative path against the
    working folder, where its ./runs was made), or None for a folder that holds no run."""
    db = run_dir / "state.db"
    if not db.is_file():
        return None
    try:
        row = runs.read(db)
    except StoreError:
        return None
    recorded = row.skill_dir if row else None
    return Path(recorded).resolve() if recorded else None


def runs_of(skill_dir: Path) -> list[Path]:
    """The run folders of this very skill folder, oldest first (by state.db's last change, then
    name: the order `status SKILL` reads the latest from)."""
    wanted = skill_dir.resolve()
    seen: dict[Path, Path] = {}
    for folder in _candidates():
        key = folder.resolve()
        if key not in seen and skill_of(folder) == wanted:
            seen[key] = folder
    return sorted(seen.values(), key=_changed)


def _changed(folder: Path) -> tuple[float, str]:
    """When a run folder's state.db last changed; a folder deleted meanwhile sorts first."""
    try:
        return (folder / "state.db").stat().st_mtime, folder.name
    except OSError:
        return 0.0, folder.name


def alive(skill_dir: Path) -> tuple[Path, int] | None:
    """A run of this skill folder whose daemon is running or starting, and its pid."""
    for folder in reversed(runs_of(skill_dir)):
        ws = Workspace(folder)
        pid = running_pid(ws) or starting_pid(ws)
        if pid is not None:
            return folder, pid
    return None


def _candidates() -> list[Path]:
    found: list[Path] = []
    with suppress(OSError):  # first: a folder found both ways keeps the name the user typed
        found += sorted(p for p in Path("runs").iterdir() if p.is_dir())
    with suppress(OSError):
        lines = index_path().read_text(encoding="utf-8").splitlines()
        found += [Path(line) for line in lines if line.strip()]
    return [p for p in found if (p / "state.db").is_file()]
