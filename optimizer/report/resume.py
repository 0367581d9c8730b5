"""Where a resume continues, read from state.db as the engine will read it."""

from __future__ import annotations

from optimizer import config
from optimizer.store import readonly
from optimizer.store.files import Workspace


def resume_point(ws: Workspace, settings: config.Settings) -> str:
    """Where a resume continues, as the engine will: the open iteration with the parent it chose,
    or the next one from the parent the strategy will choose."""
    conn = readonly.connect(ws.state_db)
    try:
        run = (readonly.rows(conn, "select current_best from runs limit 1") or [{}])[0]
        best = run.get("current_best") or "v0"
        iterations = readonly.rows(
            conn, "select number, parent, finished_at from iterations order by number"
        )
    finally:
        conn.close()
    open_ = [i for i in iterations if not i["finished_at"]]
    done = len(iterations) - len(open_)
    if open_:
        return f"resuming at iteration {open_[0]['number']} from {open_[0]['parent']} (current best {best})"
    limit = settings.loop.max_iterations
    if done >= limit:
        return (
            f"resuming after iteration {done}: the limit of {limit} iterations is reached, so only "
            f"the sealed test is checked; raise --max-iterations to go on (current best {best})"
        )
    if not iterations:
        return f"resuming before iteration 1: the baseline and v0 are graded first (current best {best})"
    parent = best if settings.loop.parent_selection == "best" else "a parent on the Pareto front"
    return f"resuming at iteration {done + 1} from {parent} (current best {best})"
