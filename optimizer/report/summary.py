"""The morning summary (docs/design.md §17): at the end of every run, summary.md (and summary.json, its
data) say what won and by how much on train and on the sealed test, with intervals and the
claim's scope, the winning diff, the cost, and what to look at. Reads the run folder only; writes
those two files atomically, the JSON validated first. Never sends anything anywhere: --notify
runs the user's own command."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import structlog
from rich.console import Console

from optimizer import schemas, words
from optimizer.decide import adopt as rule
from optimizer.report import adopted, caveats, folders, nextstep, read
from optimizer.report.info import StatusInfo
from optimizer.report.status import status as run_status
from optimizer.report.view import Node, RunView
from optimizer.schemas import Adoption
from optimizer.store.files import write_json, write_text

log = structlog.get_logger()
DIFF_CAP = 12_000  # characters of the winning diff in summary.md; the rest is in `optimizer diff`
# The scope of the decision that made the best, in the words the lineage and the decision's
# reason use: a step, not the adoption's claim.
SCOPES = {s: words.step_scope(s) for s in ("tasks", "these_tasks", "general")}


def paths(run_dir: Path) -> tuple[Path, Path]:
    return Path(run_dir) / "summary.md", Path(run_dir) / "summary.json"


def build(
    run_dir: Path,
    *,
    night_error: str | None = None,
    data: RunView | None = None,
    info: StatusInfo | None = None,
) -> schemas.MorningSummary:
    """`data` and `info` (status) when the caller read them already: the report says what
    summary.md says from the same reading."""
    data = data or read.load(run_dir)
    info = info or run_status(run_dir, data)
    best = data.current_best or "v0"
    by_label = {n.label: n for n in data.nodes}
    test = info.get("test") if isinstance(info.get("test"), dict) else None
    train = caveats.paired(
        read.per_eval(data.ws, by_label.get("v0") or Node(label="v0")),
        read.per_eval(data.ws, by_label.get(best) or Node(label=best)),
    )
    sealed = caveats.sealed_numbers(test, best)
    selection = read.read_json(data.ws.version(best) / "selection.json") if best != "v0" else None
    train = _as_decided(train, selection)
    won = best != "v0"
    scope = _scope(selection, sealed, data.warnings) if won else None
    return schemas.MorningSummary(
        run_dir=str(run_dir),
        skill_name=data.run.skill_name,
        simulated=data.simulated,
        status=info.get("status"),
        stop_reason=info.get("stop_reason"),
        last_error=info.get("last_error"),
        night_error=night_error,
        started_at=info.get("started_at"),
        finished_at=info.get("finished_at"),
        from_run=data.run.from_run,
        best=best,
        won=won,
        headline=_headline(
            best,
            won,
            train,
            sealed,
            (selection or {}).get("parent") if isinstance(selection, dict) else None,
            night_error,
            _adoption(data.adoptions, best),
        ),
        adopted=data.adopted,
        scope=scope,
        train=train,
        sealed=sealed,
        decision=(selection or {}).get("reason") if isinstance(selection, dict) else None,
        diff=folders.version_diff(data.ws, "v0", best) if won else None,
        spent_usd=(spent := info.get("spent_usd") or 0.0),
        budget_usd=info.get("budget_usd"),
        spent=adopted.spent_apart(spent, info.get("budget_usd"), info.get("adoptions") or []),
        calls=info.get("calls") or 0,
        look_at=_look_at(run_dir, data, info),
        next=nextstep.steps(str(run_dir), data, info, best) if not night_error else [],
    )


def _as_decided(
    train: schemas.SummaryNumbers | None, selection: object
) -> schemas.SummaryNumbers | None:
    """When the best was decided against v0 itself, the train Δ is its decision's Δ, and it
    keeps the decision's interval at the decision's level: a second interval of one Δ computed
    another way (evals, not runs, as the units) read as a disagreement, and was once wider at
    95% than the decision's at 99.8%."""
    if train is None or not isinstance(selection, dict) or selection.get("parent") != "v0":
        return train
    ci, delta = selection.get("interval") or {}, selection.get("delta")
    if ci.get("low") is None or delta is None or abs(delta - (train.delta or 0.0)) > 5e-4:
        return train  # runs were added since the decision: it is another Δ now
    return train.model_copy(
        update={
            "low": round(ci["low"], 4),
            "high": round(ci["high"], 4),
            "confidence": ci.get("confidence") or train.confidence,
            "level": caveats.decision_level(ci.get("confidence")),
        }
    )


def supported(n: schemas.SummaryNumbers | None) -> bool:
    """A Δ a headline may state: its interval exists, has a width, and lies on one side of 0."""
    return (
        n is not None
        and n.low is not None
        and n.high is not None
        and n.high - n.low > 1e-9
        and (n.low > 0 or n.high < 0)
    )


