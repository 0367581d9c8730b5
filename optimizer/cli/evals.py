"""`optimizer evals ...`: grow evals.json from the user's sessions and a run's findings, through
evals/candidates.json and the user's review. Parse, call one function, print; no logic here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import click
import typer

from optimizer.cli.common import (
    ConfigOpt,
    ProviderOpt,
    SetOpt,
    handled,
    load_settings,
    out,
    require_dir,
)
from optimizer.errors import BadInput

evals_app = typer.Typer(
    no_args_is_help=True, help="Grow the evals: mine sessions, suggest from a run, review."
)
SkillArg = Annotated[
    Path, typer.Argument(metavar="SKILL_DIR", help="The skill folder (holds SKILL.md and evals/).")
]
DEFAULT_FROM = Path("~/.claude/projects")


@evals_app.callback()
def _logs() -> None:
    """Events to the terminal at warning level and up, redacted as every log is; the counts these
    commands log are already in what they print. A caller that configured logging keeps it."""
    import logging

    import structlog

    from optimizer import logs

    if not structlog.is_configured():
        logs.configure(None, console=True, level=logging.WARNING)


def _say(text: str) -> None:
    out.print(text, markup=False, highlight=False)


def _outlook(skill_dir: Path, config_path: Path | None, set_: list[str] | None) -> None:
    from optimizer.decide import power
    from optimizer.inputs import validate

    settings = load_settings(config_path, set_).settings
    try:
        now, later = validate.train_counts(
            skill_dir, None, test_fraction=settings.evals.test_fraction, seed=settings.loop.seed
        )
    except (
        BadInput
    ) as exc:  # the candidates are written; the file they would join needs a fix first
        _say(f"power: not computed, evals.json does not load: {exc.problems[0]}")
        return
    scope, few = settings.selection.scope, settings.selection.few_evals
    _say(
        f"power: {power.line(now, later, scope=scope, few_evals=few)}"
        + (" once the pending candidates are accepted." if later != now else ".")
    )


@evals_app.command()
@handled
def mine(
    skill_dir: SkillArg,
    from_dir: Annotated[
        Path, typer.Option("--from", help="Folder of Claude Code sessions.")
    ] = DEFAULT_FROM,
    since: Annotated[
        str | None, typer.Option(help="Only sessions this recent: 30d, 12h, 2w or a date.")
    ] = "30d",
    provider: ProviderOpt = None,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Draft candidate evals from the sessions in which the skill was used (evals/candidates.json)."""
    from optimizer.grow import mine as grow
    from optimizer.inputs import sessions

    require_dir(skill_dir, "skill")
    when = sessions.parse_since(since)
    refine = None
    if provider is not None:
        from optimizer.grow import drafting

        refine = drafting.refiner(
            load_settings(config_path, set_, flags={"llm.provider": provider}).settings, skill_dir
        )
    mined = grow.mine(skill_dir, from_dir.expanduser(), when, refine=refine)
    _say(
        f"{mined.uses} use(s) of the skill in {mined.sessions} session(s); {mined.added} new "
        f"candidate(s), {mined.pending} waiting for review in {mined.path}."
    )
    _say(f"review them with `optimizer evals review {skill_dir}` or `optimizer review RUN_DIR`.")
    _outlook(skill_dir, config_path, set_)


