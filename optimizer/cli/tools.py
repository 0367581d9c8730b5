"""The tools beside the overnight loop (docs/design.md §11): `execute` (one eval once, graded, to
debug), `benchmark` (every eval with and without the skill), `sim-server` (the offline simulator
on loopback for the Claude Code CLI) and `check-artifact` (a seed JSON file against its schema).
Each parses, loads settings, calls one function and prints."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from optimizer.cli.common import (
    RUNS_DEFAULT,
    ConfigOpt,
    SetOpt,
    app,
    confinement,
    err,
    handled,
    load_settings,
    out,
    require_dir,
)


@app.command("check-artifact", rich_help_panel="Tools")
@handled
def check_artifact(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A JSON file of the seed formats.")],
    kind: Annotated[str | None, typer.Option(help="Kind of file; inferred from its name.")] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Require the full form the viewer reads.")
    ] = False,
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
    from optimizer.sim import Simulator  # the composition root builds the simulator
    from optimizer.sim.server import run_server

    sim = load_settings(config_path, set_).settings.sim
    run_server(Simulator.from_settings(sim), port=port)


@app.command(rich_help_panel="Tools")
@handled
def execute(
    skill_dir: Annotated[Path, typer.Argument(metavar="SKILL_DIR", help="The skill folder.")],
    eval_id: Annotated[int, typer.Option("--eval", help="Id of the eval to run.")],
    # One-sided: "--no-without-skill" read as a double negative. --without-skill stays its alias.
    without_skill: Annotated[
        bool, typer.Option("--baseline", "--without-skill", help="Run the baseline: no skill.")
    ] = False,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Run folder to write.")] = None,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Run one eval once and grade it, by hand, to debug a skill or an eval."""
    require_dir(skill_dir, "skill")  # a mistyped path is answered before seconds of imports
    from optimizer.grade.benchmark import failure_reason, run_once
    from optimizer.model.session import open_session

    loaded = load_settings(config_path, set_, calls_models=True)
    confinement(loaded.settings)
    target = out_dir or Path("runs") / "execute" / f"eval-{eval_id}"
    with open_session(loaded.settings, target) as session:
        run_dir, scored = asyncio.run(
            run_once(
                loaded.settings,
                session.client,
                session.store,
                skill_dir=require_dir(skill_dir, "skill"),
                eval_id=eval_id,
                without_skill=without_skill,
                out_dir=target,
            )
        )
    score = "no score" if scored.score is None else f"score {scored.score:.3f}"
    shown = target / run_dir.relative_to(target.absolute())  # as the user named the folder
    out.print(f"{scored.status}: {shown} (pass rate {scored.pass_rate:.0%}, {score})", markup=False)
    if scored.status in ("exec_error", "judge_error", "unscored"):
        err.print(
            f"error: the run did not complete as a graded run ({scored.status}): "
            f"{scored.error or failure_reason(run_dir)}",
            markup=False,
        )
        raise typer.Exit(1)


@app.command(rich_help_panel="Tools")
@handled
def benchmark(
    skill_dir: Annotated[Path, typer.Argument(metavar="SKILL_DIR", help="The skill folder.")],
    evals: Annotated[
        Path | None, typer.Option(help="evals.json (default SKILL_DIR/evals/evals.json).")
    ] = None,
    runs: Annotated[
        int | None, typer.Option(help=f"Runs per eval and configuration ({RUNS_DEFAULT}).")
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Benchmark folder to write.")
    ] = None,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """One-shot benchmark: every eval with and without the skill, graded and aggregated."""
    require_dir(skill_dir, "skill")  # a mistyped path is answered before seconds of imports
    from optimizer.grade.benchmark import default_out_dir, run_benchmark
    from optimizer.inputs.evals import load_evals
    from optimizer.model.session import open_session
    from optimizer.report.progress import bar

    evalset = load_evals(require_dir(skill_dir, "skill"), evals)
    loaded = load_settings(
        config_path,
        set_,
        eval_config=evalset.eval_config,
        calls_models=True,
        flags={"evals.runs_per_eval": runs},
    )
    confinement(loaded.settings)
    folder = out_dir or default_out_dir()
    with open_session(loaded.settings, folder) as session, bar(out, "benchmark") as progress:
        path = asyncio.run(
            run_benchmark(
                loaded.settings,
                session.client,
                session.store,
                skill_dir=skill_dir,
                evals_path=evals,
                runs=runs,
                out_dir=folder,
                progress=progress,
            )
        )
    out.print((path.parent / "benchmark.md").read_text(encoding="utf-8"), markup=False)
    out.print(f"\nwritten: {path}")
