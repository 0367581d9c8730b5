"""The command line's start: a mistyped argument is answered (exit 2, one line) before the model
stack is imported, so it takes a fraction of a second rather than the seconds the SDK, the
executors and the grading unit take to import. Each case runs in a fresh interpreter, the only
place where what a command imported can be seen."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "csv-report"
# What the model stack pulls in: the SDK, the executors, the grading unit, the loop.
HEAVY = ("anthropic", "optimizer.execute", "optimizer.grade.unit", "optimizer.search.engine")
PROBE = """
import json, sys
from optimizer.cli import app
try:
    app(sys.argv[1:], prog_name="optimizer")
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "heavy": [m for m in HEAVY if m in sys.modules]}))
"""


def _answer(args: list[str], cwd: Path) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{PROBE}", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["gate", "no/such/base", "no/such/head"],
        ["gate", "{skill}", "{skill}", "--comment", "{folder}"],
        ["gate", "{skill}", "{skill}", "--margin", "2"],
        ["run", "no/such/skill"],
        ["run", "{skill}", "--evals", "no/such/evals.json"],
        ["run", "{skill}", "--from", "no/such/run"],
        ["resume", "no/such/run"],
        ["benchmark", "no/such/skill"],
        ["execute", "no/such/skill", "--eval", "1"],
    ],
    ids=lambda a: " ".join(a),
)
def test_a_mistyped_argument_is_answered_before_the_model_stack_is_imported(args, tmp_path):
    filled = [a.format(skill=EXAMPLE, folder=tmp_path) for a in args]
    found, stderr = _answer(filled, tmp_path)
    assert found["code"] == 2, stderr
    assert stderr.startswith("error: ") and len(stderr.strip().splitlines()) == 1, stderr
    assert found["heavy"] == []


def test_stop_answers_at_once_without_the_model_stack(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "state.db").write_bytes(b"")  # a run folder whose daemon is not running
    found, stderr = _answer(["stop", str(run)], tmp_path)
    assert found["code"] in (0, None), stderr
    assert found["heavy"] == []  # it said it asked, then spent seconds importing the SDK
    assert (run / "STOP").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("args", [["-h"], ["run", "-h"], ["gate", "-h"], ["--version"]])
def test_h_and_version_answer_as_in_the_clis_people_know(args, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "optimizer", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    if args == ["--version"]:
        assert done.stdout.startswith("optimizer ")
    else:
        assert "Usage: optimizer" in done.stdout


def _a_run_of(folder: Path, skill: Path, at: int) -> Path:
    """A run folder whose state.db records `skill` as its skill folder, last changed at `at`."""
    import os
    import sqlite3

    from optimizer.store import registry

    folder.mkdir(parents=True)
    with sqlite3.connect(folder / "state.db") as db:
        db.execute("create table runs (id text, skill_name text, skill_dir text)")
        db.execute("insert into runs values (?, ?, ?)", (folder.name, "release-notes", str(skill)))
    os.utime(folder / "state.db", (at, at))
    registry.record(folder)
    return folder


def test_a_skill_folder_names_its_own_latest_run_wherever_it_was_written(tmp_path, monkeypatch):
    """By the path each run records, never by the skill's name: `status path/to/skill` read the
    latest run of another folder named alike, and missed the folder's own run written with --out."""
    from optimizer.cli.common import latest_run

    skill, twin = tmp_path / "skills" / "my-skill", tmp_path / "copies" / "my-skill"
    for folder in (skill, twin):
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text("---\nname: release-notes\ndescription: x\n---\n")
    monkeypatch.chdir(tmp_path)
    assert latest_run(skill) == skill  # no runs yet: the command refuses in its own words
    older = _a_run_of(Path("runs/release-notes-20261120-220000"), skill, 1_000_000)
    out = _a_run_of(tmp_path / "elsewhere" / "r", skill, 1_000_001)  # run --out elsewhere/r
    _a_run_of(Path("runs/release-notes-night-x"), twin, 1_000_002)  # the twin's, newer
    assert latest_run(skill) == out
    assert latest_run(twin) == Path("runs/release-notes-night-x")
    assert latest_run(older) == older  # a run folder is taken as given


def test_a_second_run_of_a_skill_folder_while_one_is_alive_asks_for_out_or_force(
    tmp_path, monkeypatch
):
    from optimizer import daemon
    from optimizer.store.files import Workspace
    from optimizer.store.lock import lock

    monkeypatch.chdir(tmp_path)
    skill = tmp_path / "csv-report"
    shutil.copytree(EXAMPLE, skill)
    live = _a_run_of(tmp_path / "elsewhere" / "live", skill, 1_000_000)
    with lock(Workspace(live)):  # its daemon, alive: this process holds the lock
        done = _invoke(monkeypatch, "run", skill, "--provider", "sim", "--max-iterations", "0")
        assert done.exit_code == 2, done.output
        assert f"a run of this skill folder is alive in {live}" in done.output
        assert "--out DIR" in done.output and "--force" in done.output
        assert not Path("runs").exists()  # nothing written
        started: list = []
        monkeypatch.setattr(
            daemon, "_foreground_summarised", lambda *a, **k: started.append(1) or 0
        )
        forced = _invoke(monkeypatch, "run", skill, "--provider", "sim", "--force")
        assert forced.exit_code == 0 and started, forced.output


