"""The offline simulator as the model and execute layers meet it: a transport for the SDK's calls
and a loopback server for the Claude Code CLI's, made by whatever the composition root registered
(optimizer/cli/compose.py when the CLI starts, a Ray worker from its payload, a test or a bench
from its own setup). No layer below the composition root imports optimizer.sim: an import-linter
contract says so (pyproject.toml, "the simulator is built at the composition root")."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from optimizer.errors import BadInput

if TYPE_CHECKING:
    import httpx2

    from optimizer.config import Settings


@dataclass(frozen=True)
class Simulated:
    """How this process makes the simulator: a transport for settings (its world, its seed), and
    a loopback server for settings that yields its base URL while it serves."""

    transport: Callable[[Settings], httpx2.AsyncBaseTransport]
    server: Callable[[Settings], AbstractContextManager[str]]


_registered: list[Simulated] = []


def register(made: Simulated) -> None:
    """The composition root's simulator for this process (a later registration replaces it)."""
    _registered[:] = [made]


def registered() -> Simulated:
    """The registered simulator, or BadInput when this process has none (a library caller that
    asked for llm.provider = "sim" without building one)."""
    if not _registered:
        raise BadInput(
            "llm.provider is 'sim' but this process has no simulator: call "
            "optimizer.cli.compose.use_the_simulator() first, or use the optimizer command."
        )
    return _registered[0]
