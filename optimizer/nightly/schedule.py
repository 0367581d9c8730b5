"""`optimizer schedule`: one nightly entry per skill folder, as a systemd user timer and service
where `systemctl --user` answers, else as one crontab line where a `crontab` command is; with
neither, nothing is installed and the user is given the night's command for a scheduler of
theirs. Where they go is injectable, so tests never touch the user's own crontab or units:
OPTIMIZER_SYSTEMD_USER_DIR (the unit folder), OPTIMIZER_SYSTEMCTL and OPTIMIZER_CRONTAB (the
commands), OPTIMIZER_SCHEDULER (systemd | cron: which to try first)."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from optimizer.errors import BadInput, WorkFailed
from optimizer.store.files import write_text

PREFIX = "skill-optimizer-"
MARK = "# skill-optimizer:"  # ends each crontab line we own, with the entry's name
ENV_FILE = "~/.config/skill-optimizer/env"  # ANTHROPIC_API_KEY=… for the night; the user writes it
_TIME = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")


@dataclass(frozen=True)
class Entry:
    """One skill's night: when it starts, when it must stop, what it may spend, and how it runs."""

    skill_dir: Path  # absolute
    at: str  # HH:MM local
    until: str  # HH:MM local
    budget_usd: float
    runs_root: Path  # absolute
    workdir: Path  # absolute: where config.toml and relative paths are read from
    fresh: bool = False
    # What each night's command passes on: --config, --set (a shorthand as its --set), --notify.
    extra: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """A unit name per skill folder: readable, and unique by the folder's absolute path."""
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.skill_dir.name).strip("-") or "skill"
        digest = hashlib.sha256(str(self.skill_dir).encode()).hexdigest()[:8]
        return f"{PREFIX}{slug}-{digest}"

    def argv(self) -> list[str]:
        """The command a night runs."""
        return [
            sys.executable,
            "-m",
            "optimizer",
            "nightly",
            str(self.skill_dir),
            "--until",
            self.until,
            "--budget-usd",
            f"{self.budget_usd:g}",
            "--runs-root",
            str(self.runs_root),
            *(["--fresh"] if self.fresh else []),
            *self.extra,
        ]


def check_time(flag: str, text: str) -> str:
    m = _TIME.fullmatch(text.strip())
    if not m:
        raise BadInput(f"{flag} {text!r}: give a local time as HH:MM, e.g. 22:30.")
    return f"{int(m.group(1)):02d}:{m.group(2)}"


def name_for(skill_dir: Path) -> str:
    return Entry(skill_dir.absolute(), "00:00", "00:00", 1.0, Path("."), Path(".")).name


# -- where: systemd or cron ---------------------------------------------------------------------------
def backend() -> str:
    """systemd when its user manager answers (`systemctl --user show-environment`), else cron when
    a `crontab` command is here, else none: the user's own scheduler must run the night."""
    forced = os.environ.get("OPTIMIZER_SCHEDULER", "").strip()
    if forced == "systemd" or (forced != "cron" and _systemd_answers()):
        return "systemd"
    cron = _crontab()
    return "cron" if cron and shutil.which(cron[0]) else "none"


