"""The commands of nights (docs/design.md §17): `schedule`, the hidden `nightly` a timer runs,
and the morning's `summary` and `adopt`. Each parses, loads settings, calls one function and
prints."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from optimizer import words
from optimizer.cli.common import (
    ConfigOpt,
    NotifyOpt,
    SetOpt,
    app,
    err,
    handled,
    latest_run,
    load_settings,
    out,
    require_dir,
)
from optimizer.errors import BadInput

if TYPE_CHECKING:
    from optimizer.nightly.schedule import Entry


@app.command("summary", rich_help_panel="Review")
@handled
def summary_cmd(
    run_dir: Annotated[
        Path,
        typer.Argument(
            metavar="RUN_DIR",
            help="The run folder (runs/<skill>-<time>), or a skill folder for its latest run.",
            callback=latest_run,
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The morning summary of a run: what won and by how much, the change, the cost, what to check."""
    from optimizer.report import summary
    from optimizer.store.files import Workspace
    from optimizer.store.lock import running_pid

    folder = require_dir(run_dir, "run")
    from optimizer.fleet import folder as fleet_folder
    from optimizer.fleet import views

    if fleet_folder.is_fleet(folder):  # a fleet's morning: its members' in one page
        out.print(views.summary_md(folder), markup=False, highlight=False, end="")
        return
    md, js = summary.paths(folder)
    if not Workspace(folder).state_db.is_file():
        raise BadInput(words.not_a_run(folder, fix="pass a folder `optimizer run` made."))
    # The one written when the run ended, which may carry a night's error; a live run's is made now.
    if md.is_file() and js.is_file() and running_pid(Workspace(folder)) is None:
        text = js.read_text(encoding="utf-8") if as_json else md.read_text(encoding="utf-8")
    else:
        built = summary.build(folder)
        text = built.model_dump_json(indent=2) if as_json else summary.markdown(built)
    out.print(text, markup=False, highlight=False, soft_wrap=True)


# `schedule --adopt` → adopt.at_end: a night certifies its best when the user said it should.
ADOPT_WHEN = {"nightly": "always", "weekly": "weekly", "never": "never"}


@app.command(rich_help_panel="Every night")
@handled
def schedule(
    skill_dir: Annotated[
        Path | None,
        typer.Argument(metavar="SKILL_DIR", help="The skill folder to improve every night."),
    ] = None,
    at: Annotated[str, typer.Option(help="When each night starts, HH:MM local time.")] = "22:30",
    until: Annotated[
        str, typer.Option(help="When each night must stop, HH:MM local time.")
    ] = "07:00",
    budget_usd: Annotated[
        float | None, typer.Option(help="What one night may spend, in USD (required).")
    ] = None,
    new_run: Annotated[
        bool,
        typer.Option(
            "--new-run-each-night", help="Each night a new run from the last best, not a resume."
        ),
    ] = False,
    out_dir: Annotated[
        Path, typer.Option("--out", help="Where the nights' run folders go.")
    ] = Path("runs"),
    adopt: Annotated[
        str,
        typer.Option(
            help="When a night adopts its best (certified on fresh runs): nightly, weekly or never."
        ),
    ] = "never",
    notify: NotifyOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would be installed; install nothing.")
    ] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the nightly schedules.")] = False,
    remove: Annotated[
        Path | None, typer.Option(help="Remove the schedule of this skill folder.")
    ] = None,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Run a skill's improvement every night: a systemd user timer, or a crontab line without systemd."""
    from optimizer.fleet import members
    from optimizer.nightly import schedule as plan

    if adopt not in ADOPT_WHEN:
        raise BadInput(f"schedule: --adopt {adopt!r}: use nightly, weekly or never.")
    if list_ or remove is not None:
        _list_or_remove(remove)
        return
    if skill_dir is None:
        raise BadInput("schedule: name the skill folder (or pass --list or --remove SKILL_DIR).")
    if budget_usd is None or budget_usd <= 0:
        raise BadInput(
            "schedule: --budget-usd is required and must be positive: what one night may spend, e.g. 10."
        )
    # A night must not find bad input at 3 a.m.; a fleet's night skips a broken member and says so.
    eval_config, notes = members.scheduled_evals(require_dir(skill_dir, "skill"))
    for note in notes:
        err.print(f"note: {note}", markup=False, highlight=False)
    loaded = load_settings(config_path, set_, eval_config=eval_config)
    entry = plan.Entry(
        skill_dir=skill_dir.absolute(),
        at=plan.check_time("--at", at),
        until=plan.check_time("--until", until),
        budget_usd=budget_usd,
        runs_root=out_dir.absolute(),
        workdir=Path.cwd(),
        fresh=new_run,
        extra=[
            *(["--config", str(config_path.absolute())] if config_path else []),
            *[a for s in set_ or [] for a in ("--set", s)],
            *(["--set", f"adopt.at_end={ADOPT_WHEN[adopt]}"] if adopt != "never" else []),
            *(["--notify", notify] if notify else []),
        ],
    )
    if entry.at == entry.until:
        raise BadInput(
            f"--at {at} and --until {until}: a night needs time between its start and its end."
        )
    _install(entry, loaded.source("llm.provider") == "default", dry_run=dry_run)


