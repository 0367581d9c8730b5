"""`optimizer run` over many skills, and its resume and stop: every skill checked first (a skill
with bad input is listed with its one sentence and skipped, never stopping the others), the fleet
folder created with one ordinary run folder per member, then one daemon under one lock, one budget
and one deadline (fleet/night.py), and a morning at the fleet's root (fleet/views.py)."""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import signal
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import structlog
from rich.console import Console

from optimizer import config, daemon, logs, sandbox
from optimizer.budget import estimate as preview
from optimizer.budget.stops import SignalFlag, parse_deadline
from optimizer.errors import BadInput
from optimizer.fleet import folder, night, views
from optimizer.inputs import evals
from optimizer.inputs import skill as skills
from optimizer.inputs import triggers as trigger
from optimizer.model import prompts as prompting
from optimizer.report import spend, summary
from optimizer.search import runfolder
from optimizer.store import fleetdb, runtoml, workspace
from optimizer.store.db import now
from optimizer.store.files import Workspace, write_text
from optimizer.store.lock import lock, running_pid
from optimizer.words import dollars

# The command's flags, by setting ("budget.usd": 20.0); None: not given.
Flags = Mapping[str, str | float | None]


log = structlog.get_logger()


@dataclass(frozen=True)
class Prepared:
    skill_dir: Path
    skill: skills.Skill
    evalset: evals.EvalSet | trigger.TriggerSet
    loaded: config.Loaded
    estimate: preview.Estimate | None


def _default_dir() -> Path:
    return Path("runs") / f"fleet-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def check(
    dirs: list[Path], target: str, load: daemon.LoadSettings
) -> tuple[list[Prepared], list[folder.Skipped]]:
    """Each skill folder read and checked; the ones that fail, with their one sentence."""
    ready: list[Prepared] = []
    skipped: list[folder.Skipped] = []
    # By skill name, then path: the order skills are given in never changes what they are asked.
    for d in sorted(dirs, key=lambda d: (skills.load_skill(d).name if _loads(d) else "", str(d))):
        try:
            skill, evalset, loaded = daemon.read_inputs(d, None, target, load)
        except BadInput as exc:
            skipped.append(folder.Skipped(skill_dir=str(Path(d).resolve()), reason=str(exc)))
            continue
        est = preview.for_start(loaded.settings, evalset, d, target)
        ready.append(Prepared(Path(d), skill, evalset, loaded, est))
    return ready, skipped


def _loads(d: Path) -> bool:
    try:
        skills.load_skill(d)
    except BadInput:
        return False
    return True


def too_small(ready: list[Prepared], budget_usd: float | None) -> str | None:
    """The sentence that refuses a fleet whose budget cannot pay each member's first proposal."""
    if not budget_usd:
        return None
    needs = [(p.skill.name, sum(usd for _, usd in spend.minimum(p.estimate))) for p in ready]
    need = math.fsum(usd for _, usd in needs)
    if budget_usd >= need:
        return None
    said = ", ".join(f"{name} {dollars(usd)}" for name, usd in needs)
    return (
        f"a budget of {dollars(budget_usd)} cannot pay for one proposal of each of "
        f"{len(ready)} skills: the fleet needs at least {dollars(need)} ({said}); give "
        f"--budget-usd {math.ceil(need * 10) / 10:g} or more, or fewer skills."
    )


@dataclass(frozen=True)
class NewFleet:
    """What `optimizer run DIR…` is asked for several skills: their folders, the fleet folder
    (default runs/fleet-<time>), the target, whether it runs in the background, replaces a
    fleet folder (`fresh`) or only shows the cost estimates (`dry_run`), and the command to
    notify when it ends. A fleet's NewRun (daemon.py)."""

    dirs: list[Path]
    run_dir: Path | None = None
    target: str = "body"
    detach: bool = False
    fresh: bool = False
    notify: str | None = None
    dry_run: bool = False


