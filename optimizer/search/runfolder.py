"""Opening a run folder for work, the one way the search (`run`, `resume`, a night) and an adoption
do it: its settings from run.toml, a refusal while a daemon works on it, its lock, its store, the
model client over the store, and the target the run optimises. Writes nothing before the lock."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from optimizer import config, logs, words
from optimizer.errors import BadInput, WorkFailed
from optimizer.model.port import Client
from optimizer.store import runs
from optimizer.store.db import Store
from optimizer.store.files import Workspace
from optimizer.store.lock import lock, running_pid
from optimizer.store.runs import Run

if TYPE_CHECKING:
    from optimizer.budget.stops import SignalFlag
    from optimizer.events import Handler
    from optimizer.search.engine import OpenTarget
    from optimizer.search.state import RunState


def require(ws: Workspace, fix: str) -> None:
    """BadInput unless the folder holds a run's state.db and run.toml; `fix` says what to pass."""
    if not ws.state_db.is_file() or not ws.run_toml.is_file():
        raise BadInput(words.not_a_run(ws.root, "state.db and run.toml", fix))


def settings_from(
    ws: Workspace,
    overrides: list[str],
    flags: Mapping[str, str | float | None] | None = None,
    *,
    restore: str = "restore it",
) -> config.Loaded:
    """The run's settings: run.toml's, under the command's --set overrides and flags."""
    try:
        base = tomllib.loads(ws.run_toml.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{ws.run_toml}: not valid TOML ({exc}); {restore}.") from None
    return config.load(base=base, env=os.environ, overrides=overrides, flags=flags or {})


def refuse_if_running(ws: Workspace, said: Callable[[int], str]) -> None:
    """BadInput while a daemon holds the folder, in the sentence `said` makes of its pid."""
    pid = running_pid(ws)
    if pid is not None:
        raise BadInput(said(pid))


@dataclass
class OpenRun:
    """A run folder opened for work: everything a RunState is built from."""

    ws: Workspace
    settings: config.Settings
    store: Store
    client: Client

    @property
    def open_target(self) -> OpenTarget:
        """The target state.db says the run optimises (the body unless it says otherwise)."""
        from optimizer.search.targets import TARGETS

        return TARGETS[(runs.row(self.store) or Run()).target or "body"]

    def state(self, listen: Handler, flag: SignalFlag) -> RunState:
        from optimizer.search import engine
        from optimizer.search.state import RunState

        stop_rules = engine.stop_rules(self.ws, self.settings, flag, self.client.budget)
        return RunState(self.ws, self.store, self.client, self.settings, listen, stop_rules)


@contextmanager
def open_run(
    ws: Workspace, settings: config.Settings, *, refuse: Callable[[int], str] | None, search: bool
) -> Iterator[OpenRun]:
    """The folder under its lock, its log configured, its store open and the model client made at
    the run's budget; closed however the work ends. `refuse`: the sentence, of the daemon's pid,
    that refuses while one runs (None: the lock's own). `search`: a systemic failure marks the run
    failed; an adoption's leaves the run as the search left it."""
    from optimizer.model import factory as llm

    if refuse is not None:
        refuse_if_running(ws, refuse)
    with lock(ws):
        logs.configure(ws.log, console=False)
        store = Store(ws.state_db, busy_timeout_s=settings.store.busy_timeout_s)
        try:
            # The run's row is keyed by its folder's name (store/workspace.create); a folder moved
            # or renamed since keeps its state under the old name, so the key follows the folder.
            if (runs.row(store) or Run(id=ws.root.name)).id != ws.root.name:
                runs.rekey(store, ws.root.name)
            client = llm.make_client(settings, store, budget_usd=settings.budget.usd)
            yield OpenRun(ws, settings, store, client)
        except WorkFailed as exc:
            if search:
                with suppress(Exception):  # best effort: the database may be what failed
                    runs.failed(store, ws.root.name, str(exc))
            raise
        finally:
            store.close()
