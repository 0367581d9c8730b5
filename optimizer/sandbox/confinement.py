"""Whether runs are confined here: bubblewrap probed once, the policy's demand, loud warnings.
It must never run a model-written command, nor let one run unconfined unless the user asked for
it (sandbox.mode = "none", or --unconfined): without bubblewrap every other mode refuses."""

from __future__ import annotations

import dataclasses
import functools
import shutil
import subprocess
import threading

import structlog

from optimizer.errors import BadInput
from optimizer.sandbox.argv import bwrap_options
from optimizer.sandbox.cgroups import memory_limit_mechanism, process_limit_mechanism
from optimizer.sandbox.policy import SANDBOX_PATH, SandboxPolicy

_log = structlog.get_logger()
_warned: set[str] = set()
_warned_lock = threading.Lock()


# The smallest sandbox bwrap can start: if this fails, no run can be confined here.
SMALLEST_SANDBOX = (
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-net",
    "--tmpfs",
    "/tmp",
    "true",
)


@functools.cache
def bwrap_available() -> bool:
    """Whether bubblewrap really works here, tried once per process."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    probe = [exe, *SMALLEST_SANDBOX]
    try:
        done = subprocess.run(
            probe,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={"PATH": SANDBOX_PATH},
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def warn_once(event: str, **fields: object) -> None:
    """Log a warning the first time this event happens in the process: loud, not a flood."""
    with _warned_lock:
        if event in _warned:
            return
        _warned.add(event)
    _log.warning(event, **fields)


def reset_warnings() -> None:
    """Forget which warnings were given, so that the next occurrence of each is logged again."""
    with _warned_lock:
        _warned.clear()


REFUSAL = (
    "bubblewrap is missing or does not work on this machine, and model-written commands never run "
    "unconfined unless you ask: install it (apt-get install bubblewrap; `optimizer doctor` checks "
    'it), or opt in to unconfined runs with --unconfined or sandbox.mode = "none".'
)
UNCONFINED_LINE = (
    'sandbox: UNCONFINED (sandbox.mode = "none", as asked): model-written commands run on this '
    "machine with only rlimits, a scrubbed environment and the workspace size limit."
)


def confinement_for(policy: SandboxPolicy) -> bool:
    """Whether runs under this policy are confined; raises BadInput when bubblewrap does not work
    here and the user did not opt in to unconfined runs. Callers use it to refuse at start-up.
    The opt-in is said once per command, on the console (startup_line), not per command run."""
    if policy.mode == "none":
        return False
    if bwrap_available():
        return True
    raise BadInput(REFUSAL)


def mechanism(confined: bool) -> str:
    """The name recorded with every run for how it was confined."""
    return "bwrap" if confined else "none"


def startup_line(policy: SandboxPolicy) -> str | None:
    """Before any work: refuses (BadInput) as confinement_for does; the one console line to show
    when the run will be unconfined, else None."""
    return None if confinement_for(policy) else UNCONFINED_LINE


def report(policy: SandboxPolicy | None = None) -> dict[str, object]:
    """What confinement is in force here for this policy (the defaults when None), as plain
    data for a diagnostic command; it neither raises for a strict policy nor warns."""
    policy = policy or SandboxPolicy()
    works = bwrap_available()
    return {
        "bwrap": shutil.which("bwrap"),
        "bwrap_works": works,
        # The optional flags the sandbox uses where the installed bwrap has them.
        "bwrap_options": sorted(
            {"--disable-userns", "--json-status-fd", "--size"} & bwrap_options()
        ),
        "process_limit": process_limit_mechanism(),
        "memory_limit": memory_limit_mechanism(),
        "confined": policy.mode != "none" and works,
        "refused": policy.mode != "none" and not works,
        "policy": dataclasses.asdict(policy),
    }