def _systemd_answers() -> bool:
    cmd = shlex.split(os.environ.get("OPTIMIZER_SYSTEMCTL", "systemctl"))
    if not cmd or shutil.which(cmd[0]) is None:
        return False
    try:
        done = subprocess.run(
            [*cmd, "--user", "show-environment"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def no_scheduler() -> str:
    """Why nothing can be installed where neither answers (the start of a sentence)."""
    return (
        f"no scheduler to install into here (`{' '.join(_systemctl())}` does not answer and there "
        f"is no `{' '.join(_crontab())}` command)"
    )


def unit_dir() -> Path:
    default = (
        Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "systemd" / "user"
    )
    return Path(os.environ.get("OPTIMIZER_SYSTEMD_USER_DIR") or default)


def _systemctl(*args: str) -> list[str]:
    return [*shlex.split(os.environ.get("OPTIMIZER_SYSTEMCTL", "systemctl")), "--user", *args]


def _crontab(*args: str) -> list[str]:
    return [*shlex.split(os.environ.get("OPTIMIZER_CRONTAB", "crontab")), *args]


# -- what: the files and the line ----------------------------------------------------------------
def _unit_quote(arg: str) -> str:
    """One ExecStart argument: systemd expands % specifiers and $ variables, so both are doubled."""
    text = arg.replace("%", "%%").replace("$", "$$")
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def units(entry: Entry) -> dict[str, str]:
    """file name → text of the service and the timer."""
    h, m = entry.at.split(":")
    service = "\n".join(
        [
            "[Unit]",
            f"Description=skill optimizer: a night on {entry.skill_dir}",
            f"X-SkillOptimizer-Skill={entry.skill_dir}",
            "",
            "[Service]",
            "Type=oneshot",
            f"WorkingDirectory={_unit_quote(str(entry.workdir))}",
            f"EnvironmentFile=-{ENV_FILE.replace('~', '%h', 1)}",
            "ExecStart=" + " ".join(_unit_quote(a) for a in entry.argv()),
            "",
        ]
    )
    timer = "\n".join(
        [
            "[Unit]",
            f"Description=skill optimizer: every night at {entry.at} on {entry.skill_dir}",
            "",
            # Not Persistent: a night missed while the machine was off is skipped, not started at
            # boot in the morning with a deadline a day away.
            "[Timer]",
            f"OnCalendar=*-*-* {h}:{m}:00",
            "Persistent=false",
            f"Unit={entry.name}.service",
            "",
            "[Install]",
            "WantedBy=timers.target",
            "",
        ]
    )
    return {f"{entry.name}.service": service, f"{entry.name}.timer": timer}


def shell_command(entry: Entry) -> str:
    """A night as one sh command: the env file sourced when present, output appended to a log."""
    log = entry.runs_root / f"{entry.name}.log"
    env = ENV_FILE.replace("~", "$HOME", 1)
    cmd = " ".join(shlex.quote(a) for a in entry.argv())
    # The runs folder is made first: the log's redirection needs it before the night can make it.
    return (
        f"mkdir -p {shlex.quote(str(entry.runs_root))} && cd {shlex.quote(str(entry.workdir))} && "
        f'(set -a; [ -r "{env}" ] && . "{env}"; set +a; exec {cmd}) >> {shlex.quote(str(log))} 2>&1'
    )


def cron_line(entry: Entry) -> str:
    """One crontab line: the night's sh command at its time. `%` is a newline to cron, so it is
    escaped."""
    h, m = entry.at.split(":")
    body = shell_command(entry)
    return f"{int(m)} {int(h)} * * * {body.replace('%', chr(92) + '%')} {MARK}{entry.name}"


def plan(entry: Entry, where: str) -> str:
    """Exactly what install() writes and runs, for --dry-run."""
    if where == "systemd":
        folder = unit_dir()
        parts = [f"# {folder / name}\n{text}" for name, text in units(entry).items()]
        parts.append(
            "# then: "
            + " ".join(_systemctl("daemon-reload"))
            + " && "
            + " ".join(_systemctl("enable", "--now", f"{entry.name}.timer"))
        )
        return "\n".join(parts) + "\n"
    if where == "none":
        return (
            f"# nothing can be installed here: have a scheduler of yours run this every night "
            f"at {entry.at}:\n{shell_command(entry)}\n"
        )
    return (
        f"# appended to `{' '.join(_crontab('-l'))}` (a line for the same skill is replaced):\n"
        f"{cron_line(entry)}\n"
    )


# -- doing it -----------------------------------------------------------------------------------
def _run(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkFailed(f"`{' '.join(argv)}` could not run ({exc}).") from None


def _must(argv: list[str], stdin: str | None = None) -> str:
    done = _run(argv, stdin)
    if done.returncode != 0:
        raise WorkFailed(
            f"`{' '.join(argv)}` failed ({done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[:300]}"
        )
    return done.stdout


def _cron_lines() -> list[str]:
    try:
        done = _run(_crontab("-l"))
    except WorkFailed:  # no crontab command here (a systemd machine without cron): no lines of ours
        return []
    # `crontab -l` fails when the user has no crontab yet: that is an empty one.
    return done.stdout.splitlines() if done.returncode == 0 else []


def install(entry: Entry, where: str) -> str:
    if where == "none":
        raise BadInput(
            f"{no_scheduler()}, so nothing was installed; have a scheduler of yours run this every "
            f"night at {entry.at}: {shell_command(entry)}"
        )
    if where == "systemd":
        folder = unit_dir()
        for name, text in units(entry).items():
            write_text(folder / name, text)
        _must(_systemctl("daemon-reload"))
        _must(_systemctl("enable", "--now", f"{entry.name}.timer"))
        return f"installed {folder / entry.name}.timer (every night at {entry.at}, until {entry.until})"
    lines = [line for line in _cron_lines() if not line.endswith(f"{MARK}{entry.name}")]
    _must(_crontab("-"), "\n".join([*lines, cron_line(entry)]) + "\n")
    return f"installed a crontab line {entry.name} (every night at {entry.at}, until {entry.until})"


def remove(skill_dir: Path) -> str:
    name = name_for(skill_dir)
    removed = []
    folder = unit_dir()
    files = [folder / f"{name}.timer", folder / f"{name}.service"]
    if any(p.exists() for p in files):
        _run(_systemctl("disable", "--now", f"{name}.timer"))  # an already stopped timer is fine
        for path in files:
            path.unlink(missing_ok=True)
        _run(_systemctl("daemon-reload"))
        removed.append(f"the systemd timer {name}")
    lines = _cron_lines()
    kept = [line for line in lines if not line.endswith(f"{MARK}{name}")]
    if len(kept) != len(lines):
        _must(_crontab("-"), "\n".join(kept) + ("\n" if kept else ""))
        removed.append(f"the crontab line {name}")
    if not removed:
        raise BadInput(
            f"{skill_dir}: has no nightly schedule; `optimizer schedule --list` shows them."
        )
    return "removed " + " and ".join(removed)


def entries() -> list[dict[str, str]]:
    """Every schedule of ours, from the unit folder and the crontab, sorted by name."""
    found = []
    folder = unit_dir()
    for timer in sorted(folder.glob(f"{PREFIX}*.timer")) if folder.is_dir() else []:
        text = timer.read_text(encoding="utf-8")
        service = timer.with_suffix(".service")
        body = service.read_text(encoding="utf-8") if service.is_file() else ""
        at = re.search(r"^OnCalendar=\S+ (\d\d:\d\d)", text, re.M)
        skill = re.search(r"^X-SkillOptimizer-Skill=(.*)$", body, re.M)
        found.append(
            {
                "name": timer.stem,
                "where": "systemd",
                "at": at.group(1) if at else "?",
                "skill_dir": skill.group(1) if skill else "?",
                "command": _exec(body),
            }
        )
    for line in _cron_lines():
        if MARK in line:
            fields = line.split(None, 5)
            argv = line.split(" exec ", 1)[-1].split(")", 1)[0]
            found.append(
                {
                    "name": line.rsplit(MARK, 1)[1],
                    "where": "cron",
                    "at": f"{int(fields[1]):02d}:{int(fields[0]):02d}" if len(fields) > 2 else "?",
                    "skill_dir": _skill_of(argv),
                    "command": argv,
                }
            )
    return sorted(found, key=lambda e: (e["name"], e["where"]))


def _exec(body: str) -> str:
    m = re.search(r"^ExecStart=(.*)$", body, re.M)
    return m.group(1) if m else ""


def _skill_of(command: str) -> str:
    try:
        argv = shlex.split(command)
    except ValueError:
        return "?"
    return argv[argv.index("nightly") + 1] if "nightly" in argv[:-1] else "?"
