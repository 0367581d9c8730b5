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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args, get_origin

import typer
from typer.core import TyperCommand, TyperOption

from optimizer.config.sections import SECTIONS

if TYPE_CHECKING:
    from typer._click import Context


@dataclass(frozen=True)
class Shorthand:
    """`flag` stands for `--set setting=VALUE`: a switch sets `switch_to`, any other flag the
    value given after it."""

    flag: str
    setting: str
    switch_to: str | None = None

    def said(self) -> str:
        """How -h writes it: `--batch = --set llm.batch=true`, `--executor X = --set …=X`."""
        given = f"{self.flag} X" if self.switch_to is None else self.flag
        return f"{given} = --set {self.setting}={self.switch_to or 'X'}"


# -h names the setting each stands for; what it means is said in config/sections.py.
SHORTHANDS = (
    Shorthand("--provider", "llm.provider"),  # anthropic, or sim: the offline simulator
    Shorthand("--executor", "execute.executor"),  # anthropic, claude-code or command
    Shorthand("--max-iterations", "loop.max_iterations"),
    Shorthand("--spend-all", "loop.spend_all", "true"),  # no stop when going on is not worth it
    Shorthand("--min-gain-per-usd", "loop.min_gain_per_usd"),  # the score a dollar must buy
    Shorthand("--adopt", "adopt.at_end", "always"),  # certify and adopt the best at the end
    Shorthand("--batch", "llm.batch", "true"),  # Message Batches: half price, slower
    Shorthand("--unconfined", "sandbox.mode", "none"),  # commands without bubblewrap
)
BY_FLAG = {s.flag: s for s in SHORTHANDS}

# The old spellings of renamed options, per command: each is read as the name after it.
OLD_SPELLINGS: Mapping[str, Mapping[str, str]] = {
    "run": {"--run-dir": "--out", "--deadline": "--until"},
    "resume": {"--deadline": "--until"},
    "schedule": {"--fresh": "--new-run-each-night", "--runs-root": "--out"},
    "report": {"--output": "--out"},
    "export": {"--to": "--out"},
}


class Refused(ValueError):
    """A command line the shorthands cannot read: one sentence, exit 2."""


def epilog() -> str:
    """The shorthands, for the -h of a command that takes --set."""
    lines = [f"  {s.said()}" for s in SHORTHANDS]
    return "Shorthands, on every command that takes --set:\n\n" + "\n".join(lines)


def expand(
    args: Sequence[str], takes_value: Mapping[str, bool], old: Mapping[str, str]
) -> list[str]:
    """`args` with each old spelling under its new name and each shorthand as its `--set`.
    `takes_value` names the command's own options (True: it reads the next word), whose values
    are never read as flags; shorthands expand only where the command takes `--set`."""
    out: list[str] = []
    renamed: dict[str, set[str]] = {}  # a renamed option: the values given under either name
    words = iter(args)
    for word in words:
        if word == "--":
            out += [word, *words]
            break
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        name = old.get(name, name)
        if name in takes_value:
            if eq or not takes_value[name]:
                out.append(name + eq + inline)
                value: str | None = inline if eq else "true"
            else:
                value = next(words, None)
                out += [name] if value is None else [name, value]
            if name in old.values() and value is not None:
                renamed.setdefault(name, set()).add(value)
        elif name in BY_FLAG and "--set" in takes_value:
            out += ["--set", _setting(BY_FLAG[name], inline if eq else None, words, eq)]
        else:
            out.append(word)
    _given_once(renamed, old)
    return out


def _setting(short: Shorthand, inline: str | None, words: Iterator[str], eq: str) -> str:
    if short.switch_to is not None:
        if eq:
            raise Refused(f"{short.flag} takes no value; write {short.flag} alone.")
        return f"{short.setting}={short.switch_to}"
    value = inline if eq else next(words, None)
    if value is None:
        raise Refused(f"{short.flag} needs a value: {short.flag} X, as --set {short.setting}=X.")
    _check_choice(short, value)
    return f"{short.setting}={value}"


def _check_choice(short: Shorthand, value: str) -> None:
    """A value outside a setting's choices is named as the user typed it, not as its --set."""
    section, _, key = short.setting.partition(".")
    annotation = SECTIONS[section].model_fields[key].annotation
    if get_origin(annotation) is Literal and value not in get_args(annotation):
        allowed = ", ".join(str(a) for a in get_args(annotation))
        raise Refused(f"{short.flag} {value!r}: use one of {allowed} ({short.setting}).")


def _given_once(renamed: Mapping[str, set[str]], old: Mapping[str, str]) -> None:
    for name, values in renamed.items():
        if len(values) > 1:
            was = next(o for o, new in old.items() if new == name)
            raise Refused(
                f"{name} and {was} with {' and '.join(sorted(values))}: the same option twice; "
                f"give {name} once."
            )


class Shortened(TyperCommand):
    """A command that reads its shorthands and old spellings before its own options, and lists
    the shorthands under its -h when it takes --set."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        if not self.epilog and any(
            isinstance(p, TyperOption) and "--set" in p.opts for p in self.params
        ):
            self.epilog = epilog()

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        takes_value = {
            name: not (p.is_flag or p.count)
            for p in self.params
            if isinstance(p, TyperOption)
            for name in (*p.opts, *p.secondary_opts)
        }
        try:
            args = expand(args, takes_value, OLD_SPELLINGS.get(self.name or "", {}))
        except Refused as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        return super().parse_args(ctx, args)
