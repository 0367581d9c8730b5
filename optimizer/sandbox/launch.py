"""How one command is started: bubblewrap's argv when confined, rewritten paths when not.
It must never pass a credential-looking variable, nor show the command a host path it can avoid."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from optimizer.sandbox.argv import bwrap_argv, bwrap_options
from optimizer.sandbox.cgroups import TrialCgroup
from optimizer.sandbox.limits import (
    cgroup_join_prefix,
    limits_script,
    system_bash,
    unconfined_nproc,
)
from optimizer.sandbox.paths import rewrite_fixed_paths
from optimizer.sandbox.policy import SANDBOX_PATH, SKILL_MOUNT, WORK_MOUNT, SandboxPolicy, scrub_env


@dataclass
class Launch:
    """What supervise() starts, and the host paths to show as fixed ones in the output."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    status_pipe: tuple[int, int] | None = None
    host_to_fixed: dict[str, str] = field(default_factory=dict)


def confined_launch(
    cmd: list[str],
    work_dir: Path,
    skill_dir: Path | None,
    policy: SandboxPolicy,
    env: Mapping[str, str] | None,
    cgroup: TrialCgroup | None,
    address_space: bool,
) -> Launch:
    # bwrap's status tells which process is the sandbox's pid 1, and whether the command started.
    status_pipe = os.pipe() if "--json-status-fd" in bwrap_options() else None
    argv = bwrap_argv(
        cmd,
        work_dir.resolve(),
        Path(skill_dir).resolve() if skill_dir is not None else None,
        policy,
        env,
        status_pipe[1] if status_pipe else None,
        address_space,
    )
    if cgroup is not None:
        argv = ["/bin/sh", "-c", cgroup_join_prefix(cgroup) + 'exec "$@"', "sandbox-cgroup", *argv]
    return Launch(
        argv, cwd="/", env={"PATH": SANDBOX_PATH, "LANG": "C.UTF-8"}, status_pipe=status_pipe
    )


# Unconfined ("none", or "auto" without bwrap): the whole host is visible and /workspace,
# /skill exist only as rewritten text pointing at per-run symlinks. Best effort: a path the
# command assembles at run time ("/work""space") is not found.


def unconfined_launch(
    cmd: list[str],
    work_dir: Path,
    skill_dir: Path | None,
    policy: SandboxPolicy,
    env: Mapping[str, str] | None,
    cgroup: TrialCgroup | None,
    address_space: bool,
    scratch: Path,
) -> Launch:
    """The command with its fixed paths pointed at symlinks in scratch, an empty folder that
    the caller removes after the run."""
    links = _scratch_links(scratch, work_dir, skill_dir)
    cmd = [rewrite_fixed_paths(arg, links) for arg in cmd]
    script = cgroup_join_prefix(cgroup) + limits_script(
        policy, unconfined_nproc(policy), address_space
    )
    return Launch(
        [system_bash(), "-c", script, "sandbox-limits", *cmd],
        cwd=links[WORK_MOUNT],
        env=_unconfined_env(policy, env, scratch, links),
        host_to_fixed=_host_to_fixed(scratch, work_dir, skill_dir, links),
    )


def _scratch_links(scratch: Path, work_dir: Path, skill_dir: Path | None) -> dict[str, str]:
    """fixed path -> its symlink in scratch; scratch/tmp is the command's /tmp and home."""
    links = {WORK_MOUNT: scratch / "workspace"}
    (scratch / "workspace").symlink_to(work_dir.resolve(), target_is_directory=True)
    if skill_dir is not None:
        links[SKILL_MOUNT] = scratch / "skill"
        (scratch / "skill").symlink_to(Path(skill_dir).resolve(), target_is_directory=True)
    (scratch / "tmp").mkdir()
    return {mount: str(link) for mount, link in links.items()}


def _host_to_fixed(
    scratch: Path, work_dir: Path, skill_dir: Path | None, links: Mapping[str, str]
) -> dict[str, str]:
    host_to_fixed = {
        str(scratch / "tmp"): "/tmp",
        str(work_dir.absolute()): WORK_MOUNT,
        str(work_dir.resolve()): WORK_MOUNT,
        links[WORK_MOUNT]: WORK_MOUNT,
    }
    if skill_dir is not None:
        host_to_fixed.update(
            {
                str(Path(skill_dir).absolute()): SKILL_MOUNT,
                str(Path(skill_dir).resolve()): SKILL_MOUNT,
                links[SKILL_MOUNT]: SKILL_MOUNT,
            }
        )
    return host_to_fixed


def _unconfined_env(
    policy: SandboxPolicy, env: Mapping[str, str] | None, scratch: Path, links: Mapping[str, str]
) -> dict[str, str]:
    if policy.mode == "none":
        proc_env = scrub_env(os.environ)
    else:
        proc_env = {
            "PATH": os.environ.get("PATH", SANDBOX_PATH),
            "HOME": str(scratch / "tmp"),
            "TMPDIR": str(scratch / "tmp"),
            "LANG": "C.UTF-8",
        }
    proc_env.update({"WORKSPACE": links[WORK_MOUNT], "PWD": links[WORK_MOUNT]})
    if SKILL_MOUNT in links:
        proc_env["SKILL_DIR"] = links[SKILL_MOUNT]
    proc_env.update(scrub_env(env))
    return proc_env
