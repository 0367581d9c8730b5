"""`optimizer adopt RUN [VERSION]`, and a night that adopts: certify a version against the one the user
has now on fresh runs (search/adoption.py), after showing what it may cost. Holds the run folder's
lock, as the daemon does, so an adoption never runs beside a search of the same run; a killed
adoption is continued by the same command from the ledger. Exit 0 certified, 1 not certified."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from optimizer import config, words
from optimizer.errors import OptimizerError, RunStopped
from optimizer.report import adopted
from optimizer.schemas import Adoption
from optimizer.search import adoption as adopting
from optimizer.search import runfolder
from optimizer.search.state import RunState
from optimizer.store import iterations, runs
from optimizer.store.files import Workspace
from optimizer.store.runs import Run


def settings_of(ws: Workspace, overrides: list[str]) -> config.Settings:
    runfolder.require(ws, "pass a run folder or the skill folder a run was made from.")
    return runfolder.settings_from(ws, overrides).settings


def adopt(
    run_dir: Path,
    version: str | None,
    *,
    overrides: list[str],
    confirm: Callable[[str], bool] | None,
    max_usd: float | None,
    console: Console,
) -> Adoption:
    """Certify `version` (default: the search's best) over the adopted version. `confirm` is asked
    with the estimate before anything is paid (None: go on); False from it writes nothing."""
    from optimizer.budget.stops import SignalFlag
    from optimizer.report.live import Reporter
    from optimizer.search import engine

    ws = Workspace(run_dir)
    settings = settings_of(ws, overrides)

    def waits(pid: int) -> str:
        return (
            f"{ws.root}: a daemon is running on this run (pid {pid}); an adoption waits for the "
            f"search to end (`optimizer stop {ws.root}`), so it never runs beside it."
        )

    with runfolder.open_run(ws, settings, refuse=waits, search=False) as opened:
        store, client = opened.store, opened.client
        flag = SignalFlag()
        flag.install()
        client.budget.allow(0.0)  # no call before the estimate is shown
        with Reporter(None, store, simulated=client.simulated, settings=settings) as ui:
            run = opened.state(ui.on, flag)
            claim = adopting.claim_for(run, version)
            limit = _announced(run, claim, max_usd, settings, console)
            if confirm is not None and not confirm("certify it now?"):
                raise OptimizerError("nothing was adopted: not confirmed.")
            # The adoption is paid apart, at the price shown (model/budget.py): a run whose
            # budget the night used up can still be adopted. Tonight's deadline was the
            # search's; the user asked for this adoption now.
            client.budget.allow(limit)
            paid = settings.model_copy(
                update={"budget": settings.budget.model_copy(update={"deadline": ""})}
            )
            run.go_on_under(paid, engine.stop_rules(ws, paid, flag, client.budget))
            result = _certified(opened, run, claim)
    _rewrite_summary(ws.root)
    return result


def _announced(
    run: RunState,
    claim: adopting.Claim,
    max_usd: float | None,
    settings: config.Settings,
    console: Console,
) -> float:
    """The claim and its estimate said before anything is paid; the limit the adoption stops
    at. The estimate is an upper bound (the measured price and a margin): the adoption stops at
    it, so it never spends more than it printed."""
    estimate = adopting.estimate_for(run, claim)
    most = estimate.most_usd if estimate else 0.0
    limit = max_usd if max_usd is not None else most
    what = "on these tasks" if claim.scope == "tasks" else "in general"
    if claim.status != "new":
        console.print(_asked_again(claim, settings.adopt), markup=False)
    console.print(
        f"adopt {claim.version} over {claim.base} (better {what}, α "
        f"{claim.kept.alpha:g}): "
        + (adopted.estimate_line(estimate) if estimate else "no measured price yet")
        + f"; it stops at ${limit:.2f}",
        markup=False,
        highlight=False,
    )
    return limit


def _certified(opened: runfolder.OpenRun, run: RunState, claim: adopting.Claim) -> Adoption:
    """The adoption's fresh runs and its decision, and the lineage files rewritten with it."""
    ws, store = opened.ws, opened.store
    activity = (runs.row(store) or Run()).activity or "stopped"
    with opened.open_target(run) as target:
        try:
            result = asyncio.run(adopting.certify(run, target, claim))  # type: ignore[arg-type]
        except RunStopped as exc:  # the limit or a stop: its runs are in the ledger
            raise OptimizerError(
                f"the adoption stopped before it decided ({exc}); nothing was adopted. "
                f"`optimizer adopt {ws.root} {claim.version} --max-usd X` continues "
                "it from its runs so far."
            ) from None
        finally:
            # However the adoption ends, status goes back to what the run was doing:
            # the adoption's own activity would otherwise read as still under way.
            runs.show_activity(store, ws.root.name, activity)
        target.write_lineage(iterations.finished_count(store))
    return result


def _asked_again(claim: adopting.Claim, now: config.Adopt) -> str:
    """What asking again about a claim does: it goes on, never starts over (one α per claim)."""
    k = claim.kept
    where = f"its look at {k.looked} fresh runs an eval" if k.looked else "its first look"
    said = (
        f"adoption {claim.number} made this claim before: it goes on from {where} with the "
        "looks and α it was opened with"
    )
    alpha = k.alpha if now.fdr != "none" else now.alpha  # under LORD++ the level is the claim's
    if (now.first_runs, now.max_runs, alpha) != (k.first_runs, k.max_runs, k.alpha):
        said += (
            f" (adopt.first_runs {k.first_runs}, max_runs {k.max_runs}, α {k.alpha:g}; the "
            "settings given now apply to a new claim only, so what was spent is not reset)"
        )
    return said + "."


def _rewrite_summary(root: Path) -> None:
    """summary.md speaks of the adopted version: written again, keeping a night's error."""
    import json

    from optimizer.report import summary

    md, js = summary.paths(root)
    before = json.loads(js.read_text(encoding="utf-8")) if js.is_file() else {}
    summary.write(root, night_error=before.get("night_error"))


def outcome_line(ws_root: Path, found: Adoption) -> str:
    d = found.decision
    evidence = ""
    if d is not None and d.delta is not None:
        evidence = (
            f"Δ {d.delta:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}] {words.ci(d.confidence)}, "
            f"{d.evals} evals × {d.runs_per_eval} fresh runs, ${found.cost_usd:.2f}"
        )
    if found.certified:
        return (
            f"certified: {found.claim} ({evidence}). {found.version} is adopted: "
            f"`optimizer export {ws_root}` copies it out."
        )
    return (
        f"not certified: {found.claim} is not shown ({evidence or (d.reason if d else '')}); "
        f"{found.base} stays adopted. {found.next_step}"
    )


def interactive() -> bool:
    return sys.stdin.isatty()
