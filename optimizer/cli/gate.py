"""`optimizer gate BASE HEAD` (docs/design.md §17): is a pull request's skill not worse than the
skill it changes? It parses, loads settings, runs both sides and prints; exit 0 not worse, 1 worse
or not shown, 2 bad input."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from optimizer.cli.common import (
    BUDGET_DEFAULT,
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
from optimizer.errors import BadInput

if TYPE_CHECKING:
    from optimizer.config import Settings
    from optimizer.search.gate import GateRequest


@app.command(rich_help_panel="Every night")
@handled
def gate(
    base_skill: Annotated[
        Path,
        typer.Argument(metavar="BASE_SKILL", help="The skill as it is (e.g. the main branch's)."),
    ],
    head_skill: Annotated[
        Path, typer.Argument(metavar="HEAD_SKILL", help="The skill as the pull request leaves it.")
    ],
    evals: Annotated[
        Path | None, typer.Option(help="evals.json (default BASE_SKILL/evals/evals.json).")
    ] = None,
    budget_usd: Annotated[
        float | None, typer.Option(help=f"Hard spending limit in USD ({BUDGET_DEFAULT}).")
    ] = None,
    margin: Annotated[
        float, typer.Option(help="HEAD may score lower than BASE by less than this.")
    ] = 0.05,
    comment: Annotated[
        Path | None, typer.Option(help="Write a markdown pull-request comment here.")
    ] = None,
    runs: Annotated[
        int | None, typer.Option(help=f"Runs per eval and skill ({RUNS_DEFAULT}).")
    ] = None,
    scope: Annotated[
        str,
        typer.Option(
            help="The claim: tasks (not worse on these evals; runs are the units) or general "
            "(evals are the units)."
        ),
    ] = "tasks",
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Folder for the runs (default runs/gate/<time>).")
    ] = None,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Is HEAD not worse than BASE? Exit 0 not worse, 1 worse or not shown, 2 bad input."""
    from optimizer.inputs import pair

    if budget_usd is not None and budget_usd <= 0:
        raise BadInput(f"--budget-usd {budget_usd}: give a positive amount in USD, e.g. 5.")
    if scope not in ("tasks", "general"):
        raise BadInput(f"--scope {scope!r}: use tasks or general.")
    pair.check_comment(comment)
    evalset = pair.check(
        require_dir(base_skill, "BASE skill"), require_dir(head_skill, "HEAD skill"), evals, margin
    )
    flags = {"evals.runs_per_eval": runs, "budget.usd": budget_usd}
    loaded = load_settings(
        config_path, set_, eval_config=evalset.eval_config, calls_models=True, flags=flags
    )
    confinement(loaded.settings)
    # Only now the model stack (seconds of imports): a mistyped argument is answered without it.
    from optimizer.search.gate import GateRequest

    folder = _gate_folder(loaded.settings, out_dir)
    request = GateRequest(base_skill, head_skill, evalset, folder, margin, scope=scope)
    passed = _run_gate(loaded.settings, request, budget_usd, comment)
    raise typer.Exit(0 if passed else 1)


def _gate_folder(settings: Settings, out_dir: Path | None) -> Path:
    """The gate's own folder, refused before it is made when the key is missing or it is taken:
    bad input writes nothing."""
    from optimizer.grade.benchmark import default_out_dir
    from optimizer.nightly.night import api_key_missing

    missing = api_key_missing(settings)
    if missing:
        raise BadInput(missing)
    folder = out_dir or default_out_dir(Path("runs") / "gate")
    if folder.exists() and any(folder.iterdir()):
        raise BadInput(
            f"--out {folder}: is not empty; a gate needs a folder of its own (omit --out "
            "for a new one under runs/gate/)."
        )
    return folder


def _run_gate(
    settings: Settings, request: GateRequest, budget_usd: float | None, comment: Path | None
) -> bool:
    """The gate under a progress bar, its comment written where asked, its line printed."""
    from dataclasses import replace

    from optimizer.model.session import open_session
    from optimizer.report import gate_comment
    from optimizer.report.progress import bar
    from optimizer.search.gate import run_gate
    from optimizer.store.files import write_text

    with (
        open_session(settings, request.out_dir, budget_usd=budget_usd, console=False) as session,
        bar(err, "gate") as progress,
    ):
        asked = replace(request, progress=progress)
        result = asyncio.run(run_gate(settings, session.client, session.store, asked))
        simulated = session.client.simulated
    if comment is not None:
        write_text(comment, gate_comment.markdown(result, simulated=simulated))
    out.print(gate_comment.line(result), markup=False, highlight=False)
    out.print(
        f"runs: {request.out_dir}" + (f"; comment: {comment}" if comment else ""), markup=False
    )
    return result.passed
