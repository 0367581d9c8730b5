"""What a command line may say in fewer words, read before the command's own options are parsed.

A command declares what a user gives most nights (the skill, the budget, the stop time, the run
folder); a setting that one run in many changes is `--set section.key=value`. Each such setting
that once had a flag of its own keeps that flag as a shorthand for its `--set`, on every command
that takes `--set`, so no script breaks and `-h` stays short (docs/design.md §11). A shorthand is
the `--set` it stands for, in its place: between the two, the later on the line wins, as between
two `--set`. A command's own option of that name is the command's (schedule's `--adopt WHEN`,
evals' `--provider`), never a shorthand.

An old spelling of a renamed option (`--run-dir` for `--out`) is read as its new name; the same
option under both names with two values is bad input."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand, TyperOption

from optimizer import config
from optimizer.errors import BadInput

if TYPE_CHECKING:
    from typer._click import Context


@dataclass(frozen=True)
class Shorthand:
    """`flag` stands for `--set setting=VALUE`: a switch sets `switch_to`, any other flag the
    value given after it. `says` is what it does, for -h."""

    flag: str
    setting: str
    says: str
    switch_to: str | None = None

    def said(self) -> str:
        """How -h writes it: `--batch = --set llm.batch=true`, `--executor X = --set …=X`."""
        given = f"{self.flag} X" if self.switch_to is None else self.flag
        return f"{given} = --set {self.setting}={self.switch_to or 'X'}"


SHORTHANDS = (
    Shorthand(
        "--provider", "llm.provider", "anthropic (the default with ANTHROPIC_API_KEY) or sim"
    ),
    Shorthand(
        "--executor", "execute.executor", "who runs each eval: anthropic, claude-code, command"
    ),
    Shorthand("--max-iterations", "loop.max_iterations", "stop after X iterations"),
    Shorthand("--spend-all", "loop.spend_all", "no stop when going on is not worth it", "true"),
    Shorthand("--min-gain-per-usd", "loop.min_gain_per_usd", "the score a dollar must buy"),
    Shorthand("--adopt", "adopt.at_end", "certify the best on fresh runs, adopt it", "always"),
    Shorthand(
        "--batch", "llm.batch", "grading calls as Message Batches: half price, slower", "true"
    ),
    Shorthand("--unconfined", "sandbox.mode", "model-written commands without bubblewrap", "none"),
)
BY_FLAG = {s.flag: s for s in SHORTHANDS}

# The old spellings of renamed options, per command (its path under `optimizer`): each is read
# as the name after it.
OLD_SPELLINGS: Mapping[str, Mapping[str, str]] = {
    "run": {"--run-dir": "--out", "--deadline": "--until"},
    "resume": {"--deadline": "--until"},
    "schedule": {"--fresh": "--new-run-each-night", "--runs-root": "--out"},
    "report": {"--output": "--out"},
    "export": {"--to": "--out"},
}


@dataclass(frozen=True)
class Option:
    """One of a command's own options, under any of its names: `name` is the one -h shows first,
    `takes_value` whether it reads the next word."""

    name: str
    takes_value: bool


def epilog(own: Collection[str] = ()) -> str:
    """The shorthands, for the -h of a command that takes --set; a flag that is one of the
    command's `own` options is the command's, not listed."""
    lines = [f"  {s.said()}\n      {s.says}" for s in SHORTHANDS if s.flag not in own]
    return "Shorthands, on every command that takes --set:\n\n" + "\n".join(lines)


def expand(args: Sequence[str], options: Mapping[str, Option], old: Mapping[str, str]) -> list[str]:
    """`args` with each old spelling under its new name and each shorthand as its `--set`.
    `options` are the command's own, by every name, whose values are never read as flags;
    shorthands expand only where the command takes `--set`."""
    out: list[str] = []
    spelled: dict[str, dict[str, str]] = {}  # an option: the value last given under each name
    words = iter(args)
    for word in words:
        if word == "--":
            out += [word, *words]
            break
        typed, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        name = old.get(typed, typed)
        if name in options:
            if eq or not options[name].takes_value:
                out.append(name + eq + inline)
                value: str | None = inline if eq else "true"
            else:
                value = next(words, None)
                out += [name] if value is None else [name, value]
            if value is not None:
                spelled.setdefault(options[name].name, {})[typed] = value
        elif name in BY_FLAG and "--set" in options:
            out += ["--set", _setting(BY_FLAG[name], inline if eq else None, words)]
        else:
            out.append(word)
    for given in spelled.values():
        _given_once(given, old)
    return out


def _setting(short: Shorthand, inline: str | None, words: Iterator[str]) -> str:
    """`setting=value` for a shorthand and the value written after it (or after its `=`)."""
    if short.switch_to is not None:
        if inline is not None:
            raise BadInput(f"{short.flag} takes no value; write {short.flag} alone.")
        return f"{short.setting}={short.switch_to}"
    value = inline if inline is not None else next(words, None)
    if value is None or value.startswith("--"):  # no setting's value starts so: a flag after it
        raise BadInput(f"{short.flag} needs a value: {short.flag} X ({short.says}).")
    config.check_flag(short.flag, short.setting, value)
    return f"{short.setting}={value}"


def _given_once(given: Mapping[str, str], old: Mapping[str, str]) -> None:
    """An option under its old and its new name with two values is bad input; under one name
    twice, the later wins, as click reads it."""
    if len(given) > 1 and any(typed in old for typed in given) and len(set(given.values())) > 1:
        both = " and ".join(f"{typed} {value}" for typed, value in given.items())
        new = next(old[typed] for typed in given if typed in old)
        raise BadInput(f"{both}: the same option twice; give {new} once.")


class Shortened(TyperCommand):
    """A command that reads its shorthands and old spellings before its own options, and lists
    the shorthands under its -h when it takes --set."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        own = set(self._options())
        if not self.epilog and "--set" in own:
            self.epilog = epilog(own)

    def _options(self) -> dict[str, Option]:
        return {
            name: Option(p.opts[0], not (p.is_flag or p.count))
            for p in self.params
            if isinstance(p, TyperOption)
            for name in (*p.opts, *p.secondary_opts)
        }

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        path = " ".join(_names_under_the_program(ctx))  # "run", "evals mine"
        try:
            args = expand(args, self._options(), OLD_SPELLINGS.get(path, {}))
        except BadInput as exc:
            for problem in exc.problems:
                typer.echo(f"error: {problem}", err=True)
            raise typer.Exit(2) from None
        return super().parse_args(ctx, args)


def _names_under_the_program(ctx: Context) -> list[str]:
    """The command's names below the program, whatever the program was called as (`optimizer`,
    `python -m optimizer`)."""
    names: list[str] = []
    while ctx.parent is not None:
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    return names