def _invoke(monkeypatch, *args: str):
    from typer.testing import CliRunner

    from optimizer.cli import app

    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.parametrize(
    "names", [("--out", "--until"), ("--run-dir", "--deadline")], ids=["new", "old"]
)
def test_run_takes_out_and_until_and_the_old_names_still_work(names, tmp_path, monkeypatch):
    """One vocabulary (docs/design.md §11): the output folder is --out, the stop time --until; the
    old spellings are read as the new names (cli/shorthands.py) so no script breaks."""
    import optimizer.cli as cli
    from optimizer import daemon

    seen: dict = {}
    monkeypatch.setattr(cli, "load_settings", lambda *a, **k: seen.update(k["flags"]))

    def start(new, load, console):
        seen["run_dir"] = new.run_dir
        load(None)
        return 0

    monkeypatch.setattr(daemon, "start", start)
    out_name, until_name = names
    done = _invoke(monkeypatch, "run", EXAMPLE, out_name, tmp_path / "r", until_name, "23:00")
    assert done.exit_code == 0, done.output
    assert seen["run_dir"] == tmp_path / "r" and seen["budget.deadline"] == "23:00"
    twice = _invoke(monkeypatch, "run", EXAMPLE, "--out", "a", "--run-dir", "b")
    assert twice.exit_code == 2 and "give --out once" in twice.output


@pytest.mark.parametrize("name", ["--until", "--deadline"])
def test_resume_takes_until(name, tmp_path, monkeypatch):
    from optimizer import daemon

    seen: dict = {}
    monkeypatch.setattr(daemon, "resume", lambda *a, **k: seen.update(k["flags"]) or 0)
    done = _invoke(monkeypatch, "resume", tmp_path, name, "06:30")
    assert done.exit_code == 0, done.output
    assert seen["budget.deadline"] == "06:30"


@pytest.mark.parametrize("name", ["--out", "--to"])
def test_export_takes_out(name, tmp_path, monkeypatch):
    from optimizer.store import export

    seen: list = []
    monkeypatch.setattr(export, "export_version", lambda r, v, to, force: seen.append(to) or "ok")
    done = _invoke(monkeypatch, "export", tmp_path, "v1", name, tmp_path / "x")
    assert done.exit_code == 0, done.output
    assert seen == [tmp_path / "x"]


@pytest.mark.parametrize(
    ("name", "where", "written"),
    [
        ("--out", "folder", "folder/report.html"),  # a folder, as --out is on every command
        ("--out", "page.html", "page.html"),
        ("-o", "page.html", "page.html"),
        ("--output", "page.html", "page.html"),
    ],
)
def test_report_takes_out(name, where, written, tmp_path, monkeypatch):
    from optimizer.report import html

    (tmp_path / "folder").mkdir()
    seen: list = []
    monkeypatch.setattr(html, "write_report", lambda r, o: seen.append(o) or o)
    done = _invoke(monkeypatch, "report", tmp_path, name, tmp_path / where)
    assert done.exit_code == 0, done.output
    assert seen == [tmp_path / written]


@pytest.mark.parametrize(
    "names", [("--new-run-each-night", "--out"), ("--fresh", "--runs-root")], ids=["new", "old"]
)
def test_schedule_names_its_fresh_and_its_out(names, tmp_path, monkeypatch):
    """schedule's --fresh (a new run each night) is not run's --fresh (delete the run folder)."""
    from optimizer.nightly import schedule as plan

    seen: list = []
    monkeypatch.setattr(plan, "backend", lambda: "cron")
    monkeypatch.setattr(plan, "plan", lambda entry, where: seen.append(entry) or "")
    new_run, out_name = names
    args = ["schedule", EXAMPLE, "--budget-usd", "5", "--dry-run", "--provider", "sim"]
    done = _invoke(monkeypatch, *args, new_run, out_name, tmp_path / "nights")
    assert done.exit_code == 0, done.output
    assert seen[0].fresh and seen[0].runs_root == (tmp_path / "nights").absolute()
    shown = _invoke(monkeypatch, "schedule", "-h").output
    assert "--new-run-each-night" in shown and "--fresh" not in shown


def test_help_shows_one_vocabulary(monkeypatch):
    for command, shown, hidden in [
        ("run", ["--out", "--until"], ["--run-dir", "--deadline"]),
        ("resume", ["--until"], ["--deadline"]),
        ("export", ["--out"], ["--to "]),
        ("report", ["--out"], ["--output"]),
        ("schedule", ["--out", "--until"], ["--runs-root"]),
    ]:
        text = _invoke(monkeypatch, command, "-h").output
        assert all(n in text for n in shown) and not any(n in text for n in hidden), command


