"""How the runs of a run folder were confined (trials.confined and .sandbox), for status, show,
the report and the review page. Never writes; a folder from before it was recorded says so."""

from __future__ import annotations

from pathlib import Path

from optimizer.report.info import Confinement
from optimizer.store import readonly, trials
from optimizer.store.errors import StoreError
from optimizer.store.files import Workspace
from optimizer.store.lock import running_pid

# What each mechanism means, in the words a user needs when it is not bubblewrap.
_WHY = {
    "none": 'sandbox.mode = "none"',
    # Before the CLI ran in bubblewrap every run of it was "host"; now only an opted-out one.
    "host": "the Claude Code CLI ran on the host, its file tools unconfined",
}


def summary(run_dir: Path, version: str | None = None) -> Confinement:
    """{"runs": recorded runs, "unconfined": how many ran without bubblewrap, "by": {mechanism:
    runs}}, over the whole run or one version."""
    ws = Workspace(run_dir)
    try:
        db = readonly.View(ws.state_db, live=running_pid(ws) is not None)
    except StoreError:
        return {"runs": 0, "unconfined": 0, "by": {}}
    with db:
        rows = trials.confinement(db, version)
    return {
        "runs": sum(r["runs"] for r in rows),
        "unconfined": sum(r["runs"] - (r["confined"] or 0) for r in rows),
        "by": {r["sandbox"]: r["runs"] for r in rows},
    }


def describe(info: Confinement) -> str:
    """One line: "bwrap (confined), 24 runs", or "UNCONFINED: …" naming why."""
    if not info.get("runs"):
        return "no run recorded yet"
    if not info["unconfined"]:
        return f"{', '.join(info['by'])} (confined), {info['runs']} runs"
    parts = [
        f"{how} {n}" + (f": {_WHY[how]}" if how in _WHY else "") for how, n in info["by"].items()
    ]
    return (
        f"UNCONFINED: {info['unconfined']} of {info['runs']} runs ran model-written work "
        f"without bubblewrap ({'; '.join(parts)})"
    )
