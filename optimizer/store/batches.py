"""The batches table of state.db: the Message Batches a run sent (llm.batch), recorded as soon as
the service acknowledged one so that a resumed run re-attaches to it instead of paying for the
same requests again; as typed reads and writes. items_json is parsed and checked on read."""

from __future__ import annotations

import json
from collections.abc import Mapping

from optimizer.store.db import Store, now
from optimizer.store.rows import BatchMeta


def sent(
    store: Store, batch_id: str, *, scope: str | None, roles: str, items: Mapping[str, BatchMeta]
) -> None:
    """A batch the service acknowledged: its scope, roles and items by custom id, in progress."""
    with store.atomic():
        store.upsert(
            "batches",
            {
                "id": batch_id,
                "scope": scope,
                "roles": roles,
                "custom_ids_json": json.dumps(list(items)),
                "items_json": json.dumps(items),
                "status": "in_progress",
                "created_at": now(),
            },
            pk="id",
        )


def ended(store: Store, batch_id: str, counts: Mapping[str, int]) -> None:
    """A batch whose results were read, with how many of each result it held."""
    with store.atomic():
        store.table("batches").update(
            batch_id,
            {"status": "ended", "ended_at": now(), "counts_json": json.dumps(dict(counts))},
        )


def lost(store: Store, batch_id: str) -> None:
    """A batch whose results cannot be had: its requests are sent again directly."""
    with store.atomic():
        store.table("batches").update(batch_id, {"status": "lost", "ended_at": now()})


def in_progress(store: Store) -> dict[str, dict[str, BatchMeta]]:
    """{batch id: its items by custom id} of every batch an earlier process left in flight."""
    out = {}
    for row in store.query("select id, items_json from batches where status = 'in_progress'"):
        items = json.loads(row["items_json"] or "{}")
        if not isinstance(items, dict):
            raise ValueError(f"batches.items_json of {row['id']} is not an object")
        out[row["id"]] = items
    return out