def _list_or_remove(remove: Path | None) -> None:
    """`schedule --list` prints every nightly schedule; `--remove DIR` removes that skill's."""
    from optimizer.nightly import schedule as plan

    if remove is not None:
        out.print(plan.remove(remove.absolute()), markup=False, highlight=False)
        return
    found = plan.entries()
    for e in found:
        out.print(
            f"{e['name']}  {e['where']}  at {e['at']}  {e['skill_dir']}\n  {e['command']}",
            markup=False,
            highlight=False,
        )
    if not found:
        out.print("no nightly schedules", markup=False)


def _install(entry: Entry, default_provider: bool, *, dry_run: bool) -> None:
    """The entry installed with the scheduler here, or, on --dry-run, printed."""
    from optimizer.nightly import schedule as plan

    where = plan.backend()
    if default_provider:  # said now, not found in a log at 3 a.m.
        err.print(
            f"note: each night calls the Messages API with ANTHROPIC_API_KEY from {plan.ENV_FILE} "
            "and, without it, runs nothing and says so in its log; --provider sim schedules "
            "simulated nights.",
            markup=False,
            highlight=False,
        )
    if not dry_run:
        out.print(plan.install(entry, where), markup=False, highlight=False)
        return
    if where == "none":
        err.print(
            f"warning: {plan.no_scheduler()}: without --dry-run nothing would be installed; "
            "the command below is for a scheduler of yours.",
            markup=False,
            highlight=False,
        )
    out.print(plan.plan(entry, where), markup=False, highlight=False, end="")


@app.command(hidden=True)
@handled
def nightly(
    skill_dir: Annotated[Path, typer.Argument(metavar="SKILL_DIR", help="The skill folder.")],
    until: Annotated[str, typer.Option(help="The night's deadline, HH:MM local time.")],
    budget_usd: Annotated[float, typer.Option(help="What this night may spend, in USD.")],
    runs_root: Annotated[Path, typer.Option(help="Where the nights' run folders are.")] = Path(
        "runs"
    ),
    fresh: Annotated[
        bool, typer.Option("--fresh", help="A new run from the last best, not a resume.")
    ] = False,
    notify: NotifyOpt = None,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """One night (what a schedule runs): resume the last run, or start one chained to it."""
    from optimizer.nightly import night
    from optimizer.nightly.schedule import check_time, name_for

    if budget_usd <= 0:
        raise BadInput(f"--budget-usd {budget_usd}: give a positive amount in USD.")
    deadline = check_time("--until", until)
    flags = {"budget.usd": budget_usd, "budget.deadline": deadline}
    tonight = night.Tonight(
        skill_dir=require_dir(skill_dir, "skill"),
        until=deadline,
        budget_usd=budget_usd,
        fresh=fresh,
        runs_root=runs_root,
        notify=notify,
        # need_key false: a night without the key says so in its own log and summary
        load=lambda ec: load_settings(
            config_path, set_, eval_config=ec, flags=flags, calls_models=True, need_key=False
        ),
        overrides=set_ or [],
        log_name=name_for(skill_dir),
    )
    code = night.run_night(tonight, out)
    raise typer.Exit(code)


@app.command(rich_help_panel="Review")
@handled
def adopt(
    run_dir: Annotated[
        Path,
        typer.Argument(
            metavar="RUN_DIR", help="The run folder (or the skill folder: its latest run)."
        ),
    ],
    version: Annotated[
        str | None,
        typer.Argument(
            metavar="VERSION", help="The version to adopt (default: the search's best)."
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Pay the estimate without asking.")
    ] = False,
    max_usd: Annotated[
        float | None,
        typer.Option(help="Spending limit of this adoption (default: the estimate it prints)."),
    ] = None,
    set_: SetOpt = None,
) -> None:
    """Certify a version against yours on fresh runs; adopt it if better. Exit 0 adopted, 1 not
    certified, 2 nothing to adopt or bad input."""
    from optimizer.nightly import adopt as adopting

    folder = require_dir(latest_run(run_dir), "run")
    if not yes and not adopting.interactive():
        raise BadInput(
            "adopt: certifying pays for fresh runs; pass --yes to pay the estimate it prints "
            "(or run it in a terminal to be asked)."
        )
    found = adopting.adopt(
        folder,
        version,
        overrides=set_ or [],
        confirm=None if yes else (lambda q: typer.confirm(q, default=True)),
        max_usd=max_usd,
        console=out,
    )
    out.print(adopting.outcome_line(folder, found), markup=False, highlight=False)
    raise typer.Exit(0 if found.certified else 1)
