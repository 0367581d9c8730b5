"""The commands of nights and pull requests (DESIGN §17): `gate`, `summary`, `schedule` and the
hidden `nightly` a timer runs. Each parses, loads settings, calls one function and prints."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from optimizer.cli.common import (
    ConfigOpt,
    ExecutorOpt,
    ProviderOpt,
    SetOpt,
    UnconfinedOpt,
    app,
    confinement,
    err,
    handled,
    load_settings,
    out,
    require_dir,
)
from optimizer.errors import BadInput


@app.command()
@handled
def gate(
    base_skill: Annotated[Path, typer.Argument(help="The skill as it is (e.g. the main branch's).")],
    head_skill: Annotated[Path, typer.Argument(help="The skill as the pull request leaves it.")],
    evals: Annotated[Path | None, typer.Option(help="evals.json (default BASE_SKILL/evals/evals.json).")] = None,
    budget_usd: Annotated[float | None, typer.Option(help="Hard spending limit in USD.")] = None,
    margin: Annotated[float, typer.Option(help="HEAD may score lower than BASE by less than this.")] = 0.05,
    comment: Annotated[Path | None, typer.Option(help="Write a markdown pull-request comment here.")] = None,
    runs: Annotated[int | None, typer.Option(help="Runs per eval and skill.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder for the runs (default runs/gate/<time>).")] = None,
    executor: ExecutorOpt = None,
    provider: ProviderOpt = None,
    unconfined: UnconfinedOpt = False,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Is HEAD not worse than BASE? Exit 0 not worse, 1 worse or not shown, 2 bad input."""
    from optimizer import config
    from optimizer.grade.benchmark import default_out_dir
    from optimizer.model.session import open_session
    from optimizer.report import gate_comment
    from optimizer.report.progress import bar
    from optimizer.search.gate import check_inputs, run_gate
    from optimizer.store.files import write_text

    if budget_usd is not None and budget_usd <= 0:
        raise BadInput(f"--budget-usd {budget_usd}: give a positive amount in USD, e.g. 5.")
    evalset = check_inputs(require_dir(base_skill, "BASE skill"), require_dir(head_skill, "HEAD skill"),
                           evals, margin)
    loaded = load_settings(config_path, set_, eval_config=evalset.eval_config, flags={
        "llm.provider": provider, "evals.runs_per_eval": runs, "budget.usd": budget_usd,
        "execute.executor": config.choice_flag("--executor", executor, "execute.executor"),
        "sandbox.mode": "none" if unconfined else None})
    confinement(loaded.settings)
    folder = out_dir or default_out_dir(Path("runs") / "gate")
    if folder.exists() and any(folder.iterdir()):
        raise BadInput(f"--out {folder}: is not empty; a gate needs a folder of its own (omit --out "
                       "for a new one under runs/gate/).")
    with open_session(loaded.settings, folder, budget_usd=budget_usd, console=False) as session, \
            bar(err, "gate") as progress:
        result = asyncio.run(run_gate(loaded.settings, session.client, session.store,
                                      base=base_skill, head=head_skill, evalset=evalset,
                                      out_dir=folder, margin=margin, progress=progress))
        simulated = bool(getattr(session.client, "simulated", False))
    if comment is not None:
        write_text(comment, gate_comment.markdown(result, simulated=simulated))
    out.print(gate_comment.line(result), markup=False, highlight=False)
    out.print(f"runs: {folder}" + (f"; comment: {comment}" if comment else ""), markup=False)
    raise typer.Exit(0 if result.passed else 1)


@app.command("summary")
@handled
def summary_cmd(
    run_dir: Annotated[Path, typer.Argument(help="The run folder (runs/<skill>-<time>).")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The morning summary of a run: what won and by how much, the change, the cost, what to check."""
    from optimizer.report import summary
    from optimizer.store.files import Workspace
    from optimizer.store.lock import running_pid

    folder = require_dir(run_dir, "run")
    md, js = summary.paths(folder)
    if not Workspace(folder).state_db.is_file():
        raise BadInput(f"{folder}: not a run folder (no state.db); pass a folder `optimizer run` made.")
    # The one written when the run ended, which may carry a night's error; a live run's is made now.
    if md.is_file() and js.is_file() and running_pid(Workspace(folder)) is None:
        text = js.read_text(encoding="utf-8") if as_json else md.read_text(encoding="utf-8")
    else:
        built = summary.build(folder)
        text = built.model_dump_json(indent=2) if as_json else summary.markdown(built)
    out.print(text, markup=False, highlight=False, soft_wrap=True)
