"""The fixed sandbox paths (/workspace, /skill) and the host folders behind them, both ways.
It must never map a path out of those two folders (by `..` or a symlink), nor a write to /skill."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from pathlib import Path

from optimizer.sandbox.policy import SKILL_MOUNT, WORK_MOUNT


def _normalize_sandbox_path(sandbox_path: str) -> str | None:
    if not sandbox_path or "\x00" in sandbox_path:
        return None
    path = sandbox_path if sandbox_path.startswith("/") else f"{WORK_MOUNT}/{sandbox_path}"
    path = posixpath.normpath(path)
    # normpath keeps a leading "//" (POSIX leaves it implementation-defined); treat it as "/".
    return "/" + path.lstrip("/")


def _within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def to_host_path(
    sandbox_path: str, work_dir: Path, skill_dir: Path | None, *, for_write: bool = False
) -> Path | None:
    """The host path behind a sandbox path (relative ones start at /workspace), or None when it
    leaves /workspace and /skill, by `..` or by a symlink; with for_write, /skill is refused."""
    path = _normalize_sandbox_path(sandbox_path)
    if path is None:
        return None
    skill_root = Path(skill_dir).resolve() if skill_dir is not None else None
    for mount, root in ((WORK_MOUNT, work_dir), (SKILL_MOUNT, skill_dir)):
        if root is None or not (path == mount or path.startswith(mount + "/")):
            continue
        if for_write and mount == SKILL_MOUNT:
            return None
        real_root = Path(root).resolve()
        # resolve() follows every symlink that exists, so a link planted by the command that
        # points outside is caught here, on the host, where it would be followed for real.
        candidate = (real_root / path[len(mount) :].lstrip("/")).resolve()
        if not _within(candidate, real_root):
            return None
        if for_write and skill_root is not None and _within(candidate, skill_root):
            return None
        return candidate
    return None


def to_sandbox_path(host_path: str | Path, work_dir: Path, skill_dir: Path | None) -> str | None:
    """The fixed sandbox path of a host path under work_dir or skill_dir, else None."""
    try:
        real = Path(host_path).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    roots = [(WORK_MOUNT, Path(work_dir).resolve())]
    if skill_dir is not None:
        roots.append((SKILL_MOUNT, Path(skill_dir).resolve()))
    # The most specific root wins, so a skill folder inside the work folder reads as /skill.
    for mount, root in sorted(roots, key=lambda item: len(item[1].parts), reverse=True):
        if _within(real, root):
            rel = real.relative_to(root).as_posix()
            return mount if rel == "." else f"{mount}/{rel}"
    return None


# The unconfined fallback cannot show /workspace and /skill, so fixed paths in the command are
# rewritten to per-run symlinks (short, space-free) and host paths in the output back again.
_FIXED_PATH = re.compile(r"(?<![\w.~/$-])(/workspace|/skill)(?![\w.-])")


def rewrite_fixed_paths(text: str, mapping: Mapping[str, str]) -> str:
    return _FIXED_PATH.sub(lambda m: mapping.get(m.group(1), m.group(1)), text)


def unrewrite_host_paths(text: str, mapping: Mapping[str, str]) -> str:
    # Longest first, so a host folder inside another is replaced before its parent is.
    for host, fixed in sorted(mapping.items(), key=lambda item: len(item[0]), reverse=True):
        text = text.replace(host, fixed)
    return text
