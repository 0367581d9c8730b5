"""One command's working set: the run folder's store, its log, and the model client over it.
Never hold a session across processes; each command opens and closes its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from optimizer.config import Settings
from optimizer.model.port import Client
from optimizer.store.db import Store


@dataclass
class Session:
    folder: Path
    store: Store
    client: Client


@contextmanager
def open_session(
    settings: Settings,
    folder: Path | None,
    *,
    budget_usd: float | None = None,
    console: bool = True,
) -> Iterator[Session]:
    from optimizer import logs
    from optimizer.model import factory as llm

    folder = Path(folder) if folder else Path("runs") / "scratch"
    folder.mkdir(parents=True, exist_ok=True)
    logs.configure(folder / "optimizer.log", console=console)
    store = Store(folder / "state.db")
    try:
        client = llm.make_client(settings, store, budget_usd=budget_usd)
        yield Session(folder, store, client)
    finally:
        store.close()
