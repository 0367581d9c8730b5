"""`optimizer nightly SKILL_DIR` (hidden; the command a schedule runs): one night's work. The last
night's run is resumed from its best with a fresh budget (what it spent plus tonight's) and
deadline, or with --fresh a new run starts from its best (`--from`, visible in lineage). A night
that finds the last run alive starts nothing. A night that cannot run says why in one sentence,
in the nightly log and in the summary; it never retries by itself."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rich.console import Console

from optimizer import config, daemon, words
from optimizer.errors import OptimizerError
from optimizer.fleet import daemon as fleets
from optimizer.fleet import folder, members
from optimizer.fleet import views as fleet_views
from optimizer.inputs import skill as skills
from optimizer.report import summary
from optimizer.store import iterations, money, readonly, runs
from optimizer.store.files import Workspace, write_text
from optimizer.store.lock import running_pid
from optimizer.store.runs import Run

NIGHT = "-night-"  # run folders of nights: <runs_root>/<skill>-night-<YYYYmmdd-HHMMSS>


def runs_of(runs_root: Path, skill_name: str) -> list[Path]:
    """The nights' run folders of a skill that hold a run, oldest first (the name is the time)."""
    return sorted(
        p
        for p in runs_root.glob(f"{skill_name}{NIGHT}*")
        if p.is_dir() and Workspace(p).state_db.is_file()
    )


def _new_folder(runs_root: Path, name: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path, k = runs_root / f"{name}{NIGHT}{stamp}", 1
    while path.exists():  # two nights in one second (by hand) keep separate folders, in order
        k += 1
        path = runs_root / f"{name}{NIGHT}{stamp}-{k}"
    return path


def log_line(runs_root: Path, name: str, text: str) -> Path:
    """One line appended to the nightly log, which a night's failures never leave empty."""
    path = runs_root / f"{name}.log"
    runs_root.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"{datetime.now().isoformat(timespec='seconds')} {text}\n")
    return path


@dataclass(frozen=True)
class Tonight:
    """What a night is asked to do: the skill folder (or a folder of them: a fleet), tonight's
    budget and deadline, a new run or the last one resumed, where nights keep their runs and log,
    what to notify, the settings' loader (tonight's budget and deadline as flags: a new run's) and
    the user's --set."""

    skill_dir: Path
    until: str
    budget_usd: float
    fresh: bool
    runs_root: Path
    notify: str | None
    load: daemon.LoadSettings
    overrides: list[str]
    log_name: str

    def log(self, text: str) -> Path:
        return log_line(self.runs_root, self.log_name, text)


def run_night(tonight: Tonight, console: Console) -> int:
    """The night's exit code: 0 when it ran (or rightly started nothing), else the failure's.
    A folder of skill folders is a fleet: each night resumes the last night's fleet, or starts
    one."""
    dirs = members.folders([tonight.skill_dir], None, home=Path.home(), here=Path.cwd())
    if dirs is not None:
        return _fleet_night(tonight, dirs, console)
    name = skills.load_skill(tonight.skill_dir).name
    previous = runs_of(tonight.runs_root, name)
    last = previous[-1] if previous else None
    if _still_running(tonight, last, "run", console):
        return 0
    fresh_run = last is None or tonight.fresh
    missing = api_key_missing(tonight.load({}).settings) if fresh_run else None
    if missing:  # before a run folder is made that no night could use
        return _failed(tonight, missing, tonight.runs_root / "-", console, 2)
    target = _new_folder(tonight.runs_root, name) if fresh_run else last
    assert target is not None
    how = (
        f"resuming {last}"
        if not fresh_run
        else f"starting {target}" + (f" from the best of {last}" if last else "")
    )
    tonight.log(f"{how} (budget ${tonight.budget_usd:g} tonight, until {tonight.until})")
    try:
        if fresh_run:
            new = daemon.NewRun(
                tonight.skill_dir,
                run_dir=target,
                from_run=last if tonight.fresh else None,
                notify=tonight.notify,
            )
            code = daemon.start(new, tonight.load, console)
        else:
            code = daemon.resume(
                target,
                overrides=resume_overrides(tonight.overrides, tonight.load),
                flags=_resume_flags(target, tonight.budget_usd, tonight.until, tonight.load),
                detach=False,
                console=console,
                notify=tonight.notify,
            )
    except OptimizerError as exc:
        if exc.exit_code == 0:  # a clean stop is a night that ran
            return 0
        return _failed(tonight, exc.problems[0], target, console, exc.exit_code)
    row = runs.read(Workspace(target).state_db) or Run()
    # How it ended, in the run's own words: a budget spent at once is one sentence here too.
    tonight.log(how_it_ended(target, row, summary.paths(target)[0]))
    return code


