"""The command line: each command parses, loads settings, calls one function and prints.
No domain logic lives here; errors become one sentence each and an exit code (docs/design.md §11)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from optimizer.cli import compose, shorthands
from optimizer.cli.common import (
    BUDGET_DEFAULT,
    ITERATIONS_DEFAULT,
    UNTIL_DEFAULT,
    ConfigOpt,
    JsonOpt,
    NotifyOpt,
    RunDirArg,
    SetOpt,
    app,
    budget_flag,
    handled,
    load_settings,
    out,
    require_dir,
    view,
)
from optimizer.errors import BadInput

# The composition root: the simulator is built here and handed down (cli/compose.py); no layer
# below imports it.
compose.use_the_simulator()


@app.command(rich_help_panel="Start")
@handled
def validate(
    skill_dir: Annotated[
        Path, typer.Argument(metavar="SKILL_DIR", help="The skill folder (holds SKILL.md).")
    ],
    evals: Annotated[
        Path | None, typer.Option(help="evals.json (default SKILL_DIR/evals/evals.json).")
    ] = None,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Check a skill folder and its evals (any dialect) and print a summary."""
    from optimizer.inputs import validate as validation

    loaded = load_settings(config_path, set_)
    summary = validation.run(require_dir(skill_dir, "skill"), evals, loaded.settings)
    out.print(validation.render(summary), markup=False, highlight=False)


@app.command(rich_help_panel="Start")
@handled
def init(
    skill_dir: Annotated[
        Path, typer.Argument(metavar="SKILL_DIR", help="The skill folder (holds SKILL.md).")
    ],
) -> None:
    """Write an evals/evals.json to fill in (and evals/README.md on how); never overwrites."""
    from optimizer.inputs import skeleton
    from optimizer.schemas import EvalsFileRaw
    from optimizer.store.files import write_json, write_text

    target, evals, readme, guide = skeleton.plan(require_dir(skill_dir, "skill"))
    if guide is not None:
        write_text(readme, guide)
    write_json(target, evals, EvalsFileRaw)
    out.print(
        f"wrote {target}{'' if guide is None else f' and {readme}'}: replace every 'TODO:' "
        f"placeholder, then `optimizer validate {skill_dir}`.",
        markup=False,
        highlight=False,
    )


@app.command(rich_help_panel="Start")
@handled
def doctor(config_path: ConfigOpt = None, set_: SetOpt = None) -> None:
    """Check that model-written commands are confined here: bubblewrap, cgroups, limits, a probe."""
    from optimizer.sandbox import SandboxPolicy
    from optimizer.sandbox import doctor as checks

    found = checks.diagnose(
        SandboxPolicy.from_settings(load_settings(config_path, set_).settings.sandbox)
    )
    for line in found.lines:
        out.print(line, markup=False, highlight=False)
    raise typer.Exit(0 if found.ok else 1)


