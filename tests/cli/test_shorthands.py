"""Shorthands and old spellings (cli/shorthands.py, docs/design.md §11): a flag that stands for one
`--set` means the same on every command that takes `--set`, and an old spelling is read as its new
name, so a script written for the longer command lines still runs."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
import typer.main

from optimizer import config
from optimizer.cli import app, shorthands
from optimizer.cli.shorthands import SHORTHANDS, Option, Shortened, expand
from optimizer.config.sections import SECTIONS
from optimizer.errors import BadInput

EXAMPLE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "csv-report"


def _options(**takes: bool) -> dict[str, Option]:
    """A command's own options by name: True, it reads a value; False, a switch."""
    return {
        f"--{n.replace('_', '-')}": Option(f"--{n.replace('_', '-')}", t) for n, t in takes.items()
    }


# A command that takes --set and three declared options: two read a value, one is a switch.
TAKES = _options(set=True, notify=True, fresh=False, adopt=True)


def _value_for(short: shorthands.Shorthand) -> str:
    """A value the setting accepts other than its default: a choice, else a number."""
    section, _, key = short.setting.partition(".")
    field = SECTIONS[section].model_fields[key]
    choices = [c for c in get_args(field.annotation) if isinstance(c, str) and c != field.default]
    return choices[0] if choices else "3"


@pytest.mark.parametrize("short", SHORTHANDS, ids=[s.flag for s in SHORTHANDS])
def test_each_shorthand_is_its_set_and_loads_the_same_settings(short):
    value = None if short.switch_to is not None else _value_for(short)
    given = ["skill", short.flag] if value is None else ["skill", short.flag, value]
    takes = {k: v for k, v in TAKES.items() if k != short.flag}
    expanded = expand(given, takes, {})
    assert expanded == ["skill", "--set", f"{short.setting}={short.switch_to or value}"]
    by_flag = config.load(None, env={}, overrides=[expanded[2]]).settings
    by_set = config.load(None, env={}, overrides=[f"{short.setting}={short.switch_to or value}"])
    assert by_flag == by_set.settings and by_flag != config.Settings()


def test_a_value_of_a_declared_option_is_never_read_as_a_flag():
    args = ["skill", "--notify", "--batch", "--notify=--spend-all", "--batch"]
    assert expand(args, TAKES, {}) == [
        "skill", "--notify", "--batch", "--notify=--spend-all", "--set", "llm.batch=true",
    ]  # fmt: skip


def test_the_commands_own_option_wins_and_nothing_after_the_double_dash_expands():
    assert expand(["--adopt", "weekly", "--", "--batch"], TAKES, {}) == [
        "--adopt", "weekly", "--", "--batch",
    ]  # fmt: skip


def test_no_shorthand_where_the_command_takes_no_set():
    assert expand(["--batch"], _options(json=False), {}) == ["--batch"]  # click refuses it: exit 2


def test_the_later_of_a_shorthand_and_its_set_wins():
    for line, batch in ((["--set", "llm.batch=false", "--batch"], True),
                        (["--batch", "--set", "llm.batch=false"], False)):  # fmt: skip
        sets = expand(line, TAKES, {})[1::2]
        assert config.load(None, env={}, overrides=sets).settings.llm.batch is batch


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (["--executor", "docker"], "--executor 'docker': use one of anthropic"),
        (["--provider"], "--provider needs a value"),
        (["--batch=false"], "--batch takes no value"),
        (["--out", "a", "--run-dir", "b"], "--out a and --run-dir b: the same option twice"),
        (["--max-iterations", "abc"], "'abc': give a whole number"),
        (["--max-iterations", "--batch"], "--max-iterations needs a value"),
    ],
)
def test_what_the_shorthands_cannot_read_is_refused_in_one_sentence(line, says):
    takes = {**TAKES, **_options(out=True)}
    with pytest.raises(BadInput, match=says.replace("(", r"\(")):
        expand(line, takes, {"--run-dir": "--out"})


def test_an_old_spelling_is_its_new_name_and_the_same_value_twice_is_fine():
    old = {"--run-dir": "--out", "--deadline": "--until"}
    takes = {**_options(until=True), "--out": Option("--out", True), "-o": Option("--out", True)}
    assert expand(["--run-dir=a", "--deadline", "23:00"], takes, old) == [
        "--out=a", "--until", "23:00",
    ]  # fmt: skip
    assert expand(["--out", "a", "--run-dir", "a"], takes, old) == ["--out", "a", "--out", "a"]
    # Under one name twice the later wins, as click reads it; -o is --out under another name.
    assert expand(["--out", "a", "--out", "b"], takes, old) == ["--out", "a", "--out", "b"]
    with pytest.raises(BadInput, match="-o a and --run-dir b"):
        expand(["-o", "a", "--run-dir", "b"], takes, old)


def test_every_command_that_takes_set_reads_the_shorthands_and_lists_them():
    root = typer.main.get_command(app)
    commands = {**root.commands, **root.commands["evals"].commands}  # type: ignore[attr-defined]
    taking = [name for name, c in commands.items() if any("--set" in p.opts for p in c.params)]
    assert {"run", "resume", "schedule", "nightly", "gate", "execute", "benchmark"} <= set(taking)
    for name in taking:
        command = commands[name]
        own = {o for p in command.params for o in p.opts}
        assert isinstance(command, Shortened), name
        for short in SHORTHANDS:  # a command's own option of that name is not listed
            assert (short.flag in (command.epilog or "")) is (short.flag not in own), (name, short)


def test_run_on_the_command_line_hands_the_shorthands_to_the_settings(monkeypatch, tmp_path):
    """End to end through typer: the settings `run` loads are those of the --set lines."""
    from typer.testing import CliRunner

    import optimizer.cli as cli
    from optimizer import daemon

    seen: dict = {}
    monkeypatch.setattr(cli, "load_settings", lambda path, sets, **k: seen.update(sets=sets))
    monkeypatch.setattr(daemon, "start", lambda new, load, console: load(None) or 0)
    line = ["run", str(EXAMPLE), "--out", str(tmp_path / "r"), "--provider", "sim", "--spend-all", "--max-iterations", "2",
            "--unconfined", "--set", "evals.runs_per_eval=2"]  # fmt: skip
    done = CliRunner().invoke(app, line)
    assert done.exit_code == 0, done.output
    assert seen["sets"] == [
        "llm.provider=sim", "loop.spend_all=true", "loop.max_iterations=2",
        "sandbox.mode=none", "evals.runs_per_eval=2",
    ]  # fmt: skip
