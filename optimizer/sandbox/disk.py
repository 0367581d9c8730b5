"""The total size of a run's workspace, measured the way its disk pays for it, against its limit.
It must never follow a symlink out of the folder, nor walk on once the limit is known passed.

Why a watcher and not a filesystem with a hard size (bench/workspace_limit.py measures all three):
- a size-capped tmpfs inside bwrap lives as long as one command, but a run is many commands (the
  agent's bash calls) plus writes made on the host between them (its editor tool, the Claude Code
  CLI), so the workspace would be copied in and out around every command (20 ms for 1 MB, 185 ms
  for 100 MB, each time), a timed-out command would lose its writes, and an unconfined run would
  have no limit at all;
- a loop-mounted image per run is exact and cheap (about 50 ms per run here: truncate, mkfs.ext4,
  mount), but needs root and a free loop device (absent in most containers and for a user's own
  daemon), so it could only ever be an extra for some machines;
- a watcher works for every executor, confined or not, as any user, and costs one walk of the
  folder per poll (about 13 µs per entry: 0.1 ms for 10 files, 13 ms for 1,000; polls are spaced
  out so that walking takes at most a tenth of a core). Its bound is
  not exact: a writer gains what it can write between two polls (12 MB confined, 30 MB
  unconfined for 10 MB files written at full speed against a 100 MB limit), each file capped by
  RLIMIT_FSIZE; the run then fails and the executor empties its workspace.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

# Every file, folder, link or node costs the disk at least an inode and a block; counting that
# minimum makes the byte limit bound the number of entries too (512 MB → at most 131072), so a
# run cannot exhaust inodes with empty files, and one walk never visits more than that.
MIN_ENTRY_BYTES = 4096
MB = 2**20


@dataclass(frozen=True)
class Usage:
    """What a folder holds: bytes as counted here, entries, and whether the walk stopped early
    because the limit was already passed (then both are lower bounds)."""

    bytes: int
    entries: int
    over: bool


def _cost(info: os.stat_result) -> int:
    # The larger of the apparent size and the allocated blocks: a sparse file costs its full size
    # as soon as it is copied (Ray sends run folders as bytes; export copies them).
    allocated = getattr(info, "st_blocks", 0) * 512
    return max(MIN_ENTRY_BYTES, info.st_size, allocated)


def measure(folder: Path, limit_bytes: int | None = None) -> Usage:
    """The size of everything under folder (the folder itself excluded), without following
    symlinks; stops as soon as the total passes limit_bytes. Entries that vanish while the walk
    runs (a command is still writing) are skipped."""
    total = entries = 0
    stack = [os.fspath(folder)]
    while stack:
        try:
            scan = os.scandir(stack.pop())
        except OSError:
            continue
        with scan:
            for entry in scan:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                entries += 1
                total += _cost(info)
                if limit_bytes is not None and total > limit_bytes:
                    return Usage(total, entries, True)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
    return Usage(total, entries, False)


def breach(folder: Path, max_workspace_mb: int) -> str | None:
    """One sentence when folder holds more than max_workspace_mb, else None."""
    usage = measure(folder, max_workspace_mb * MB)
    return over_limit_message(usage, max_workspace_mb) if usage.over else None


def over_limit_message(usage: Usage, max_workspace_mb: int) -> str:
    return (
        f"the workspace passed its size limit of {max_workspace_mb} MB "
        f"(sandbox.max_workspace_mb): at least {usage.bytes / MB:.0f} MB in "
        f"{usage.entries} files and folders"
    )
