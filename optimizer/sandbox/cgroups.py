"""Per-run cgroups bounding a run's processes and total memory, where this machine allows them.
It must never write to the daemon's own cgroup, nor remove a cgroup of a daemon still alive."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import uuid
from pathlib import Path

import structlog

from optimizer.sandbox.policy import SandboxPolicy

# RLIMIT_NPROC cannot stop a fork bomb when the daemon runs as root: the kernel exempts uid 0,
# and bwrap started by root maps the sandbox uid back to host uid 0, so it stays exempt even
# inside `--unshare-user`. A pids cgroup counts every process whatever its uid, so where one can
# be created (root, or a delegated subtree) each run gets its own with pids.max, plus a memory
# cgroup bounding the run's total memory (then RLIMIT_AS is not set, see limits.limits_script).
# Elsewhere (a non-root daemon) RLIMIT_NPROC does work: inside bwrap's user namespace the count
# is per sandbox. Root without cgroups has only the wall clock and the pid namespace: the
# warning "sandbox.no_process_limit" says so.

CLEANUP_S = 5.0  # how long killed processes may take to vanish from their cgroup

_CGROUP_LIMIT_FILES = {
    ("v1", "pids"): "pids.max",
    ("v2", "pids"): "pids.max",
    ("v1", "memory"): "memory.limit_in_bytes",
    ("v2", "memory"): "memory.max",
}
# Without these a run over its memory limit would swap instead of being stopped.
_CGROUP_EXTRA_FILES = {
    ("v1", "memory"): ("memory.memsw.limit_in_bytes", None),
    ("v2", "memory"): ("memory.swap.max", "0"),
}
_CGROUP_PARENT = "skill-optimizer"

_log = structlog.get_logger()


def _own_cgroup_paths(own: list[str]) -> dict[str, str]:
    """controller -> our cgroup path, from /proc/self/cgroup; "<v2>" stands for the unified one."""
    own_paths: dict[str, str] = {}
    for line in own:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers = parts[1].split(",") if parts[1] else ["<v2>"]
        for controller in controllers:
            own_paths[controller] = parts[2]
    return own_paths


def _own_cgroup_dirs() -> dict[str, tuple[str, Path]]:
    """controller -> (hierarchy version, our own cgroup folder), for pids and memory."""
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return {}
    own_paths = _own_cgroup_paths(own)
    found: dict[str, tuple[str, Path]] = {}
    for line in mounts:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, mount_point, fstype, options = fields[3], fields[4], tail[0], tail[2].split(",")
        if fstype == "cgroup":
            pairs = [(c, "v1", own_paths.get(c)) for c in ("pids", "memory") if c in options]
        elif fstype == "cgroup2":
            pairs = [(c, "v2", own_paths.get("<v2>")) for c in ("pids", "memory")]
        else:
            continue
        for controller, version, own_path in pairs:
            if own_path is None or controller in found and found[controller][0] == "v1":
                continue
            if root != "/" and not (own_path == root or own_path.startswith(root + "/")):
                continue
            rel = own_path[len(root) :] if root != "/" else own_path
            folder = Path(mount_point) / rel.lstrip("/")
            if folder.is_dir():
                found[controller] = (version, folder)
    return found


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _usable_parent(controller: str, version: str, own_dir: Path) -> Path | None:
    """The folder in which per-run cgroups of this controller can be made, or None."""
    parent = own_dir / _CGROUP_PARENT
    limit_file = _CGROUP_LIMIT_FILES[(version, controller)]
    try:
        if version == "v2":
            # Children can only get a controller our own cgroup already hands down.
            if controller not in (own_dir / "cgroup.subtree_control").read_text().split():
                return None
            parent.mkdir(exist_ok=True)
            # The parent holds no process, so enabling the controller for its children is
            # allowed; it never touches the daemon's own cgroup.
            (parent / "cgroup.subtree_control").write_text(f"+{controller}")
        else:
            parent.mkdir(exist_ok=True)
        probe = parent / f"probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        probe.mkdir()
        ok = (probe / limit_file).exists()
        probe.rmdir()
    except OSError:
        return None
    return parent if ok else None


@functools.cache
def cgroup_parents() -> dict[str, tuple[Path, str, str]]:
    """controller -> (folder in which per-run cgroups are made, limit file, hierarchy version),
    where that works."""
    usable: dict[str, tuple[Path, str, str]] = {}
    for controller, (version, own_dir) in _own_cgroup_dirs().items():
        parent = _usable_parent(controller, version, own_dir)
        if parent is not None:
            usable[controller] = (parent, _CGROUP_LIMIT_FILES[(version, controller)], version)
            _remove_stale_cgroups(parent)
    return usable


def _remove_stale_cgroups(parent: Path) -> None:
    """Empty per-run cgroups left by daemons that died; those of live daemons are kept."""
    for child in parent.glob("run-*"):
        pid_text = child.name.split("-")[1] if child.name.count("-") >= 2 else ""
        if pid_text.isdigit() and not _pid_alive(int(pid_text)):
            with contextlib.suppress(OSError):
                child.rmdir()


def process_limit_mechanism() -> str:
    """How max_processes is enforced here: "cgroup", "rlimit" (non-root) or "none"."""
    if "pids" in cgroup_parents():
        return "cgroup"
    return "rlimit" if os.geteuid() != 0 else "none"


def memory_limit_mechanism() -> str:
    """How memory_mb is enforced here: "cgroup" (the run's total) or "rlimit" (per process)."""
    return "cgroup" if "memory" in cgroup_parents() else "rlimit"


class TrialCgroup:
    """The cgroups of one run: limits on entry, every member killed and the folders removed on
    exit."""

    def __init__(self, folders: list[Path], controllers: set[str]) -> None:
        self.folders = folders
        self.controllers = controllers

    @classmethod
    def create(cls, policy: SandboxPolicy) -> TrialCgroup | None:
        limits = {"pids": str(policy.max_processes), "memory": str(policy.memory_mb * 2**20)}
        name = f"run-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        folders: list[Path] = []
        controllers: set[str] = set()
        for controller, (parent, limit_file, version) in cgroup_parents().items():
            folder = parent / name
            try:
                folder.mkdir()
            except OSError:
                continue
            try:
                (folder / limit_file).write_text(limits[controller])
            except OSError:
                with contextlib.suppress(OSError):
                    folder.rmdir()
                continue
            extra = _CGROUP_EXTRA_FILES.get((version, controller))
            if extra is not None and (folder / extra[0]).exists():
                with contextlib.suppress(OSError):
                    (folder / extra[0]).write_text(extra[1] or limits[controller])
            folders.append(folder)
            controllers.add(controller)
        return cls(folders, controllers) if folders else None

    @property
    def procs_files(self) -> list[Path]:
        return [folder / "cgroup.procs" for folder in self.folders]

    def members(self) -> set[int]:
        pids: set[int] = set()
        for procs in self.procs_files:
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in procs.read_text().split())
        return pids

    def kill(self) -> None:
        for folder in self.folders:
            kill_file = folder / "cgroup.kill"
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1")
        for pid in self.members():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        deadline = time.monotonic() + CLEANUP_S
        while self.members() and time.monotonic() < deadline:
            self.kill()
            time.sleep(0.01)
        for folder in self.folders:
            try:
                folder.rmdir()
            except OSError as exc:
                _log.warning("sandbox.cgroup_left", folder=str(folder), error=str(exc))
