"""The composition root's one choice the layers below may not make: the offline simulator is
built here, and only here, and handed to the model and execute layers as a transport and a
loopback server (model/simulated.py). The CLI registers it when it starts; a test or a bench that
drives the layers without the CLI calls use_the_simulator() itself."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from optimizer.model.simulated import Simulated, register

if TYPE_CHECKING:
    import httpx2

    from optimizer.config import Settings


def transport(settings: Settings) -> httpx2.AsyncBaseTransport:
    from optimizer.sim import Simulator

    return Simulator.from_settings(settings.sim).transport()


@contextmanager
def server(settings: Settings) -> Iterator[str]:
    """A loopback simulator for the Claude Code CLI, its base URL while it serves."""
    from optimizer.sim import Simulator
    from optimizer.sim.server import serve

    running, port = serve(Simulator.from_settings(settings.sim), "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        running.shutdown()
        running.server_close()


SIMULATED = Simulated(transport=transport, server=server)


def use_the_simulator() -> None:
    register(SIMULATED)
