"""The commands that read a finished or running run (docs/design.md §11): `lineage`, `show`,
`diff`, `report`, `review` and `export`. Each parses, calls one function of report/ or store/ and
prints; no logic here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from optimizer.cli.common import JsonOpt, RunDirArg, app, err, handled, out, require_dir, view
from optimizer.errors import BadInput


@app.command(rich_help_panel="Review")
@handled
def lineage(run_dir: RunDirArg, as_json: JsonOpt = False) -> None:
    """The version tree with scores, intervals, decisions and costs."""
    from optimizer.report import tree as views

    view(run_dir, as_json, views.lineage, views.print_lineage)


@app.command(rich_help_panel="Review")
@handled
def show(
    run_dir: RunDirArg, version: Annotated[str, typer.Argument(metavar="VERSION", help="e.g. v2")]
) -> None:
    """One version: its change, benchmark, selection numbers and failing expectations."""
    from optimizer.report import show as views

    views.print_version(out, require_dir(run_dir, "run"), version)


@app.command(rich_help_panel="Review")
@handled
def diff(
    run_dir: RunDirArg,
    version_a: Annotated[str, typer.Argument(metavar="VERSION_A", help="e.g. v0")],
    version_b: Annotated[str, typer.Argument(metavar="VERSION_B", help="e.g. v3")],
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
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="HTML file to write, or a folder to write report.html into (default RUN_DIR/report.html).",
        ),
    ] = None,
) -> None:
    """Write the HTML report of the run: the page, and its versions' pages in a folder beside it."""
    from optimizer.fleet import folder
    from optimizer.report import html

    if folder.is_fleet(run_dir):
        from optimizer.fleet import report as fleet_report

        written = fleet_report.write(run_dir)
        out.print(f"written: {written}, and each member's report.html it links")
        return
    output = out_path
    if (
        output is not None and output.is_dir()
    ):  # the output is --out on every command (docs/design.md §11)
        output = output / "report.html"
    path = html.write_report(require_dir(run_dir, "run"), output)
    pages = html.details_dir(path)
    out.print(
        f"written: {path}"
        + (f" and {pages.name}/, which it needs beside it" if pages.is_dir() else "")
    )


@app.command(rich_help_panel="Review")
@handled
def review(
    run_dir: RunDirArg, port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 8700
) -> None:
    """Serve the report on loopback with a feedback box per run (saved to feedback.json)."""
    from optimizer.report import server

    server.serve(require_dir(run_dir, "run"), port=port, console=out)


@app.command(rich_help_panel="Review")
@handled
def export(
    run_dir: RunDirArg,
    version: Annotated[
        str | None,
        typer.Argument(
            metavar="VERSION", help="Version to export, e.g. v3 (default: the adopted version)."
        ),
    ] = None,
    version_flag: Annotated[
        str | None, typer.Option("--version", hidden=True)
    ] = None,  # the old spelling, which read as the program's `--version`
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder to copy the skill and its evals into.")
    ] = Path("exported-skill"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite a non-empty folder.")] = False,
) -> None:
    """Copy the adopted version's skill folder (or the one named) out of the run, with the evals
    the run used in evals/."""
    from optimizer.store.export import export_version

    if version_flag is not None:
        raise BadInput(
            f"export: --version is the program's own version; name the version after the run "
            f"folder instead: `optimizer export {run_dir} {version_flag} --out {out_dir}`."
        )
    out.print(export_version(require_dir(run_dir, "run"), version, out_dir, force=force))
