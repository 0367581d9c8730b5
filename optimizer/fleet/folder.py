"""A fleet folder: fleet.json (its members, the skills it skipped and why, its budget and
deadline), fleet.db (fleet/allocate.py's choices, store/fleetdb.py), its lock, stop file, log and
summary.md beside one ordinary run folder per member, named after the member's skill."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from optimizer import words
from optimizer.errors import BadInput
from optimizer.store.files import Workspace, read_json, write_json

FLEET_FILE = "fleet.json"


class Member(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str  # the skill's name
    folder: str  # its run folder, inside the fleet folder
    skill_dir: str  # absolute


class Skipped(BaseModel):
    model_config = ConfigDict(extra="forbid")
    skill_dir: str
    reason: str  # one sentence: the file, the field, the fix


class FleetFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    members: list[Member]
    skipped: list[Skipped] = []
    budget_usd: float | None
    deadline: str = ""
    target: str = "body"
    created_at: str


def is_fleet(folder: Path) -> bool:
    return (Path(folder) / FLEET_FILE).is_file()


def read(folder: Path) -> FleetFile:
    path = Path(folder) / FLEET_FILE
    if not path.is_file():
        raise BadInput(words.not_a_run(folder, FLEET_FILE, "start one with `optimizer run DIR`."))
    try:
        return FleetFile.model_validate(read_json(path))
    except ValueError as exc:
        raise BadInput(
            f"{path}: not a fleet file this version reads ({exc}); restore it."
        ) from None


def write(folder: Path, fleet: FleetFile) -> None:
    write_json(Path(folder) / FLEET_FILE, fleet, FleetFile)


def member_dirs(folder: Path, fleet: FleetFile | None = None) -> list[Path]:
    """The members' run folders, in name order."""
    fleet = fleet or read(folder)
    return [Path(folder) / m.folder for m in sorted(fleet.members, key=lambda m: m.folder)]


def workspace(folder: Path) -> Workspace:
    """The fleet folder's own files (lock, stop file, log) are a Workspace's."""
    return Workspace(Path(folder))