def _still_running(tonight: Tonight, last: Path | None, what: str, console: Console) -> bool:
    """The previous night's run (or fleet) still holds its lock: said in the log and on the
    console; this night starts nothing."""
    ws = (folder.workspace(last) if what == "fleet" else Workspace(last)) if last else None
    pid = running_pid(ws) if ws is not None else None
    if pid is None:
        return False
    line = f"{last}: the previous night's {what} is still running (pid {pid}); this night starts nothing."
    tonight.log(line)
    console.print(line, markup=False, highlight=False)
    return True


def _fleet_night(tonight: Tonight, dirs: list[Path], console: Console) -> int:
    """A night over a folder of skills: the last night's fleet resumed with tonight's budget on
    top of what it spent, or (the first night, or --new-run-each-night) a new fleet."""
    name = f"{tonight.skill_dir.resolve().name}-fleet"
    previous = sorted(
        p for p in tonight.runs_root.glob(f"{name}{NIGHT}*") if p.is_dir() and folder.is_fleet(p)
    )
    last = previous[-1] if previous else None
    if _still_running(tonight, last, "fleet", console):
        return 0
    fresh_run = last is None or tonight.fresh
    missing = api_key_missing(tonight.load({}).settings)
    if missing:
        return _failed(tonight, missing, tonight.runs_root / "-", console, 2)
    target = _new_folder(tonight.runs_root, name) if fresh_run else last
    assert target is not None
    how = f"resuming {last}" if not fresh_run else f"starting {target}"
    tonight.log(f"{how} (budget ${tonight.budget_usd:g} tonight, until {tonight.until})")
    try:
        if fresh_run:
            fleet = fleets.NewFleet(dirs, run_dir=target, notify=tonight.notify)
            code = fleets.start(fleet, tonight.load, console)
        else:
            spent = fleet_views.status(target)["budgeted_usd"]
            code = fleets.resume(
                target,
                overrides=resume_overrides(tonight.overrides, tonight.load),
                flags={
                    "budget.usd": round(spent + tonight.budget_usd, 6),
                    "budget.deadline": tonight.until,
                },
                detach=False,
                console=console,
                notify=tonight.notify,
            )
    except OptimizerError as exc:
        if exc.exit_code == 0:
            return 0
        return _failed(tonight, exc.problems[0], target, console, exc.exit_code)
    tonight.log(f"{target}: the fleet's night ended (summary: {target / 'summary.md'})")
    return code


def how_it_ended(target: Path, row: Run, summary_md: Path) -> str:
    """The night's last log line: 'runs/x: stopped by SIGTERM (summary: …)', the reason said once."""
    reason = row.stop_reason or row.last_error or "see the summary"
    return f"{target}: {words.ended(row.status, reason)} (summary: {summary_md})"


def resume_overrides(overrides: list[str], load: Callable[[dict], config.Loaded]) -> list[str]:
    """The night's --set for a resume: no iteration limit a night (the default) lifts the one an
    older run.toml still holds (loop.max_iterations was 2 by default before issue 48)."""
    unlimited = load({}).settings.loop.max_iterations is None
    return [*overrides, "loop.max_iterations=none"] if unlimited else list(overrides)


def _resume_flags(
    run_dir: Path, budget_usd: float, until: str, load: Callable[[dict], config.Loaded]
) -> dict:
    """Tonight's budget on top of what the run has spent, its deadline, and tonight's iterations
    on top of those done (the config's loop.max_iterations a night, when it sets one), so a run
    that reached its limit last night goes on."""
    with readonly.View(Workspace(run_dir).state_db) as db:
        spent, done = money.account(db).budgeted_usd, iterations.finished_count(db)
    per_night = load({}).settings.loop.max_iterations
    return {
        "budget.usd": round(spent + budget_usd, 6),
        "budget.deadline": until,
        # no limit a night (the default): none for the run either (an override, night())
        "loop.max_iterations": None if per_night is None else done + per_night,
    }


def _failed(tonight: Tonight, sentence: str, target: Path, console: Console, code: int) -> int:
    """One sentence in the log and in the summary (the run's own when the run folder exists,
    else one beside the log), then the user's notify command."""
    tonight.log(f"this night did not run: {sentence}")
    console.print(f"error: {sentence}", markup=False, highlight=False)
    if Workspace(target).state_db.is_file() and readonly.count_runs(Workspace(target).state_db):
        summary.at_end(target, tonight.notify, console, night_error=sentence)
        return code
    path = tonight.runs_root / f"{tonight.log_name}-summary.md"
    write_text(
        path,
        f"# Morning summary: {tonight.log_name}\n\n**This night did not run: {sentence}**\n\n"
        f"Nightly log: `{tonight.runs_root / (tonight.log_name + '.log')}`.\n",
    )
    if tonight.notify:
        summary.notify(tonight.notify, path)
    return code


def api_key_missing(settings: config.Settings) -> str | None:
    """The sentence of a night that would call the API without a key, before anything is made."""
    if settings.llm.provider == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"):
        return (
            "No API key: set ANTHROPIC_API_KEY (the schedule reads ~/.config/skill-optimizer/env)."
        )
    return None
