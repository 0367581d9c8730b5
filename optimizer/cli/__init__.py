"""The command line: each command parses, loads settings, calls one function and prints.
No domain logic lives here; errors become one sentence each and an exit code (docs/design.md §11)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from optimizer import config
from optimizer.cli.common import (
    AdoptOpt,
    ConfigOpt,
    ExecutorOpt,
    NotifyOpt,
    ProviderOpt,
    SetOpt,
    SpendAllOpt,
    UnconfinedOpt,
    alias,
    app,
    confinement,
    err,
    handled,
    latest_run,
    load_settings,
    out,
    require_dir,
)
from optimizer.errors import BadInput


@app.command(rich_help_panel="Start")
@handled
def validate(
    skill_dir: Annotated[Path, typer.Argument(help="The skill folder (holds SKILL.md).")],
    evals: Annotated[Path | None, typer.Option(help="evals.json (default SKILL_DIR/evals/evals.json).")] = None,
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
def init(skill_dir: Annotated[Path, typer.Argument(help="The skill folder (holds SKILL.md).")]) -> None:
    """Write an evals/evals.json to fill in (and evals/README.md on how); never overwrites."""
    from optimizer.inputs import skeleton
    from optimizer.schemas import EvalsFileRaw
    from optimizer.store.files import write_json, write_text

    target, evals, readme, guide = skeleton.plan(require_dir(skill_dir, "skill"))
    if guide is not None:
        write_text(readme, guide)
    write_json(target, evals, EvalsFileRaw)
    out.print(f"wrote {target}{'' if guide is None else f' and {readme}'}: replace every 'TODO:' "
              f"placeholder, then `optimizer validate {skill_dir}`.", markup=False, highlight=False)


@app.command("check-artifact", rich_help_panel="Tools")
@handled
def check_artifact(
    file: Annotated[Path, typer.Argument(help="A JSON file of the seed formats.")],
    kind: Annotated[str | None, typer.Option(help="Kind of file; inferred from its name.")] = None,
    strict: Annotated[bool, typer.Option(help="Require the full form the viewer reads.")] = False,
) -> None:
    """Validate any seed JSON file (grading, benchmark, history, ...) against its schema."""
    from optimizer.inputs import artifacts

    report = artifacts.check_artifact(file, kind, strict)
    if report.ok:
        out.print(f"{file}: valid {report.kind} ({report.form})", markup=False)
        return
    err.print(f"{file}: not a valid {report.kind} file:", markup=False)
    for problem in report.problems:
        err.print(f"  {problem}", markup=False, highlight=False)
    raise typer.Exit(2)


@app.command("sim-server", rich_help_panel="Tools")
@handled
def sim_server(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 = any free port).")] = 8765,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Serve the offline simulator of the Messages API on loopback (for the Claude Code CLI)."""
    from optimizer.sim import Simulator
    from optimizer.sim.server import run_server

    sim = load_settings(config_path, set_).settings.sim
    run_server(Simulator(**sim.model_dump()), port=port)


