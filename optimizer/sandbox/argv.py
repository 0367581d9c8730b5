"""The bubblewrap command line of one confined run, from the options the installed bwrap has.
It must never bind anything of the host but the read-only system folders, /workspace and /skill."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from optimizer.sandbox.limits import limits_script, system_bash
from optimizer.sandbox.policy import SANDBOX_PATH, SKILL_MOUNT, WORK_MOUNT, SandboxPolicy, scrub_env

# The command runs as this uid in a user namespace of its own, without capabilities. bwrap maps
# it onto the uid that started bwrap (root here), so that uid's files look like the command's
# own: that is what lets it write /workspace, and why nothing of the host is bound but the
# read-only system folders and an allow-list of /etc.
_SANDBOX_UID = "1000"
# Only what programs need to start; /etc/shadow, pip.conf, npmrc, apt auth, ssh keys stay out.
_ETC_ALLOWED = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "crypto-policies",
    "debian_version",
    "fonts",
    "gai.conf",
    "group",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "locale.conf",
    "localtime",
    "lsb-release",
    "magic",
    "magic.mime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "perl",
    "pki",
    "profile",
    "protocols",
    "services",
    "shells",
    "ssl",
    "terminfo",
    "timezone",
    "vim",
    "xml",
)
_ETC_ALLOWED_GLOBS = ("python3*", "java-*")


@functools.cache
def bwrap_options() -> frozenset[str]:
    """Options of the installed bwrap, so that newer hardening flags are used where they exist."""
    exe = shutil.which("bwrap")
    if exe is None:
        return frozenset()
    try:
        done = subprocess.run(
            [exe, "--help"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(re.findall(r"(--[a-z0-9-]+)", done.stdout + done.stderr))


def _system_dir_args() -> Iterator[str]:
    yield from ("--ro-bind", "/usr", "/usr")
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / name
        if host.is_symlink():
            yield from ("--symlink", os.readlink(host), f"/{name}")
        elif host.is_dir():
            yield from ("--ro-bind", str(host), f"/{name}")
    etc = Path("/etc")
    names = set(_ETC_ALLOWED)
    for pattern in _ETC_ALLOWED_GLOBS:
        names.update(p.name for p in etc.glob(pattern))
    for name in sorted(names):
        if (etc / name).exists():
            yield from ("--ro-bind-try", f"/etc/{name}", f"/etc/{name}")


def _namespace_args(options: frozenset[str]) -> list[str]:
    argv = ["--unshare-user", "--uid", _SANDBOX_UID, "--gid", _SANDBOX_UID]
    if "--disable-userns" in options:
        argv.append("--disable-userns")
    argv += [
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    return argv


def _env_args(skill_dir: Path | None, env: Mapping[str, str] | None) -> list[str]:
    inner_env = {
        "PATH": SANDBOX_PATH,
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "WORKSPACE": WORK_MOUNT,
    }
    if skill_dir is not None:
        inner_env["SKILL_DIR"] = SKILL_MOUNT
    inner_env.update(scrub_env(env))
    argv: list[str] = []
    for key, value in inner_env.items():
        argv += ["--setenv", key, value]
    return argv


def bwrap_argv(
    cmd: list[str],
    work_dir: Path,
    skill_dir: Path | None,
    policy: SandboxPolicy,
    env: Mapping[str, str] | None,
    status_fd: int | None,
    address_space: bool,
    binds: Sequence[tuple[str, str, str]] = (),
) -> list[str]:
    """bwrap's argv; `binds` are more (option, host path, sandbox path) mounts, for a program
    the sandbox runs that is not in the system folders (the Claude Code CLI, its relay socket)."""
    options = bwrap_options()
    argv = [shutil.which("bwrap") or "bwrap", *_namespace_args(options)]
    # Nothing is bound but the system folders: the home, /work, the host /tmp, /opt and the
    # project do not exist inside, which is stronger than hiding them under a tmpfs.
    argv += list(_system_dir_args())
    argv += ["--dev", "/dev", "--proc", "/proc"]
    if "--size" in options:
        argv += ["--size", str(policy.memory_mb * 2**20)]
    argv += ["--tmpfs", "/tmp"]
    argv += ["--bind", str(work_dir), WORK_MOUNT]
    if skill_dir is not None:
        argv += ["--ro-bind", str(skill_dir), SKILL_MOUNT]
    for option, host, inside in binds:
        argv += [option, host, inside]
    # bwrap builds the skeleton (/, /etc) on a tmpfs; read-only, nothing can be planted there.
    argv += ["--remount-ro", "/"]
    argv += ["--chdir", WORK_MOUNT, "--clearenv"]
    argv += _env_args(skill_dir, env)
    if status_fd is not None:
        argv += ["--json-status-fd", str(status_fd)]
    argv += [
        "--",
        system_bash(),
        "-c",
        limits_script(policy, policy.max_processes, address_space),
        "sandbox-limits",
        *cmd,
    ]
    return argv
