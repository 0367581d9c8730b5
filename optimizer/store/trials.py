"""The trials table of state.db: one row per execution of an eval (or a trigger probe) by one
configuration, as typed reads and writes."""

from __future__ import annotations

from optimizer.store.db import Store
from optimizer.store.readonly import Reader
from optimizer.store.rows import ConfinementRow, ProbeRow, TrialRow


def counts(db: Reader) -> tuple[int, int]:
    """(runs recorded, runs of the sealed test split)."""
    rows = db.query("select count(*) as n, coalesce(sum(split = 'test'), 0) as test from trials")
    return (rows[0]["n"], rows[0]["test"]) if rows else (0, 0)


def exists(store: Store, key: str) -> bool:
    return bool(store.query("select 1 from trials where key = ?", [key]))


def record(store: Store, row: TrialRow) -> None:
    """One execution, keyed by its run key."""
    with store.atomic():
        store.upsert("trials", row, pk="key")


def probes(db: Reader, label: str, configuration: str) -> list[ProbeRow]:
    """(eval_id, run_number, status, skill_invoked) of every trigger probe of one version."""
    rows = db.query(
        "select eval_id, run_number, status, skill_invoked from trials "
        "where version = ? and configuration = ?",
        [label, configuration],
    )
    return [
        {
            "eval_id": int(r["eval_id"]),
            "run_number": int(r["run_number"]),
            "status": str(r["status"]),
            "skill_invoked": r["skill_invoked"],
        }
        for r in rows
    ]


def last_completed(db: Reader) -> dict[str, str]:
    """When each version's last run outside the sealed test completed."""
    return {
        r["version"]: r["done"]
        for r in db.query(
            "select version, max(completed_at) as done from trials "
            "where split is null or split != 'test' group by version"
        )
    }


def confinement(db: Reader, version: str | None = None) -> list[ConfinementRow]:
    """(sandbox, confined, runs) per mechanism of the runs that recorded one, by mechanism; over
    the whole run or one version."""
    where = "sandbox is not null" + (" and version = ?" if version else "")
    rows = db.query(
        f"select sandbox, sum(confined) as confined, count(*) as runs "
        f"from trials where {where} group by sandbox order by sandbox",
        (version,) if version else (),
    )
    return [
        {"sandbox": str(r["sandbox"]), "confined": r["confined"], "runs": int(r["runs"])}
        for r in rows
    ]