def _evals(n: int) -> str:
    return f"{n} eval{'s' if n != 1 else ''}"


def _scope(selection: object, sealed: schemas.SummaryNumbers | None, warnings: list[str]) -> str:
    """selection.json's own `scope` when it states one. Else "better in general" only when the
    decision did not rest on too few evals and the sealed test's own interval (evals the loop
    never saw as the units) lies above zero; "better on these tasks" otherwise (docs/design.md §16)."""
    stated = selection.get("scope") if isinstance(selection, dict) else None
    if isinstance(stated, str) and stated:
        return SCOPES.get(stated, stated)
    few = bool(selection.get("few_evals")) if isinstance(selection, dict) else True
    shown = (
        sealed is not None
        and sealed.low is not None
        and sealed.low > 0
        and not any(w.startswith("sealed test") for w in warnings)
    )
    return SCOPES["general"] if shown and not few else SCOPES["these_tasks"]


def _adoption(made: list[Adoption], best: str) -> str:
    """The headline's clause on what the user has: the claim is the adoption's (§16)."""
    have = rule.last_certified(made)
    tried = next((a for a in reversed(made) if a.version == best and a.finished_at), None)
    if have and have.version == best:
        return f"adopted: certified on fresh runs ({adopted.evidence(have)})"
    if tried and not tried.certified:
        return f"not certified on fresh runs ({adopted.evidence(tried)})"
    return "not yet adopted" + (f" (you have {have.version})" if have else "")


def _headline(
    best: str,
    won: bool,
    train: Any,
    sealed: Any,
    parent: str | None,
    night: str | None,
    adoption: str = "not yet adopted",
) -> str:
    """One sentence, the same in summary.md and the report. A step is a decision, not a claim
    (docs/design.md §16): the headline says what the decision showed and that nothing is
    adopted, never that a version is "better"; and it states a number only where its own
    interval supports it (lies on one side of zero)."""
    if night:
        return f"This night did not run: {night}"
    if not won:
        return "Nothing won: v0, the skill the run started from, is still the best."
    against = parent or "its parent"
    if supported(train) and train.low > 0:
        lead = (
            f"{best} won against v0 on the train evals ({train.delta:+.3f}, "
            f"{_bare(train)} above zero, these tasks)"
        )
    elif supported(train):
        lead = (
            f"{best} won against {against}, but against v0 on the train evals it is below "
            f"({train.delta:+.3f}, {_bare(train)} below zero)"
        )
    else:  # won step by step, each against its parent; against v0 the evals cannot tell
        lead = f"{best} won against {against}" + (
            f"; against v0 on the train evals: too small to tell ({_evals(train.evals)})"
            if train is not None
            else ""
        )
    if supported(sealed):
        held = (
            f"; sealed test: {sealed.delta:+.3f} [{sealed.low:+.3f}, {sealed.high:+.3f}] "
            f"{sealed.level or words.ci(sealed.confidence)} ({_evals(sealed.evals)})"
        )
    elif sealed is not None:
        held = f"; sealed test: too small to tell ({_evals(sealed.evals)})"
    else:
        held = "; sealed test: not measured"
    return f"{lead}; {adoption}{held}."


def _bare(n: schemas.SummaryNumbers) -> str:
    """The interval's level alone: "99.4% CI" of "99.4% CI, the decision's"."""
    return (n.level or words.ci(n.confidence)).split(",")[0]


def _look_at(run_dir: Path, data: RunView, info: StatusInfo) -> list[str]:
    items = list(data.warnings)
    k = info["unscored"]["runs"]
    if k:
        items.append(
            f"{k} run{'s' if k != 1 else ''} could not be scored (a failure of ours; left "
            "out of every mean and retried on resume)"
        )
    items += [f"{label} failed: {error}" for label, error in sorted(info["failed"].items())]
    items += [
        f"{label} also won: {verdict}" for label, verdict in sorted(info["other_wins"].items())
    ]
    items += _undecidable(data)
    if info.get("last_error"):
        items.append(f"the run failed: {info['last_error']}")
    if sealed_todo := info.get("sealed_todo"):
        items.append(sealed_todo)
    candidates = _candidates(Path(data.run.skill_dir or ""), Path(run_dir))
    if candidates:
        items.append(f"{candidates} candidate evals wait for review in evals/candidates.json")
    return items


def _undecidable(data: RunView) -> list[str]:
    """Children whose step could not be decided because every run of each eval scored the same
    for it and for its parent (no spread to test): a tie by construction, never a loss, said
    where the morning reads it rather than in one progress line."""
    return [
        f"{n.label} was not decided against {n.parent}: every run of each eval scored the same "
        f"for both, so no interval could be formed ({n.label} {n.score:.3f}); more varied evals "
        "or more runs per eval can decide it"
        for n in data.nodes
        if n.label != "v0"
        and n.score is not None
        and "scored the same" in (n.reason or "")
        and n.decision != "won"
    ]