@app.command(rich_help_panel="Tools")
@handled
def execute(
    skill_dir: Annotated[Path, typer.Argument(help="The skill folder.")],
    eval_id: Annotated[int, typer.Option("--eval", help="Id of the eval to run.")],
    without_skill: Annotated[bool, typer.Option(help="Run the baseline: no skill.")] = False,
    executor: ExecutorOpt = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Run folder to write.")] = None,
    provider: ProviderOpt = None,
    unconfined: UnconfinedOpt = False,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Run one eval once and grade it, by hand, to debug a skill or an eval."""
    require_dir(skill_dir, "skill")  # a mistyped path is answered before seconds of imports
    from optimizer.grade.benchmark import failure_reason, run_once
    from optimizer.model.session import open_session

    loaded = load_settings(config_path, set_, calls_models=True, flags={
        "llm.provider": provider,
        "execute.executor": config.choice_flag("--executor", executor, "execute.executor"),
        "sandbox.mode": "none" if unconfined else None})
    confinement(loaded.settings)
    target = out_dir or Path("runs") / "execute" / f"eval-{eval_id}"
    with open_session(loaded.settings, target) as session:
        run_dir, scored = asyncio.run(
            run_once(loaded.settings, session.client, session.store,
                     skill_dir=require_dir(skill_dir, "skill"), eval_id=eval_id,
                     without_skill=without_skill, out_dir=target))
    score = "no score" if scored.score is None else f"score {scored.score:.3f}"
    shown = target / run_dir.relative_to(target.absolute())  # as the user named the folder
    out.print(f"{scored.status}: {shown} (pass rate {scored.pass_rate:.0%}, {score})", markup=False)
    if scored.status in ("exec_error", "judge_error", "unscored"):
        err.print(f"error: the run did not complete as a graded run ({scored.status}): "
                  f"{scored.error or failure_reason(run_dir)}", markup=False)
        raise typer.Exit(1)



@app.command(rich_help_panel="Tools")
@handled
def benchmark(
    skill_dir: Annotated[Path, typer.Argument(help="The skill folder.")],
    evals: Annotated[Path | None, typer.Option(help="evals.json (default SKILL_DIR/evals/evals.json).")] = None,
    runs: Annotated[int | None, typer.Option(help="Runs per eval and configuration.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Benchmark folder to write.")] = None,
    executor: ExecutorOpt = None,
    provider: ProviderOpt = None,
    unconfined: UnconfinedOpt = False,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """One-shot benchmark: every eval with and without the skill, graded and aggregated."""
    require_dir(skill_dir, "skill")  # a mistyped path is answered before seconds of imports
    from optimizer.grade.benchmark import default_out_dir, run_benchmark
    from optimizer.inputs.evals import load_evals
    from optimizer.model.session import open_session
    from optimizer.report.progress import bar

    executor = config.choice_flag("--executor", executor, "execute.executor")
    evalset = load_evals(require_dir(skill_dir, "skill"), evals)
    loaded = load_settings(config_path, set_, eval_config=evalset.eval_config, calls_models=True,
                           flags={"llm.provider": provider, "evals.runs_per_eval": runs,
                                  "execute.executor": executor,
                                  "sandbox.mode": "none" if unconfined else None})
    confinement(loaded.settings)
    folder = out_dir or default_out_dir()
    with open_session(loaded.settings, folder) as session, bar(out, "benchmark") as progress:
        path = asyncio.run(run_benchmark(loaded.settings, session.client, session.store,
                                         skill_dir=skill_dir, evals_path=evals, runs=runs,
                                         out_dir=folder, progress=progress))
    out.print((path.parent / "benchmark.md").read_text(encoding="utf-8"), markup=False)
    out.print(f"\nwritten: {path}")


RunDirArg = Annotated[
    Path,
    typer.Argument(
        help="The run folder (runs/<skill>-<time>), or a skill folder for its latest run there.",
        callback=latest_run,
    ),
]


@app.command(rich_help_panel="Run")
@handled
def run(
    skill_dir: Annotated[Path, typer.Argument(help="The skill folder to improve.")],
    evals: Annotated[Path | None, typer.Option(help="evals.json (default SKILL_DIR/evals/evals.json).")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Run folder to write (default runs/<skill>-<time>).")] = None,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", hidden=True)] = None,  # the old name of --out
    from_run: Annotated[Path | None, typer.Option("--from", help="Start from the best version of an earlier run.")] = None,
    target: Annotated[str, typer.Option(help="What to optimize: body or description.")] = "body",
    max_iterations: Annotated[int | None, typer.Option(help="Stop after N iterations.")] = None,
    budget_usd: Annotated[float | None, typer.Option(help="Hard spending limit in USD.")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Stop at HH:MM (local) or an ISO time.")] = None,
    deadline: Annotated[str | None, typer.Option("--deadline", hidden=True)] = None,  # the old name of --until
    detach: Annotated[bool, typer.Option(help="Run in the background; watch with `status`.")] = False,
    fresh: Annotated[bool, typer.Option(help="Replace an existing --out folder (the demo uses it).")] = False,
    batch: Annotated[bool, typer.Option("--batch", help="Grader, comparator and analyzer calls as Message Batches (half price, slower).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the cost estimate and exit; writes nothing.")] = False,
    spend_all: SpendAllOpt = False,
    adopt: AdoptOpt = False,
    notify: NotifyOpt = None,
    executor: ExecutorOpt = None,
    provider: ProviderOpt = None,
    unconfined: UnconfinedOpt = False,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Start an overnight improvement run."""
    run_dir, deadline = alias("--out", out_dir, "--run-dir", run_dir), alias("--until", until, "--deadline", deadline)
    require_dir(skill_dir, "skill")  # a mistyped path is answered before seconds of imports
    if evals is not None and not evals.exists():
        raise BadInput(f"{evals}: missing; write the evals there or pass --evals PATH.")
    if from_run is not None and not from_run.is_dir():
        raise BadInput(f"--from {from_run}: no such run folder; pass the folder of an earlier run.")
    from optimizer import daemon
    from optimizer.search.targets import TARGETS

    if target not in TARGETS:
        raise BadInput(f"--target {target!r}: use one of {', '.join(sorted(TARGETS))}.")
    flags = {"llm.provider": provider, "loop.max_iterations": max_iterations,
             "budget.usd": budget_usd, "budget.deadline": deadline,
             "llm.batch": True if batch else None, "sandbox.mode": "none" if unconfined else None,
             "loop.spend_all": True if spend_all else None, "adopt.at_end": "always" if adopt else None,
             "execute.executor": config.choice_flag("--executor", executor, "execute.executor")}
    code = daemon.start(
        skill_dir=require_dir(skill_dir, "skill"), evals_path=evals, run_dir=run_dir,
        from_run=from_run, target=target, detach=detach, fresh=fresh,
        load=lambda eval_config: load_settings(config_path, set_, eval_config=eval_config, flags=flags,
                                               calls_models=True, need_key=not dry_run),
        console=out, dry_run=dry_run, notify=notify,
    )
    raise typer.Exit(code)


@app.command(rich_help_panel="Run")
@handled
def resume(
    run_dir: RunDirArg,
    detach: Annotated[bool, typer.Option(help="Run in the background.")] = False,
    max_iterations: Annotated[int | None, typer.Option(help="New iteration limit.")] = None,
    budget_usd: Annotated[float | None, typer.Option(help="New spending limit in USD.")] = None,
    until: Annotated[str | None, typer.Option("--until", help="New stop time: HH:MM (local) or an ISO time.")] = None,
    deadline: Annotated[str | None, typer.Option("--deadline", hidden=True)] = None,  # the old name of --until
    spend_all: SpendAllOpt = False,
    notify: NotifyOpt = None,
    set_: SetOpt = None,
) -> None:
    """Continue a run from its current best after a stop, a crash or a deadline."""
    deadline = alias("--until", until, "--deadline", deadline)
    require_dir(run_dir, "run")  # a mistyped path is answered before seconds of imports
    from optimizer import daemon

    flags = {"loop.max_iterations": max_iterations, "budget.usd": budget_usd,
             "budget.deadline": deadline, "loop.spend_all": True if spend_all else None}
    raise typer.Exit(daemon.resume(require_dir(run_dir, "run"), overrides=set_ or [],
                                   flags=flags, detach=detach, console=out, notify=notify))


JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _view(run_dir: Path, as_json: bool, read: Callable[[Path], dict],
          printer: Callable[[Console, dict], None]) -> None:
    """A read-only view of a run: JSON for scripts, or rich text for a person."""
    data = read(require_dir(run_dir, "run"))
    if as_json:
        out.print_json(json.dumps(data))
    else:
        printer(out, data)


@app.command(rich_help_panel="Run")
@handled
def stop(run_dir: RunDirArg) -> None:
    """Ask a running daemon to finish its current unit of work and stop; returns at once."""
    from optimizer.store.lock import request_stop

    out.print(request_stop(require_dir(run_dir, "run")), markup=False, highlight=False)


@app.command(rich_help_panel="Run")
@handled
def status(run_dir: RunDirArg, as_json: JsonOpt = False) -> None:
    """Is the run alive, where is it, what has it spent, which version is best."""
    from optimizer.report import status as views

    _view(run_dir, as_json, views.status, views.print_status)


@app.command(rich_help_panel="Review")
@handled
def lineage(run_dir: RunDirArg, as_json: JsonOpt = False) -> None:
    """The version tree with scores, intervals, decisions and costs."""
    from optimizer.report import tree as views

    _view(run_dir, as_json, views.lineage, views.print_lineage)


@app.command(rich_help_panel="Review")
@handled
def show(run_dir: RunDirArg, version: Annotated[str, typer.Argument(help="e.g. v2")]) -> None:
    """One version: its change, benchmark, selection numbers and failing expectations."""
    from optimizer.report import show as views

    views.print_version(out, require_dir(run_dir, "run"), version)


@app.command(rich_help_panel="Review")
@handled
def diff(
    run_dir: RunDirArg,
    version_a: Annotated[str, typer.Argument(help="e.g. v0")],
    version_b: Annotated[str, typer.Argument(help="e.g. v3")],
) -> None:
    """The file diff of two versions and their per-eval score differences (piped or redirected:
    the raw unified diff alone, for `patch -p1`; the scores on stderr)."""
    from optimizer.report import show as views

    if out.is_terminal:
        views.print_diff(out, require_dir(run_dir, "run"), version_a, version_b)
    else:
        views.print_patch(out.file, err, require_dir(run_dir, "run"), version_a, version_b)


@app.command(rich_help_panel="Review")
@handled
def report(
    run_dir: RunDirArg,
    out_path: Annotated[Path | None, typer.Option("--out", "-o", help="HTML file to write, or a folder to write report.html into (default RUN_DIR/report.html).")] = None,
    output: Annotated[Path | None, typer.Option("--output", hidden=True)] = None,  # the old name of --out
) -> None:
    """Write the HTML report of the run: the page, and its versions' pages in a folder beside it."""
    from optimizer.report import html

    output = alias("--out", out_path, "--output", output)
    if output is not None and output.is_dir():  # the output is --out on every command (docs/design.md §11)
        output = output / "report.html"
    path = html.write_report(require_dir(run_dir, "run"), output)
    pages = html.details_dir(path)
    out.print(f"written: {path}" + (f" and {pages.name}/, which it needs beside it" if pages.is_dir() else ""))


@app.command(rich_help_panel="Review")
@handled
def review(
    run_dir: RunDirArg,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 8700,
) -> None:
    """Serve the report on loopback with a feedback box per run (saved to feedback.json)."""
    from optimizer.report import server

    server.serve(require_dir(run_dir, "run"), port=port, console=out)


@app.command(rich_help_panel="Start")
@handled
def doctor(config_path: ConfigOpt = None, set_: SetOpt = None) -> None:
    """Check that model-written commands are confined here: bubblewrap, cgroups, limits, a probe."""
    from optimizer.sandbox import SandboxPolicy
    from optimizer.sandbox import doctor as checks

    found = checks.diagnose(SandboxPolicy.from_settings(load_settings(config_path, set_).settings.sandbox))
    for line in found.lines:
        out.print(line, markup=False, highlight=False)
    raise typer.Exit(0 if found.ok else 1)


@app.command(rich_help_panel="Review")
@handled
def export(
    run_dir: RunDirArg,
    version: Annotated[str | None, typer.Argument(help="Version to export (default: current best).")] = None,
    version_flag: Annotated[str | None, typer.Option("--version", help="The version, as a flag.")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to copy the skill and its evals into.")] = Path("exported-skill"),
    to: Annotated[Path | None, typer.Option("--to", hidden=True)] = None,  # the old name of --out
    force: Annotated[bool, typer.Option(help="Overwrite a non-empty folder.")] = False,
) -> None:
    """Copy a version's skill folder out of the run, with the evals the run used in evals/."""
    from optimizer.store.export import export_version

    if version and version_flag and version != version_flag:
        raise BadInput(f"export: the version is given twice ({version} and --version {version_flag}); "
                       "give it once.")
    folder = alias("--out", out_dir, "--to", to, default=Path("exported-skill"))
    out.print(export_version(require_dir(run_dir, "run"), version or version_flag, folder, force=force))


from optimizer.cli.evals import evals_app  # noqa: E402 - the sub-app registers after the commands above

app.add_typer(evals_app, name="evals", rich_help_panel="Evals")

from optimizer.cli import nightly  # noqa: E402,F401 - registers gate, summary, schedule, nightly
