"""What every command shares: the app, the two consoles, the common options, the error handler
that turns a domain error into one sentence and an exit code, settings loading, and the run
folder argument and read-only view of the commands that read a run."""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

import typer
from rich.console import Console
from typer.core import TyperArgument, TyperGroup, TyperOption

from optimizer import config, words
from optimizer.errors import BadInput, OptimizerError

if TYPE_CHECKING:
    # typer 0.29 vendors click: its classes take typer's own copy of click.Context.
    from typer._click import Context

# `optimizer -h` lists the commands in the order of work, in panels (rich_help_panel= on each
# command), as gh groups its own: a command not named here comes last.
WORKFLOW = (
    *("init", "validate", "doctor"),  # Start
    *("run", "resume", "status", "stop"),  # Run
    *("lineage", "show", "diff", "report", "review", "summary", "adopt", "export"),  # Review
    *("schedule", "gate"),  # Every night
    "evals",  # Evals
    *("execute", "benchmark", "sim-server", "check-artifact"),  # Tools
)


class _InWorkflowOrder(TyperGroup):
    def list_commands(self, ctx: Context) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: WORKFLOW.index(n) if n in WORKFLOW else len(WORKFLOW))


# typer 0.29 shows every option's type, "<bool>" on a flag too, which reads as if `--dry-run true`
# were the way to write it (it is a usage error): a flag shows no type, as in gh, llm and pytest.
_typed = TyperOption.display_type_rich


def _flag_without_type(self: TyperOption, ctx: Context) -> str | None:
    return None if self.is_flag else _typed(self, ctx)


TyperOption.display_type_rich = _flag_without_type  # type: ignore[method-assign]


# It also writes a required argument as "{skill_dir}" on the usage line and a list's type as
# "<list[str]>": an argument is named as a word (each has a metavar: SKILL_DIR, RUN_DIR), bare
# when required and in brackets when not, as click, gh and git write them.
def _usage_name(self: TyperArgument) -> str:
    name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
    return name + ("..." if self.nargs != 1 else "")


_argument_type = TyperArgument.display_type_rich


def _argument_type_without_list(self: TyperArgument, ctx: Context) -> str | None:
    shown = _argument_type(self, ctx)
    if shown and shown.startswith("<list[") and shown.endswith("]>"):
        return f"<{shown[6:-2]}>..."
    return shown


TyperArgument._usage_display_name = _usage_name  # type: ignore[method-assign]
TyperArgument.display_type_rich = _argument_type_without_list  # type: ignore[method-assign,assignment]