@app.command(
    rich_help_panel="Run",
    help="Start an overnight improvement run.\n\n"
    "A night ends at its budget (--budget-usd), its deadline (--until), an iteration limit, "
    f"--max-iterations N ({ITERATIONS_DEFAULT}), or the stop rule: when the last 8 proposals, "
    "with the noise taken out, are expected to buy less score a dollar than --min-gain-per-usd "
    "(default: the headroom v0 left over the budget; --spend-all turns the rule off). It says "
    "which, and what was left.",
)
@handled
def run(
    skill_dirs: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="SKILL_DIR...",
            help="The skill folder to improve; several, or a folder of them: a fleet night.",
            show_default=False,
        ),
    ] = None,
    skills_from: Annotated[
        str | None,
        typer.Option(help="A fleet of the skills Claude Code loads: claude.", show_default=False),
    ] = None,
    evals: Annotated[
        Path | None, typer.Option(help="evals.json (default SKILL_DIR/evals/evals.json).")
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Run folder to write (default runs/<skill>-<time>)."),
    ] = None,
    from_run: Annotated[
        Path | None, typer.Option("--from", help="Start from the best version of an earlier run.")
    ] = None,
    target: Annotated[str, typer.Option(help="What to optimize: body or description.")] = "body",
    budget_usd: Annotated[
        float | None, typer.Option(help=f"Hard spending limit in USD ({BUDGET_DEFAULT}).")
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", help=f"Stop at HH:MM (local) or an ISO time ({UNTIL_DEFAULT})."),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", help="Run in the background; watch with `status`.")
    ] = False,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Replace an existing --out folder (the demo uses it).")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Start even while a run of this skill folder is alive (else refused)."
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the cost estimate and exit; writes nothing.")
    ] = False,
    notify: NotifyOpt = None,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Start an overnight improvement run."""
    from optimizer.fleet import members

    # A mistyped path is answered before seconds of imports.
    given = [require_dir(d, "skill") for d in skill_dirs or []]
    fleet = members.folders(given, skills_from, home=Path.home(), here=Path.cwd())
    _check_run_paths(evals, from_run, target, fleet=fleet is not None)
    flags = {"budget.usd": budget_flag(budget_usd), "budget.deadline": until}
    load = lambda eval_config: load_settings(  # noqa: E731 - one loader for both kinds
        config_path, set_, eval_config=eval_config, flags=flags, calls_models=True,
        need_key=not dry_run,
    )  # fmt: skip
    if fleet is not None:
        from optimizer.fleet import daemon as fleets

        new_fleet = fleets.NewFleet(dirs=fleet, run_dir=out_dir, target=target, detach=detach,
                                    fresh=fresh, notify=notify, dry_run=dry_run)  # fmt: skip
        raise typer.Exit(fleets.start(new_fleet, load, out))
    from optimizer import daemon

    new = daemon.NewRun(
        skill_dir=require_dir(given[0], "skill"), evals_path=evals, run_dir=out_dir,
        from_run=from_run, target=target, detach=detach, fresh=fresh, force=force,
        dry_run=dry_run, notify=notify,
    )  # fmt: skip
    raise typer.Exit(daemon.start(new, load, out))


def _check_run_paths(
    evals: Path | None, from_run: Path | None, target: str, *, fleet: bool
) -> None:
    """run's paths and target, before seconds of imports; a fleet reads each skill's own evals."""
    if evals is not None and not evals.exists():
        raise BadInput(f"{evals}: missing; write the evals there or pass --evals PATH.")
    if from_run is not None and not from_run.is_dir():
        raise BadInput(f"--from {from_run}: no such run folder; pass the folder of an earlier run.")
    from optimizer.search.targets import TARGETS

    if target not in TARGETS:
        raise BadInput(f"--target {target!r}: use one of {', '.join(sorted(TARGETS))}.")
    if fleet and (evals is not None or from_run is not None):
        raise BadInput(
            "--evals and --from name one skill's files; a fleet reads each skill's own "
            "evals/evals.json: run the skill alone to use them."
        )


@app.command(rich_help_panel="Run")
@handled
def resume(
    run_dir: RunDirArg,
    detach: Annotated[bool, typer.Option("--detach", help="Run in the background.")] = False,
    budget_usd: Annotated[
        float | None, typer.Option(help="New spending limit in USD (default: the run's own).")
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until", help="New stop time: HH:MM (local) or an ISO time (default: the run's own)."
        ),
    ] = None,
    notify: NotifyOpt = None,
    set_: SetOpt = None,
    keep_stop: Annotated[
        bool, typer.Option("--keep-stop", hidden=True)
    ] = False,  # the loop of a detached run: a stop that reached it while it started stands
) -> None:
    """Continue a run from its current best after a stop, a crash or a deadline."""
    require_dir(run_dir, "run")  # a mistyped path is answered before seconds of imports
    from optimizer import daemon
    from optimizer.fleet import folder

    flags = {"budget.usd": budget_flag(budget_usd), "budget.deadline": until}
    parent = run_dir.resolve().parent
    if folder.is_fleet(parent):
        raise BadInput(
            f"{run_dir}: a member of the fleet {parent}, whose one budget covers its members; "
            f"resume the fleet with `optimizer resume {parent}`."
        )
    from optimizer.fleet import daemon as fleets

    # A fleet folder goes on as one fleet; any other as one run. Same arguments, one call.
    go_on = fleets.resume if folder.is_fleet(run_dir) else daemon.resume
    raise typer.Exit(
        go_on(
            require_dir(run_dir, "run"),
            overrides=set_ or [],
            flags=flags,
            detach=detach,
            console=out,
            notify=notify,
            keep_stop=keep_stop,
        )
    )


@app.command(rich_help_panel="Run")
@handled
def stop(run_dir: RunDirArg) -> None:
    """Ask a running daemon to finish its current unit of work and stop; returns at once."""
    from optimizer.fleet import folder
    from optimizer.store.lock import request_stop

    if folder.is_fleet(run_dir):
        from optimizer.fleet import daemon as fleets

        out.print(fleets.stop(run_dir), markup=False, highlight=False)
        return
    out.print(request_stop(require_dir(run_dir, "run")), markup=False, highlight=False)


@app.command(rich_help_panel="Run")
@handled
def status(run_dir: RunDirArg, as_json: JsonOpt = False) -> None:
    """Is the run alive, where is it, what has it spent, which version is best."""
    from optimizer.fleet import folder

    if folder.is_fleet(run_dir):
        from optimizer.fleet import views as fleet_views

        view(run_dir, as_json, fleet_views.status, fleet_views.print_status)
        return
    from optimizer.report import status as views

    view(run_dir, as_json, views.status, views.print_status)


from optimizer.cli.evals import evals_app  # noqa: E402 - the sub-app registers after the commands above

app.add_typer(evals_app, name="evals", rich_help_panel="Evals")

# Each module registers its commands on `app` as it is imported: gate, nightly (summary, adopt,
# schedule and the hidden nightly), review (lineage, show, diff, report, review, export) and tools
# (execute, benchmark, sim-server, check-artifact).
from optimizer.cli import gate, nightly, review, tools  # noqa: E402,F401

# Every command, the evals sub-app's too, reads its shorthands and old spellings before its own
# options (cli/shorthands.py): one table, so `--batch` means the same wherever `--set` is taken.
for command in [*app.registered_commands, *evals_app.registered_commands]:
    command.cls = shorthands.Shortened  # none of them asks for a class of its own