def test_h_lists_the_commands_in_panels_in_the_order_of_work(monkeypatch):
    """As gh does: Start, Run, Review, Every night, Evals, then the tools (sim-server and
    check-artifact no longer among the everyday commands); every command is in a panel."""
    text = _invoke(monkeypatch, "-h").output
    panels = ["Start", "Run", "Review", "Every night", "Evals", "Tools"]
    at = [text.index(f"─ {p} ─") for p in panels]
    assert at == sorted(at) and "─ Commands ─" not in text, text
    commands = text[at[0] :].splitlines()
    rows = [ln.split()[1] for ln in commands if ln.startswith("│ ") and ln[2] != " "]
    assert rows[:4] == ["init", "validate", "doctor", "run"], rows
    assert rows[-2:] == ["sim-server", "check-artifact"], rows
    assert (
        text.index("init")
        < text.index("─ Run ─")
        < text.index("─ Tools ─")
        < text.index("sim-server")
    )


def test_a_flag_shows_no_type_in_the_help():
    """`--dry-run <bool>` read as if `--dry-run true` were the way to write it (a usage error)."""
    from typer.testing import CliRunner

    from optimizer.cli import app

    shown = CliRunner().invoke(app, ["run", "-h"], env={"COLUMNS": "200"}).output
    line = next(ln for ln in shown.splitlines() if "--dry-run" in ln)
    assert "<bool>" not in shown and "bool" not in line
    assert "<float>" in shown  # a value still shows what it takes


def _every_command_help() -> dict[str, str]:
    """Each command's -h, subcommands of `evals` included, at a width that keeps lines whole."""
    import typer
    from typer.testing import CliRunner

    from optimizer.cli import app

    group = typer.main.get_command(app)
    paths = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        subs = getattr(command, "commands", None)
        paths += [[name, sub] for sub in subs] if subs else [[name]]
    return {
        " ".join(p): CliRunner().invoke(app, [*p, "-h"], env={"COLUMNS": "250"}).output
        for p in paths
    }


@pytest.mark.slow
def test_usage_lines_name_arguments_as_words_and_no_flag_is_a_double_negative():
    helps = _every_command_help()
    assert len(helps) > 20
    for name, text in helps.items():
        usage = next(ln for ln in text.splitlines() if "Usage:" in ln)
        assert "{" not in usage and "_dir}" not in usage, f"{name}: {usage}"
        assert "<list[" not in text and "--no-without" not in text, name
    assert " diff [OPTIONS] RUN_DIR VERSION_A VERSION_B" in helps["diff"]
    assert " accept [OPTIONS] SKILL_DIR [ID]..." in helps["evals accept"]
    assert "--baseline" in helps["execute"]


@pytest.mark.slow
def test_help_shows_every_default_that_bounds_spend_or_time():
    helps = _every_command_help()
    run = " ".join(helps["run"].split())
    assert "(default: budget.usd of config.toml, else $20.00)" in run
    assert "(default: loop.max_iterations of config.toml, else no limit)" in run
    assert "(default: budget.deadline of config.toml, else no stop time)" in run
    gate = " ".join(helps["gate"].split())
    assert "else $20.00)" in gate and "(default: evals.runs_per_eval, else 3)" in gate
    assert "(default: the run's own)" in " ".join(helps["resume"].split())


def test_the_baseline_flag_keeps_its_old_name(tmp_path, monkeypatch):
    seen = {}

    def run_once(*_args, without_skill, **_kwargs):
        seen["without_skill"] = without_skill
        raise SystemExit(0)

    monkeypatch.setattr("optimizer.grade.benchmark.run_once", run_once)
    for flag in ("--baseline", "--without-skill"):
        seen.clear()
        args = ("--eval", "1", flag, "--provider", "sim", "--unconfined")
        result = _invoke(monkeypatch, "execute", str(EXAMPLE), *args, "--out", str(tmp_path))
        assert seen == {"without_skill": True}, (flag, result.output)


@pytest.mark.slow
def test_run_help_states_every_default_that_bounds_a_night():
    shown = " ".join(_every_command_help()["run"].split())
    for said in (
        "(default: budget.usd of config.toml, else $20.00)",
        "(default: budget.deadline of config.toml, else no stop time)",
        "(default: loop.max_iterations of config.toml, else no limit)",
        "the headroom v0 left over the budget",
        "--min-gain-per-usd",
        "--spend-all",
    ):
        assert said in shown, said


def test_no_help_text_is_cut_at_80_columns():
    """`run --help` at 80 columns read "loop.max_iteratio…" and "SKILL_DIR/evals/e…": every
    command's help fits a terminal of 80 columns whole."""
    import typer.main
    from typer.testing import CliRunner

    from optimizer.cli import app

    group = typer.main.get_command(app)

    def paths(command, prefix):
        yield prefix
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            if not sub.hidden:
                yield from paths(sub, [*prefix, name])

    cut = {}
    for path in paths(group, []):
        said = CliRunner(env={"COLUMNS": "80"}).invoke(app, [*path, "--help"]).output
        if "…" in said:
            cut[" ".join(path)] = [line for line in said.splitlines() if "…" in line]
    assert cut == {}
