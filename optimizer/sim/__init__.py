"""An offline, deterministic simulator of the Anthropic Messages API for the demo, the tests and the
benchmarks: the executor, judge, comparator and proposer roles, faults and latency drawn from the
request, and a loopback server. Never reaches the network, and its results are always labelled a
simulation. It imports no other stage: it stands where the network would be."""

from optimizer.sim.server import run_server, serve
from optimizer.sim.transport import Service, SimStats, Simulator
from optimizer.sim.world import Knobs, detect_role

__all__ = ["Knobs", "Service", "SimStats", "Simulator", "detect_role", "run_server", "serve"]

# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ()