def start(new: NewFleet, load: daemon.LoadSettings, console: Console) -> int:
    """`optimizer run DIR…` over several skills: checked, refused or created, then run."""
    prompting.check_installed()
    ready, skipped = check(new.dirs, new.target, load)
    for one in skipped:
        console.print(f"skipped {one.skill_dir}: {one.reason}", markup=False, highlight=False)
    if not ready:
        raise BadInput(
            f"none of the {len(new.dirs)} skills can run (each reason is above); fix one and start "
            "again."
        )
    settings = ready[0].loaded.settings
    budget_usd = settings.budget.usd
    at = daemon.not_past(parse_deadline(settings.budget.deadline), settings.budget.deadline)
    small = too_small(ready, budget_usd)
    if new.dry_run:
        return _dry_run(ready, small, console)
    if small:
        raise BadInput(small)
    unconfined = sandbox.startup_line(sandbox.SandboxPolicy.from_settings(settings.sandbox))
    root = new.run_dir or _default_dir()
    _make_room(root, new.fresh)
    names = _folder_names([p.skill.name for p in ready])
    ready = rivals(ready)
    deadline = at.isoformat(timespec="seconds") if at else ""
    members = [
        _create_member(root / name, p, budget_usd, deadline, new.target)
        for p, name in zip(ready, names, strict=True)
    ]
    fleet = folder.FleetFile(
        members=members,
        skipped=skipped,
        budget_usd=budget_usd,
        deadline=deadline,
        target=new.target,
        created_at=now(),
    )
    folder.write(root, fleet)  # last: a fleet folder without it is a creation cut short
    console.print(f"fleet folder: {root} ({len(members)} skills, {len(skipped)} skipped)")
    if unconfined:
        console.print(unconfined, style="bold red", markup=False, highlight=False)
    if budget_usd:
        console.print(f"one budget of {dollars(budget_usd)} for the fleet", markup=False)
    if new.detach:
        return daemon.spawn(folder.workspace(root), console, new.notify)
    return _foreground(root, console, new.notify)


def _dry_run(ready: list[Prepared], small: str | None, console: Console) -> int:
    """Each member's cost estimate; nothing is written and no model is called."""
    for p in ready:
        if p.estimate is not None:
            console.print(f"{p.skill.name}: {spend.line(p.estimate)}", markup=False)
    if small:
        raise BadInput(small)
    console.print("dry run: nothing was written and no model was called.")
    return 0


def _create_member(
    root: Path, p: Prepared, budget_usd: float, deadline: str, target: str
) -> folder.Member:
    """A member's run folder under the fleet's budget and deadline, its estimate recorded."""
    budget = p.loaded.settings.budget.model_copy(update={"usd": budget_usd, "deadline": deadline})
    ws = Workspace(root)
    workspace.create(
        ws,
        p.loaded.settings.model_copy(update={"budget": budget}),
        dict(p.loaded.sources),
        workspace.RunInputs(
            skill_dir=p.skill_dir, skill=p.skill, evalset=p.evalset, evals_path=None, target=target
        ),
    )
    if p.estimate is not None:
        spend.record(ws, p.estimate)
    return folder.Member(name=p.skill.name, folder=root.name, skill_dir=str(p.skill_dir.resolve()))


def rivals(ready: list[Prepared]) -> list[Prepared]:
    """For a description fleet, each member's trigger set with its siblings as rivals: their
    should-trigger requests become its should-not queries, and every probe lists them."""
    out = []
    for p in ready:
        if not isinstance(p.evalset, trigger.TriggerSet):
            out.append(p)
            continue
        siblings = [
            (o.skill.name, o.skill.description, o.evalset)
            for o in ready
            if o is not p and isinstance(o.evalset, trigger.TriggerSet)
        ]
        out.append(replace(p, evalset=p.evalset.with_siblings(siblings)))
    return out


def _folder_names(names: list[str]) -> list[str]:
    from optimizer.fleet.members import folder_names

    return folder_names(names)


def _make_room(root: Path, fresh: bool) -> None:
    """BadInput for a folder that holds a fleet or a run (unless --fresh, and none is alive)."""
    if not root.exists() or not any(root.iterdir()):
        return
    if not fresh:
        held = "a fleet" if folder.is_fleet(root) else "files"
        raise BadInput(
            f"{root}: already holds {held}; continue a fleet with `optimizer resume {root}`, "
            "or pick another --out folder (or --fresh to replace it)."
        )
    _refuse_if_running(root)
    shutil.rmtree(root)


def _refuse_if_running(root: Path) -> None:
    pid = running_pid(folder.workspace(root))
    if pid is not None:
        raise BadInput(
            f"{root}: a daemon is already running on this fleet (pid {pid}); stop it first with "
            f"`optimizer stop {root}`."
        )