app = typer.Typer(
    cls=_InWorkflowOrder,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # -h as well as --help on every command, as gh, llm and pytest take it.
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Improve an Agent Skill overnight: propose variants, run, grade, compare, promote.",
)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def _version(shown: bool) -> None:
    if shown:
        from importlib.metadata import PackageNotFoundError, version

        try:
            out.print(f"optimizer {version('skill-optimizer')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            out.print("optimizer (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    shown: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Improve an Agent Skill overnight: propose variants, run, grade, compare, promote."""


# What bounds spend and time when a flag is left out, said in -h (the config.toml in use may set
# another value; its key is named): a default that is not shown cannot be planned for.
_DEFAULTS = config.Settings()
BUDGET_DEFAULT = f"default: budget.usd of config.toml, else {words.dollars(_DEFAULTS.budget.usd)}"
UNTIL_DEFAULT = "default: budget.deadline of config.toml, else no stop time"
ITERATIONS_DEFAULT = "default: loop.max_iterations of config.toml, else " + (
    str(_DEFAULTS.loop.max_iterations) if _DEFAULTS.loop.max_iterations else "no limit"
)
RUNS_DEFAULT = f"default: evals.runs_per_eval, else {_DEFAULTS.evals.runs_per_eval}"


ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="config.toml to read (default: ./config.toml when present)."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set", metavar="KEY=VALUE", help="Override one setting: section.key=value (repeatable)."
    ),
]
ProviderOpt = Annotated[
    str | None,
    typer.Option(
        "--provider",
        help="Model provider: anthropic (the Messages API; the default when ANTHROPIC_API_KEY is "
        "set) or sim (the offline simulator, only when asked: its scores are simulated).",
    ),
]
NotifyOpt = Annotated[
    str | None,
    typer.Option(
        "--notify",
        help="A command of yours to run with summary.md's path when the run ends (mail, chat).",
    ),
]


def confinement(settings: config.Settings) -> None:
    """Before anything is written: refuse unconfined runs nobody asked for, say so when asked."""
    from optimizer.sandbox import SandboxPolicy, startup_line

    line = startup_line(SandboxPolicy.from_settings(settings.sandbox))
    if line:
        err.print(line, style="bold red", markup=False, highlight=False)


def budget_flag(usd: float | None) -> float | None:
    """--budget-usd as a night can keep it: a finite amount above 0 (inf, nan, 0 and below are
    refused before anything is written)."""
    if usd is not None and not (math.isfinite(usd) and usd > 0):
        raise BadInput(
            f"--budget-usd {usd:g}: give a finite amount of US dollars above 0, e.g. "
            "--budget-usd 5 (the night stops there)."
        )
    return usd


Params = ParamSpec("Params")  # a command's parameters, kept by @handled
Returned = TypeVar("Returned")


def handled(fn: Callable[Params, Returned]) -> Callable[Params, Returned]:
    """Domain errors print one line per problem and exit with their code; no traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Params.args, **kwargs: Params.kwargs) -> Returned:
        try:
            return fn(*args, **kwargs)
        except OptimizerError as exc:
            stream = out if exc.exit_code == 0 else err
            for problem in exc.problems:
                stream.print(
                    problem if exc.exit_code == 0 else f"error: {problem}",
                    markup=False,
                    highlight=False,
                )
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None
        except OSError as exc:
            err.print(f"error: {exc.filename or ''}: {exc.strerror or exc}", markup=False)
            raise typer.Exit(1) from None

    return wrapper


def load_settings(
    config_path: Path | None,
    overrides: list[str] | None,
    *,
    eval_config: Mapping[str, object] | None = None,
    flags: Mapping[str, object] | None = None,
    calls_models: bool = False,
    need_key: bool = True,
) -> config.Loaded:
    """The settings of a command. One that `calls_models` gets its provider decided: the
    simulator only when chosen, else the Messages API with a key, else one sentence (exit 2);
    `need_key` false for what calls nothing yet (a cost preview, a night that logs the refusal)."""
    if config_path is not None and not config_path.is_file():
        raise BadInput(f"{config_path}: no such config file; pass an existing --config path.")
    path = config_path or (Path("config.toml") if Path("config.toml").is_file() else None)
    loaded = config.load(
        path, eval_config=eval_config, env=os.environ, overrides=overrides or [], flags=flags
    )
    if not calls_models:
        return loaded
    from optimizer.model import preflight, provider

    loaded = provider.chosen(loaded, os.environ, need_key=need_key)
    # The models, before anything is written or paid: offline, then with Anthropic's API.
    refused = preflight.refused_offline(loaded.settings)
    if refused is None and need_key and preflight.anthropic_api(loaded.settings):
        ask = preflight.ask_with_sdk(
            os.environ.get(provider.KEY, ""), provider.endpoint(loaded.settings)
        )
        refused = preflight.refused_by_provider(loaded.settings, ask)
    if refused is not None:
        raise BadInput(refused)
    return loaded


def require_dir(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise BadInput(f"{path}: no such {what} folder; pass the folder's path.")
    return path


def latest_run(path: Path) -> Path:
    """A run folder as given, or, for a skill folder, the latest run of that very folder: a run
    that records its path, wherever it was written (store/registry.py), never a run of another
    folder that shares the skill's name. So `optimizer status path/to/skill` reads its last run.
    Anything else is returned as given, for the command to refuse in its own words."""
    if (path / "state.db").is_file() or not (path / "SKILL.md").is_file():
        return path
    from optimizer.store import registry

    runs = registry.runs_of(path)
    if not runs:
        return path
    err.print(f"the latest run of {path}: {runs[-1]}", markup=False)
    return runs[-1]


RunDirArg = Annotated[
    Path,
    typer.Argument(
        metavar="RUN_DIR",
        help="The run folder (runs/<skill>-<time>), or a skill folder for its own latest run.",
        callback=latest_run,
    ),
]


JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


Shown = TypeVar("Shown")  # what a view reads of a run, for its printer and as --json


def view(
    run_dir: Path,
    as_json: bool,
    read: Callable[[Path], Shown],
    printer: Callable[[Console, Shown], None],
) -> None:
    """A read-only view of a run: JSON for scripts, or rich text for a person."""
    data = read(require_dir(run_dir, "run"))
    if as_json:
        out.print_json(json.dumps(data))
    else:
        printer(out, data)
