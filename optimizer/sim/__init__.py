"""An offline, deterministic simulator of the Anthropic Messages API for the demo, the tests and
the benchmarks. Never reaches the network, and its results are always labelled a simulation."""

from optimizer.sim.server import run_server, serve
from optimizer.sim.transport import SimStats, Simulator
from optimizer.sim.world import Knobs, detect_role

__all__ = ["Knobs", "SimStats", "Simulator", "detect_role", "run_server", "serve"]
