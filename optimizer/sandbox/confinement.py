"""Whether runs are confined here: bubblewrap probed once, the policy's demand, loud warnings.
It must never run a model-written command, nor fall back to unconfined runs without saying so."""

from __future__ import annotations

import dataclasses
import functools
import shutil
import subprocess
import threading

import structlog

from optimizer.errors import WorkFailed
from optimizer.sandbox.argv import bwrap_options
from optimizer.sandbox.cgroups import memory_limit_mechanism, process_limit_mechanism
from optimizer.sandbox.policy import SANDBOX_PATH, SandboxPolicy

_log = structlog.get_logger()
_warned: set[str] = set()
_warned_lock = threading.Lock()


@functools.cache
def bwrap_available() -> bool:
    """Whether bubblewrap really works here, tried once per process."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    probe = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net",
             "--tmpfs", "/tmp", "true"]
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={"PATH": SANDBOX_PATH},
                              timeout=20, check=False)
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


def confinement_for(policy: SandboxPolicy) -> bool:
    """Whether runs under this policy are confined; raises WorkFailed when the policy demands
    bubblewrap and it does not work here. Callers may use it to refuse early, at start-up."""
    if policy.mode == "none":
        return False
    if bwrap_available():
        return True
    if policy.mode in ("bwrap", "strict"):
        raise WorkFailed(
            f"sandbox mode {policy.mode!r} needs bubblewrap, which is missing or does not work on "
            "this machine: install it (apt-get install bubblewrap) or set sandbox.mode = \"auto\"."
        )
    warn_once(
        "sandbox.unconfined",
        reason="bubblewrap is missing or does not work here: model-written commands run "
        "UNCONFINED, with only limits, a scrubbed environment and the work folder as cwd",
    )
    return False


def report(policy: SandboxPolicy | None = None) -> dict[str, object]:
    """What confinement is in force here for this policy (the defaults when None), as plain
    data for a diagnostic command; it neither raises for a strict policy nor warns."""
    policy = policy or SandboxPolicy()
    works = bwrap_available()
    return {
        "bwrap": shutil.which("bwrap"),
        "bwrap_works": works,
        # The optional flags the sandbox uses where the installed bwrap has them.
        "bwrap_options": sorted({"--disable-userns", "--json-status-fd", "--size"}
                                & bwrap_options()),
        "process_limit": process_limit_mechanism(),
        "memory_limit": memory_limit_mechanism(),
        "confined": policy.mode != "none" and works,
        "refused": policy.mode in ("bwrap", "strict") and not works,
        "policy": dataclasses.asdict(policy),
    }