def resume(
    root: Path,
    *,
    overrides: list[str],
    flags: Flags,
    detach: bool,
    console: Console,
    notify: str | None = None,
    keep_stop: bool = False,
) -> int:
    """`optimizer resume FLEET`: every member goes on from its ledger, under the fleet's budget
    (or the new one given), its deadline and one lock; nothing paid before is paid again."""
    prompting.check_installed()
    fleet = folder.read(root)
    _refuse_if_running(root)
    changed: dict[str, float | str] = {}
    budget, until = flags.get("budget.usd"), flags.get("budget.deadline")
    if budget is not None:
        changed["budget_usd"] = float(budget)
    if until:
        at = daemon.not_past(parse_deadline(str(until)), str(until))
        changed["deadline"] = at.isoformat(timespec="seconds") if at else ""
    ceiling = float(changed.get("budget_usd", fleet.budget_usd or 0.0)) or None
    spent = views.status(root)["budgeted_usd"]
    if ceiling is not None and spent >= ceiling - 0.01:  # before anything is written
        raise BadInput(
            f"{root}: the fleet has spent {dollars(spent)} of its {dollars(ceiling)} budget; "
            f"give --budget-usd more than {dollars(spent)} to go on (what it spent counts)."
        )
    new = fleet.model_copy(update=changed)
    # Every member's settings under the command's --set and flags, checked before anything is
    # written; then written to run.toml, so a detached resume reads them as this one would.
    members = [
        (Workspace(d), runfolder.settings_from(Workspace(d), overrides, _member_flags(new, flags)))
        for d in folder.member_dirs(root, fleet)
    ]
    if changed:
        folder.write(root, new)
        fleetdb.close_night(root)  # a new budget or deadline is a new night: its searches afresh
    for ws, loaded in members:
        if loaded.sources != {k: "run.toml" for k in loaded.sources}:
            write_text(ws.run_toml, runtoml.to_toml(loaded.settings, loaded.sources))
    if not keep_stop:
        folder.workspace(root).stop_file.unlink(missing_ok=True)
        for ws, _ in members:
            ws.stop_file.unlink(missing_ok=True)
    if detach:
        return daemon.spawn(folder.workspace(root), console, notify)
    return _foreground(root, console, notify, resumed=True)


def _member_flags(fleet: folder.FleetFile, flags: Flags) -> Flags:
    """The fleet's budget and deadline over each member's own, and the command's other flags."""
    return {**flags, "budget.usd": fleet.budget_usd, "budget.deadline": fleet.deadline or None}


def _foreground(root: Path, console: Console, notify: str | None, *, resumed: bool = False) -> int:
    """The fleet's night here, under its lock; every member's summary and the fleet's after."""
    fleet = folder.read(root)
    flag = SignalFlag()
    flag.install()
    fws = folder.workspace(root)
    try:
        with lock(fws), ExitStack() as stack:
            opened = []
            for d in folder.member_dirs(root, fleet):
                ws = Workspace(d)
                loaded = runfolder.settings_from(ws, [], _member_flags(fleet, {}))
                opened.append(
                    stack.enter_context(
                        runfolder.open_run(ws, loaded.settings, refuse=None, search=True)
                    )
                )
            logs.configure(fws.log, console=False)  # one log for the fleet, at its root
            if resumed:
                console.print(f"resuming the fleet {root} ({len(opened)} skills)", markup=False)
            asyncio.run(night.run_fleet(root, opened, fleet.budget_usd, flag, console))
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if running_pid(fws) is None:
            _morning(root, fleet, console, notify)
    return 0


def _morning(root: Path, fleet: folder.FleetFile, console: Console, notify: str | None) -> None:
    """Every member's summary.md, then the fleet's, then the user's --notify command. Best
    effort: a summary that cannot be made is logged, never raised over the night's own outcome."""
    for d in folder.member_dirs(root, fleet):
        summary.at_end(d, None, console)
    try:
        path = views.write_summary(root)
    except Exception:
        log.exception("fleet.summary_failed", fleet=str(root))
        return
    console.print(f"fleet summary: {path}", markup=False, highlight=False)
    if notify:
        problem = summary.notify(notify, path)
        if problem:
            console.print(f"warning: {problem}", style="yellow", markup=False)


def stop(root: Path) -> str:
    """`optimizer stop FLEET`: the fleet's stop file for a daemon between units (or one not
    started yet), SIGTERM for a live one; every member stops after its unit of work in flight."""
    folder.read(root)
    fws = folder.workspace(root)
    write_text(fws.stop_file, f"stop requested at {now()}\n")
    pid = running_pid(fws)
    if pid is None:
        return f"no daemon is running on the fleet {root}; it will not start the next unit of work."
    os.kill(pid, signal.SIGTERM)
    return (
        f"asked pid {pid} to stop the fleet after the unit of work in flight; "
        f"`optimizer status {root}` shows when it has."
    )