@evals_app.command()
@handled
def suggest(
    run_dir: Annotated[
        Path, typer.Argument(metavar="RUN_DIR", help="A run folder (runs/<skill>-<time>).")
    ],
    skill: Annotated[
        Path | None, typer.Option(help="The skill folder (default: the run's own).")
    ] = None,
    provider: ProviderOpt = None,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Draft sharper expectations, checks for uncovered failure modes and duplicates to drop, from a run."""
    from optimizer.grow import mine as grow
    from optimizer.grow import suggest as suggestions

    rewrite = None
    if provider is not None:  # a model rewrites the expectations no output could fail
        from optimizer.grow import rewriting

        flags = {"llm.provider": provider}
        rewrite = rewriting.rewriter(load_settings(config_path, set_, flags=flags).settings)
    got = suggestions.from_run(require_dir(run_dir, "run"), skill, rewrite)
    stored = grow.store_suggestions(got.skill_dir, got.found)
    _say(
        f"{len(got.found)} candidate(s) from {run_dir}; {stored.added} new, {stored.pending} "
        f"waiting for review in {stored.path}."
        if stored.path.exists()
        else f"no candidate from {run_dir}: nothing was written."
    )
    if got.notes:
        _say(
            f"{got.notes} of the run's suggestions are notes to read, not candidates (an "
            "expectation every output passes, a flaky one, a structural check, a failed run): "
            f"the report lists them (`optimizer report {run_dir}`)."
        )
    if got.unrewritten:
        _say(
            f"{len(got.unrewritten)} expectation(s) no output could fail, with no rewrite "
            f"proposed; rewrite each as a check a wrong answer fails"
            + ("" if provider else " (or pass --provider to have a model draft the rewrites)")
            + f": {'; '.join(got.unrewritten)}."
        )
    _outlook(got.skill_dir, config_path, set_)


def _show(c: object) -> str:
    from optimizer.schemas import Candidate

    assert isinstance(c, Candidate)
    what = {
        "new_eval": "new eval",
        "sharpen": f"sharper expectation for eval {c.target_eval_id}",
        "add_check": f"new check for eval {c.target_eval_id}",
        "drop": f"drop eval {c.target_eval_id}",
    }[c.kind]
    lines = [f"[{c.id}] {what} — from {c.origin.source} {c.origin.file} {c.origin.time}".rstrip()]
    if c.kind == "new_eval":
        lines.append(f"  prompt: {c.eval.prompt}")
        lines += [f"  files: {', '.join(c.eval.files)}"] if c.eval.files else []
    lines += [f"  replaces: {c.replaces}"] if c.replaces else []
    if c.kind != "drop":
        lines += [f"  expect: {e}" for e in c.eval.expectations] or [
            "  expect: (none yet: the session showed nothing a wrong answer would fail; "
            "[e]dit to write one)"
        ]
    lines += [f"  why: {c.reason}"] if c.reason else []
    lines += [f"  user said after: {m}" for m in c.signals.corrections]
    lines += [f"  not copied: {n}" for n in c.files_named]
    return "\n".join(lines)


@evals_app.command()
@handled
def review(skill_dir: SkillArg, config_path: ConfigOpt = None, set_: SetOpt = None) -> None:
    """Go through the pending candidates: accept, edit, reject or skip each."""
    from optimizer.grow import candidates
    from optimizer.inputs.skill import load_skill

    settings = load_settings(config_path, set_).settings
    name = load_skill(require_dir(skill_dir, "skill")).name
    waiting = candidates.pending(candidates.load(skill_dir, name))
    if not waiting:
        _say(f"no candidate waits for review in {candidates.path_of(skill_dir)}.")
        return
    for cand in waiting:
        _say(_show(cand))
        choice = (
            typer.prompt("  [a]ccept, [e]dit, [r]eject, [s]kip, [q]uit", default="s")
            .strip()
            .lower()
        )
        if choice.startswith("q"):
            break
        if choice.startswith("e"):
            edited = click.edit(
                json.dumps(cand.eval.model_dump(), indent=2, ensure_ascii=False), extension=".json"
            )
            if edited:
                cand = candidates.edit(skill_dir, name, cand.id, _parsed(edited))
            choice = "a" if typer.confirm("  accept it now?", default=True) else "s"
        if choice.startswith("a"):
            done = candidates.accept(skill_dir, name, cand.id, settings)
            _say(f"  accepted: {done.change}")
        elif choice.startswith("r"):
            candidates.reject(skill_dir, name, cand.id)
            _say("  rejected")
    _outlook(skill_dir, config_path, set_)


def _parsed(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"the edited candidate is not JSON ({exc}); nothing was changed.") from None
    if not isinstance(value, dict):
        raise BadInput("the edited candidate must stay a JSON object; nothing was changed.")
    return value


def _unchecked(c: object) -> bool:
    from optimizer.schemas import Candidate

    assert isinstance(c, Candidate)
    return c.kind != "drop" and not any(e.strip() for e in c.eval.expectations)


@evals_app.command()
@handled
def accept(
    skill_dir: SkillArg,
    ids: Annotated[
        list[str] | None, typer.Argument(metavar="ID", help="Candidate ids (c-...).")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every pending candidate.")] = False,
    config_path: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Append candidates to evals.json (validated; new ids; the file's own dialect)."""
    from optimizer.grow import candidates
    from optimizer.inputs.skill import load_skill

    settings = load_settings(config_path, set_).settings
    name = load_skill(require_dir(skill_dir, "skill")).name
    waiting = candidates.pending(candidates.load(skill_dir, name))
    chosen = [c.id for c in waiting if not _unchecked(c)] if all_ else (ids or [])
    if not chosen and not (all_ and waiting):
        raise BadInput("evals accept: name candidate ids (c-...) or pass --all.")
    for cid in chosen:
        done = candidates.accept(skill_dir, name, cid, settings)
        _say(f"{cid}: {done.change}")
    for c in (c for c in waiting if all_ and _unchecked(c)):
        _say(
            f"{c.id}: left pending, it has no expectation yet; write one with "
            f"`optimizer evals review {skill_dir}`."
        )
    _outlook(skill_dir, config_path, set_)


@evals_app.command()
@handled
def reject(
    skill_dir: SkillArg,
    ids: Annotated[list[str], typer.Argument(metavar="ID", help="Candidate ids.")],
) -> None:
    """Mark candidates rejected; mining again never brings them back."""
    from optimizer.grow import candidates
    from optimizer.inputs.skill import load_skill

    name = load_skill(require_dir(skill_dir, "skill")).name
    for cid in ids:
        candidates.reject(skill_dir, name, cid)
        _say(f"{cid}: rejected")
