"""Each resume's settings against the last start or resume: which keys changed, kept in state.db so
that `status` shows the limits in force and what a resume changed."""

from __future__ import annotations

import json
from dataclasses import dataclass

import structlog

from optimizer import config
from optimizer.store import runs
from optimizer.store.db import Store, now
from optimizer.store.readonly import Reader
from optimizer.store.rows import Decoded, Raw, json_object

log = structlog.get_logger()


def record_resume(store: Store, settings: config.Settings) -> None:
    """This resume's effective settings become the run's current ones, with the keys that changed
    since the last start or resume. Recorded by the process that runs the loop (with the lock
    held), so a detached resume is one row; the first start of a detached `run` (its row still
    "created") is no resume unless something changed."""
    row = runs.row(store) or runs.Run()
    before = _flatten(row.settings)
    after = _flatten(settings.model_dump(mode="json"))
    changed = {
        key: [before.get(key), value]
        for key, value in sorted(after.items())
        if before.get(key) != value
    }
    if row.status == "created" and not changed:
        return
    with store.atomic():
        store.table("resumes").insert(
            {
                "at": now(),
                "settings_json": settings.model_dump_json(),
                "changed_json": json.dumps(changed),
            }
        )
        store.table("runs").update(row.id or "", {"settings_json": settings.model_dump_json()})
    log.info("run.resumed", changed=changed)


def _flatten(tree: dict, prefix: str = "") -> dict:
    flat: dict = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


@dataclass(frozen=True)
class Resume:
    """One row of the resumes table: when, and each changed key's [before, after]."""

    at: str
    changed: Decoded

    @classmethod
    def from_row(cls, row: Raw) -> Resume:
        return cls(str(row["at"]), json_object(row.get("changed_json"), "resumes.changed_json"))


def all_of(db: Reader) -> list[Resume]:
    """Every resume, oldest first."""
    return [
        Resume.from_row(r) for r in db.query("select at, changed_json from resumes order by id")
    ]
