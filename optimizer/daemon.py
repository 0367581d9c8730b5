"""The long run around the loop: check the inputs, hold the run folder's lock, fork or run in the
foreground, stop cleanly. The folder's creation lives in store/workspace.py, export in
store/export.py. Never runs two daemons on one run folder and never loses committed state."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import structlog
from rich.console import Console

from optimizer import config, sandbox
from optimizer.budget import estimate as preview
from optimizer.budget.stops import SignalFlag, parse_deadline
from optimizer.errors import BadInput, WorkFailed
from optimizer.execute.claude_env import find_claude
from optimizer.grow import outlook
from optimizer.inputs import evals, skeleton
from optimizer.inputs import skill as skills
from optimizer.inputs import triggers as trigger
from optimizer.inputs import validate as validation
from optimizer.model import prompts as prompting
from optimizer.report import spend, summary
from optimizer.report.resume import budget_refusal, resume_point
from optimizer.search import probe, runfolder
from optimizer.store import readonly, registry, resumes, runs, runtoml, workspace
from optimizer.store.errors import StoreError
from optimizer.store.files import Workspace, write_text
from optimizer.store.lock import mark_starting, running_pid
from optimizer.store.runs import Run

log = structlog.get_logger()

# The settings of a night, from the eval file's own eval_config (the CLI layers its files, flags
# and --set over it).
LoadSettings = Callable[[dict[str, object]], config.Loaded]


def _default_run_dir(skill_name: str) -> Path:
    return Path("runs") / f"{skill_name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


@dataclass(frozen=True)
class NewRun:
    """What `optimizer run` is asked for one skill: its folder and evals (default
    SKILL_DIR/evals/evals.json), the run folder (default runs/<skill>-<time>), an earlier run
    whose best it starts from, the target, whether it runs in the background, replaces a run
    folder (`fresh`) or starts beside a live run of the same skill folder (`force`), whether it
    only shows the cost estimate (`dry_run`), and the command to notify when it ends."""

    skill_dir: Path
    evals_path: Path | None = None
    run_dir: Path | None = None
    from_run: Path | None = None
    target: str = "body"
    detach: bool = False
    fresh: bool = False
    force: bool = False
    dry_run: bool = False
    notify: str | None = None


def start(new: NewRun, load: LoadSettings, console: Console) -> int:
    """`optimizer run`: check everything first (nothing is written on bad input), then create
    the workspace and run the loop here or in the background."""
    prompting.check_installed()
    skill, evalset, loaded = read_inputs(new.skill_dir, new.evals_path, new.target, load)
    settings = loaded.settings
    deadline = not_past(parse_deadline(settings.budget.deadline), settings.budget.deadline)
    base_best = workspace.best_of(new.from_run) if new.from_run else None
    estimate = preview.for_start(settings, evalset, base_best or new.skill_dir, new.target)
    small = spend.too_small(estimate) if base_best is None else None
    if new.dry_run:  # the cost preview only: nothing is written
        code = spend.show_dry_run(console, estimate)
        _warn_small(console, evalset, settings)
        if small:
            raise BadInput(small)
        return code
    if small:  # before anything is written or paid
        raise BadInput(small)
    unconfined = _confinement(settings)  # refuses before anything is written
    if new.run_dir is None and not new.force:
        _refuse_a_second_run(new.skill_dir)
    run_dir = new.run_dir or _default_run_dir(skill.name)
    ws = Workspace(run_dir)
    _clear(ws, new.fresh)
    if deadline is not None:  # "07:00" means the next 07:00 from now, also after a resume
        budget = settings.budget.model_copy(
            update={"deadline": deadline.isoformat(timespec="seconds")}
        )
        settings = settings.model_copy(update={"budget": budget})
    workspace.create(
        ws,
        settings,
        dict(loaded.sources),
        workspace.RunInputs(
            skill_dir=new.skill_dir,
            skill=skill,
            evalset=evalset,
            evals_path=new.evals_path,
            target=new.target,
        ),  # fmt: skip
        from_run=new.from_run,
        base_best=base_best,
    )
    console.print(f"run folder: {run_dir}")
    if unconfined:
        console.print(unconfined, style="bold red", markup=False, highlight=False)
    spend.announce(console, ws, estimate)  # the estimate line, kept in state.db for `status`
    _warn_small(console, evalset, settings)
    if new.detach:
        return spawn(ws, console, new.notify)
    return _foreground_summarised(ws, settings, console, notify=new.notify)


def _clear(ws: Workspace, fresh: bool) -> None:
    """The run folder made ready for a new run: a run there is refused unless `fresh` replaces
    it (never while its daemon lives); what a `run` killed while creating it left is removed."""
    if workspace.started(ws):
        if not fresh:
            raise BadInput(
                f"{ws.root}: already holds a run; continue it with `optimizer resume "
                f"{ws.root}`, or pick another --out folder."
            )
        _refuse_if_running(ws)
        shutil.rmtree(ws.root)
    elif ws.run_toml.exists() or ws.state_db.exists():  # a `run` killed while creating it
        _refuse_if_running(ws)
        workspace.remove_partial(ws)


def read_inputs(
    skill_dir: Path, evals_path: Path | None, target: str, load: LoadSettings
) -> tuple[skills.Skill, evals.EvalSet | trigger.TriggerSet, config.Loaded]:
    """A skill folder, its evals and the settings they ask for, each checked; BadInput (one
    sentence) for the first problem, before anything is written."""
    skill = skills.load_skill(skill_dir)
    # A description run is scored by trigger evals ({query, should_trigger}), not evals.json.
    evalset = (
        trigger.load(skill_dir, evals_path)
        if target == "description"
        else evals.load_evals(skill_dir, evals_path)
    )
    todo = isinstance(evalset, evals.EvalSet) and skeleton.placeholder_sentence(
        evalset.source, "replace them before a run spends money on them (evals/README.md says how)"
    )
    if todo:
        raise BadInput(todo)
    loaded = load(evalset.eval_config)
    if target == "description" and probe.method_for(loaded.settings) == "claude-code":
        find_claude(loaded.settings)  # a missing CLI is bad input before anything is written
    return skill, evalset, loaded


def not_past(at: datetime | None, given: str) -> datetime | None:
    """A deadline a night can keep: BadInput, before anything is written, for one that has
    passed (HH:MM always names the next such time; an ISO time may be behind us)."""
    if at is not None and at <= datetime.now():
        raise BadInput(
            f"--until {given}: that time has passed ({at:%Y-%m-%d %H:%M}); give a later one, "
            "e.g. --until 07:00 (the next 07:00)."
        )
    return at


def _warn_small(console: Console, evalset: object, settings: config.Settings) -> None:
    """Said before a night is spent on a suite too small to conclude from, not only after it.
    Trigger queries have their own three-way split and are left out."""
    if not isinstance(evalset, evals.EvalSet):
        return
    fraction = settings.evals.test_fraction
    parts = evals.split(evalset, test_fraction=fraction, seed=settings.loop.seed)
    small = validation.small_suite(len(parts.train), len(parts.test), fraction)
    if small:
        console.print(f"warning: {small}", style="yellow", markup=False, highlight=False)


def resume(
    run_dir: Path,
    *,
    overrides: list[str],
    flags: dict,
    detach: bool,
    console: Console,
    notify: str | None = None,
    keep_stop: bool = False,
) -> int:
    """`optimizer resume`, and the loop of a detached run or resume (`keep_stop`: a `stop` that
    reached it while it was starting left the STOP file, which its first check reads)."""
    prompting.check_installed()
    ws = Workspace(run_dir)
    runfolder.require(ws, "start one with `optimizer run SKILL_DIR`.")
    if not workspace.started(ws):
        raise BadInput(
            f"{run_dir}: its creation was interrupted before the run began; start it "
            "again with the same `optimizer run` command."
        )
    if readonly.count_runs(ws.state_db) == 0:  # the run began (history.json) but its row is gone
        raise WorkFailed(
            f"{ws.state_db}: holds no run although the run began (the database was "
            "emptied or replaced); restore it from a copy or start a new run."
        )
    loaded = runfolder.settings_from(ws, overrides, flags, restore="restore it or start a new run")
    settings = loaded.settings
    unconfined = _confinement(settings)
    if flags.get("budget.deadline"):
        at = not_past(parse_deadline(flags["budget.deadline"]), flags["budget.deadline"])
        settings = settings.model_copy(
            update={
                "budget": settings.budget.model_copy(
                    update={"deadline": at.isoformat(timespec="seconds") if at else ""}
                )
            }
        )
    estimate = preview.for_workspace(ws, settings)
    broke = None
    with suppress(StoreError):  # a damaged state.db is said when the loop opens it
        broke = budget_refusal(ws, settings, estimate)
    if broke:  # before anything is written
        raise BadInput(broke)
    if loaded.sources != {k: "run.toml" for k in loaded.sources}:
        write_text(ws.run_toml, runtoml.to_toml(settings, loaded.sources))
    _refuse_if_running(ws)
    if not keep_stop:
        ws.stop_file.unlink(missing_ok=True)
    if unconfined:
        console.print(unconfined, style="bold red", markup=False, highlight=False)
    # A damaged state.db gets no line here: opening it for the loop says so, in one sentence.
    with suppress(StoreError):
        console.print(resume_point(ws, settings), markup=False, highlight=False)
        grown = outlook.resume_note(
            ws.root, runs.read(ws.state_db) or Run(), settings.model_dump(mode="json")
        )
        if grown:  # the evals grew since the start: they are for the next run, never this one
            console.print(grown, markup=False, highlight=False)
    spend.announce(console, ws, estimate, keep=False)
    if detach:
        return spawn(ws, console, notify)
    return _foreground_summarised(ws, settings, console, resumed=True, notify=notify)


def _confinement(settings: config.Settings) -> str | None:
    """BadInput when model-written commands would run unconfined without the user's consent (no
    bubblewrap); the console line to show when they run unconfined because the user asked."""
    return sandbox.startup_line(sandbox.SandboxPolicy.from_settings(settings.sandbox))


def _refuse_a_second_run(skill_dir: Path) -> None:
    """A second `run` of a skill folder while one is alive is more often a mistake (a terminal
    lost) than a wish: said, and done only when asked for."""
    found = registry.alive(skill_dir)
    if found is not None:
        folder, pid = found
        raise BadInput(
            f"{skill_dir}: a run of this skill folder is alive in {folder} (pid {pid}); watch it "
            f"with `optimizer status {folder}`, or start another with --out DIR (a run folder of "
            "its own) or --force."
        )


def _refuse_if_running(ws: Workspace) -> None:
    runfolder.refuse_if_running(
        ws,
        lambda pid: (
            f"{ws.root}: a daemon is already running on this run folder (pid {pid}); "
            f"stop it first with `optimizer stop {ws.root}`."
        ),
    )


def spawn(ws: Workspace, console: Console, notify: str | None = None) -> int:
    """The loop of a run folder (or a fleet folder) in the background: `optimizer resume` in a
    session of its own, its output in daemon.out, and the commands to watch and stop it."""
    out = open(ws.root / "daemon.out", "ab")  # noqa: SIM115 - handed to the child
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "optimizer",
            "resume",
            str(ws.root),
            "--keep-stop",
            *(["--notify", notify] if notify else []),
        ],
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=out,
        start_new_session=True,
    )
    out.close()
    mark_starting(ws, child.pid)
    console.print(f"running in the background as pid {child.pid}")
    console.print(
        f"  watch:  optimizer status {ws.root}\n  log:    {ws.log}\n"
        f"  stop:   optimizer stop {ws.root}"
    )
    return 0


def _foreground_summarised(
    ws: Workspace,
    settings: config.Settings,
    console: Console,
    *,
    resumed: bool = False,
    notify: str | None = None,
) -> int:
    """The run here, then summary.md once the lock is released (held, it would read as live)."""
    try:
        return _foreground(ws, settings, console, resumed=resumed)
    finally:
        if running_pid(ws) is None:  # else the lock was refused: another daemon's run
            summary.at_end(ws.root, notify, console)


def _foreground(
    ws: Workspace, settings: config.Settings, console: Console, *, resumed: bool = False
) -> int:
    # Installed before the lock: once the lock names this pid, `stop` sends SIGTERM, which must
    # ask for a clean stop, never end the process before its handler is there.
    flag = SignalFlag()
    flag.install()
    try:
        with runfolder.open_run(ws, settings, refuse=None, search=True) as opened:
            _loop(opened, console, flag, resumed=resumed)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return 0  # the reporter printed how the run stopped, and its current best


def _loop(opened: runfolder.OpenRun, console: Console, flag: SignalFlag, *, resumed: bool) -> None:
    from optimizer.report.live import Reporter
    from optimizer.search import engine

    ws, settings, store = opened.ws, opened.settings, opened.store
    workspace.remove_stale_temp_files(ws)
    if settings.sandbox.mode == "none":  # the console said so at the start; the log keeps it
        log.warning("sandbox.unconfined", reason=sandbox.UNCONFINED_LINE)
    if resumed:
        resumes.record_resume(store, settings)
    with Reporter(console, store, simulated=opened.client.simulated, settings=settings) as ui:
        asyncio.run(
            engine.optimize(
                ws,
                store,
                opened.client,
                settings,
                open_target=opened.open_target,
                flag=flag,
                listen=ui.on,
            )
        )