def _candidates(skill_dir: Path, run_dir: Path) -> int:
    """Candidate evals mined for review (evals/candidates.json), in the skill or the run folder."""
    for path in (skill_dir / "evals" / "candidates.json", run_dir / "evals" / "candidates.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        items = data.get("candidates", data.get("evals")) if isinstance(data, dict) else data
        if isinstance(items, list):
            return len(items)
    return 0


def _numbers(name: str, n: schemas.SummaryNumbers | None, won: bool) -> str:
    if n is None:
        return f"- {name}: not measured"
    evals = f"{n.evals} eval{'s' if n.evals != 1 else ''}"
    if not won:  # v0 against itself: a difference of zero is no finding
        return f"- {name}: v0 {n.v0:.3f} over {evals}; no version was shown to beat it"
    if n.low is None or n.high is None:
        return f"- {name}: v0 {n.v0:.3f} → best {n.best:.3f}, Δ {n.delta:+.3f} (no interval from one eval)"
    level = n.level or words.ci(n.confidence)
    return (
        f"- {name}: v0 {n.v0:.3f} → best {n.best:.3f}, Δ {n.delta:+.3f} "
        f"[{n.low:+.3f}, {n.high:+.3f}] {level} (Student-t over {evals})"
    )


def markdown(s: schemas.MorningSummary) -> str:
    out = [f"# Morning summary: {s.skill_name or '?'}", ""]
    if s.simulated:
        out += ["> **SIMULATED**: every number comes from the offline simulator, not a model.", ""]
    out += [
        f"**{s.headline}**",
        "",
        f"Run `{s.run_dir}` — {words.ended(s.status or '?', s.stop_reason)}"
        + (f"; started from the best of `{s.from_run}`" if s.from_run else "")
        + ".",
        "",
    ]
    out += [
        "## What won",
        "",
        f"- best version: {s.best}"
        + (f" (its decision: {s.scope}; not yet adopted)" if s.scope else ""),
        _numbers("train", s.train, s.won),
        _numbers("sealed test", s.sealed, s.won),
    ]
    if s.decision:
        out.append(f"- its decision: {s.decision}")
    out.append("")
    if s.diff:
        diff = (
            s.diff
            if len(s.diff) <= DIFF_CAP
            else s.diff[:DIFF_CAP] + "\n… (cut; see `optimizer diff`)\n"
        )
        out += [f"## The change (v0 → {s.best})", "", "```diff", diff.rstrip("\n"), "```", ""]
    budget = f" of {words.dollars(s.budget_usd)}" if s.budget_usd else ""
    calls = words.plural(s.calls, "model call")
    cost = (
        f"{s.spent} ({calls})." if s.spent else f"{words.dollars(s.spent_usd)}{budget} in {calls}."
    )
    out += ["## Cost", "", cost, ""]
    if s.next:
        out += ["## Next", ""] + [f"- {step.why}: `{step.command}`" for step in s.next] + [""]
    out += (
        ["## What to look at", ""] + ([f"- {item}" for item in s.look_at] or ["- nothing"]) + [""]
    )
    return "\n".join(out)


def write(run_dir: Path, *, night_error: str | None = None) -> Path:
    """summary.json (validated) then summary.md, each atomically; returns summary.md's path."""
    summary = build(run_dir, night_error=night_error)
    md, js = paths(run_dir)
    write_json(js, summary, schemas.MorningSummary)
    write_text(md, markdown(summary))
    log.info("summary.written", path=str(md), best=summary.best, won=summary.won)
    return md


def notify(command: str, summary_md: Path) -> str | None:
    """Run the user's own command with the summary's path as its last argument (no shell, so no
    quoting surprises); the problem in one sentence when it fails, else None. Never raises: a
    notification that fails must not fail the night."""
    try:
        argv = [*shlex.split(command), str(summary_md)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        problem = f"--notify {command!r} could not run: {exc}"
    else:
        if done.returncode == 0:
            return None
        problem = (
            f"--notify {command!r} exited with {done.returncode}: "
            f"{(done.stderr or done.stdout).strip()[:300]}"
        )
    log.warning("summary.notify_failed", problem=problem)
    return problem


def at_end(
    run_dir: Path,
    notify_command: str | None,
    console: Console | None = None,
    *,
    night_error: str | None = None,
) -> Path | None:
    """summary.md at the end of every run, however it ended, then the user's --notify command
    with its path. Best effort: a summary that cannot be made is logged, never raised over the
    run's own outcome."""
    try:
        path = write(run_dir, night_error=night_error)
    except Exception:
        log.exception("summary.failed", run=str(run_dir))
        return None
    if notify_command:
        problem = notify(notify_command, path)
        if problem and console is not None:
            console.print(f"warning: {problem}", style="yellow", markup=False, highlight=False)
    return path
