"""A long-running agent program (the Claude Code CLI) under the same bubblewrap confinement as a
command, with one way out: the relay to its model endpoint. The caller starts and streams it.
It must never give the program a network of its own, a host path beyond its binds, or the key."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from optimizer.errors import BadInput
from optimizer.sandbox.argv import bwrap_argv
from optimizer.sandbox.cgroups import TrialCgroup
from optimizer.sandbox.limits import cgroup_join_prefix
from optimizer.sandbox.policy import SANDBOX_PATH, SandboxPolicy
from optimizer.sandbox.relay import FORWARDER, INNER_PORT, Meter, Relay, Upstream

RELAY_MOUNT = "/run/relay"
NODE_MOUNT = "/opt/node"
_SYSTEM = ("/usr/", "/bin/", "/sbin/", "/lib")


@dataclass
class Box:
    """What to start (argv, env, from cwd "/"), and the relay that serves it while it runs."""

    argv: list[str]
    env: dict[str, str]
    relay: Relay


def find_node() -> tuple[str, list[tuple[str, str, str]]]:
    """node as the sandbox sees it, and the bind that shows it there when it is not in a system
    folder: the binary alone, read-only. Its folder may be the user's home (~/bin/node) or a
    tree of other things, none of which the sandbox may see; node needs only its binary and the
    system's libraries."""
    found = shutil.which("node")
    if found is None:
        raise BadInput(
            "The confined claude-code executor needs node on PATH (its relay to the "
            "model runs in node inside the sandbox): install Node.js, or opt in to "
            "unconfined runs with --unconfined."
        )
    real = Path(found).resolve()
    if str(real).startswith(_SYSTEM):
        return str(real), []
    inside = f"{NODE_MOUNT}/bin/node"
    return inside, [("--ro-bind", str(real), inside)]


@contextlib.asynccontextmanager
async def confined_program(
    cmd: Sequence[str],
    *,
    work_dir: Path,
    policy: SandboxPolicy,
    upstream: Upstream,
    env: Mapping[str, str] | None = None,
    binds: Sequence[tuple[str, str, str]] = (),
    meter: Meter | None = None,
) -> AsyncIterator[Box]:
    """cmd in bubblewrap with /workspace = work_dir, `binds` added, a private network whose only
    listener forwards to `upstream` through the relay (ANTHROPIC_BASE_URL points there), and the
    run's cgroup. When the block ends the relay stops and whatever is left in the cgroup is
    killed; the caller kills the process it started (its process group) before that. A `meter`
    admits and charges each model call the program makes (relay.Meter)."""
    node, node_binds = find_node()
    inner_env = dict(env or {})
    if node_binds:
        inner_env["PATH"] = f"{SANDBOX_PATH}:{NODE_MOUNT}/bin"
    with contextlib.ExitStack() as stack:
        # A folder of its own under /tmp: a unix socket path must stay under 108 bytes.
        folder = Path(tempfile.mkdtemp(prefix="optimizer-relay-"))
        stack.callback(shutil.rmtree, folder, True)
        relay = Relay(folder / "relay.sock", upstream, meter)
        cgroup = TrialCgroup.create(policy)
        if cgroup is not None:
            stack.callback(cgroup.close)
        wrapped = [node, "-e", FORWARDER, "--", f"{RELAY_MOUNT}/relay.sock", str(INNER_PORT), *cmd]
        argv = bwrap_argv(
            wrapped,
            work_dir.resolve(),
            None,
            policy,
            inner_env,
            None,
            # RLIMIT_AS would stop the CLI's runtime, which reserves far more
            # address space than it uses; only a memory cgroup bounds it.
            address_space=False,
            # Read-only: connecting to the socket needs no write, and the
            # sandbox must not fill or replace a host folder.
            binds=[("--ro-bind", str(folder), RELAY_MOUNT), *node_binds, *binds],
        )
        if cgroup is not None:
            argv = [
                "/bin/sh",
                "-c",
                cgroup_join_prefix(cgroup) + 'exec "$@"',
                "sandbox-cgroup",
                *argv,
            ]
        async with relay:
            yield Box(argv, {"PATH": SANDBOX_PATH, "LANG": "C.UTF-8"}, relay)
