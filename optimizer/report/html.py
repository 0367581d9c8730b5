"""The HTML report: an index page (report.html) that renders lazily from one embedded JSON blob,
and one script per version beside it (report_files/v12.js) that the page loads when the version
is opened. Never references the network, and never puts run data into the page as markup
(textContent only)."""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import quote

import jinja2
import orjson

from optimizer import schemas, words
from optimizer.grade.preview import natural_key
from optimizer.report import confinement, overview, pages, read
from optimizer.report.info import StatusInfo
from optimizer.report.status import status as run_status
from optimizer.report.view import RunView
from optimizer.store import ledger, readonly
from optimizer.store.errors import StoreError
from optimizer.store.files import Workspace, write_text
from optimizer.store.lock import running_pid

TEXT_CAP, IMAGE_CAP = pages.TEXT_CAP, pages.IMAGE_CAP
COST_POINTS = 400
TEMPLATE = "template.html.j2"
# A page's script calls this with its key, the token of the index it was written with, and its data.
CALLBACK = "reportDetail"
DETAIL_NAME = re.compile(r"(v\d+|baseline|test)\.js")


def _cost_series(ws: Workspace) -> list[list]:
    """Cumulative spend over time in at most COST_POINTS + 1 points (ledger.cumulative)."""
    if not ws.state_db.is_file():
        return []
    try:
        db = readonly.View(ws.state_db, live=running_pid(ws) is not None)
    except StoreError:
        return []
    with db:
        return ledger.cumulative(db, COST_POINTS)


@dataclass(frozen=True)
class PageOptions:
    """How the index page is served: for review or not, where its links and page scripts are,
    the token its pages carry, what was inlined, and how often the review page polls."""

    review: bool = False
    files_base: str = ""
    details_base: str = ""
    token: str = ""
    inlined: int = 0
    capped: bool = False
    refresh_ms: int = 0


class _Meta(TypedDict):
    """The index page's "meta": which run, how it ended, and how the page is served."""

    skill_name: str
    run_id: str
    simulated: bool
    current_best: str | None
    source: str
    form: str
    status: str | None
    stop_reason: str | None
    ended: str
    started_at: str | None
    generated_at: str
    review: bool
    files_base: str
    details_base: str
    token: str
    callback: str
    inlined_bytes: int
    inline_cap_reached: bool
    refresh_ms: int
    sandbox: str | None
    unconfined: bool


def build(
    run_dir: Path, *, options: PageOptions | None = None, data: RunView | None = None
) -> dict:
    """What the index page shows, as JSON-able data; each page's runs come from its own script."""
    options = options or PageOptions()
    data = data or read.load(run_dir)
    ws = data.ws
    nodes = []
    for n in data.nodes:
        flat = {k: v for k, v in n.shown().items() if k not in ("rationale", "children")}
        if data.form == "iterations":
            flat["per_eval"] = read.per_eval(ws, n)
        nodes.append(flat)
    evals = sorted({e for n in nodes for e in (n.get("per_eval") or {})}, key=natural_key)
    status = run_status(run_dir, data) if data.source == "state.db" else None
    return {
        "meta": _meta(data, options, status),
        "status": status,
        # the morning summary's headline, scores, diff and next commands: one reading, one wording
        "overview": overview.headline(run_dir, data, status),
        "nodes": nodes,
        "chart": overview.chart(nodes),  # every version, the pending ones too
        "evals": evals,
        "cost": _cost_series(ws),
        "budget_usd": (data.settings.get("budget") or {}).get("usd"),
        "test": status.get("test") if status else data.history.get("test"),
        "sealed_todo": status.get("sealed_todo") if status else None,
        "warnings": data.warnings,  # shown on top: what the numbers below do not say
        "suggestions": overview.suggestions(read.read_json(ws.feedback_aggregate)),
        "power": status.get("power") if status else None,  # what more evals would buy
        "pages": pages.keys(data),  # which pages exist; their data is loaded when one is opened
    }


def _meta(data: RunView, options: PageOptions, status: StatusInfo | None) -> _Meta:
    """The run's name, state and ending, the time of this page, and how it is served."""
    ws = data.ws
    return {
        "skill_name": data.run.skill_name or data.history.get("skill_name") or ws.root.name,
        "run_id": data.run.id or ws.root.name,
        "simulated": data.simulated,
        "current_best": data.current_best,
        "source": data.source,
        "form": data.form,
        "status": data.run.status,
        "stop_reason": data.run.stop_reason,
        "ended": words.ended(data.run.status, data.run.stop_reason),
        "started_at": data.run.started_at,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "review": options.review,
        "files_base": options.files_base,
        "details_base": options.details_base,
        "token": options.token,
        "callback": CALLBACK,
        "inlined_bytes": options.inlined,
        "inline_cap_reached": options.capped,
        "refresh_ms": options.refresh_ms,  # the review page asks /api/progress this often while the run runs
        "sandbox": confinement.describe(status["sandbox"]) if status else None,
        "unconfined": bool(status and status["sandbox"]["unconfined"]),
    }


def detail_script(key: str, token: str, page: dict) -> str:
    """One page as a script that hands its data to the index page. A script, not a JSON file:
    a page opened from file:// may load a script beside it, but browsers refuse it fetch()."""
    schemas.ReportPage.model_validate(page)
    return f"{CALLBACK}({script_json(key)},{script_json(token)},{script_json(page)});\n"


# What the json module did with default=str: any key type, and dates and dataclasses through str.
_AS_JSON_MODULE = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)


def script_json(data: Any) -> str:
    """JSON that is inert inside a <script> element: no '<', '>' or '&' can close or open a tag."""
    try:
        text = orjson.dumps(data, default=str, option=_AS_JSON_MODULE).decode("utf-8")
    except TypeError:  # what orjson refuses and the json module writes (an integer past 64 bits)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )


def render(
    run_dir: Path, *, options: PageOptions | None = None, data: RunView | None = None
) -> str:
    """The index page; `options.details_base` is where it finds each page's script (<key>.js)."""
    options = options or PageOptions()
    index = build(run_dir, options=options, data=data)
    template = _environment().get_template(TEMPLATE)
    return template.render(
        title=f"{index['meta']['skill_name']} — skill optimizer report",
        simulated=index["meta"]["simulated"],
        review=options.review,
        unconfined=index["meta"]["sandbox"] if index["meta"]["unconfined"] else None,
        nonce=secrets.token_urlsafe(16),
        data_json=script_json(index),
    )


def details_dir(target: Path) -> Path:
    """Where the pages of `target` (report.html) go: report_files/, as browsers save a page."""
    return target.with_name(f"{target.stem}_files")


def write_report(run_dir: Path, output: Path | None = None) -> Path:
    """report.html (or `output`) and its pages beside it; links to run files are relative to
    where the file is written. The pages go first, one at a time, and the index last, so the index
    never names a page that is not there yet."""
    target = Path(output) if output is not None else Workspace(run_dir).report
    base = os.path.relpath(Path(run_dir).resolve(), target.resolve().parent).replace(os.sep, "/")
    folder = details_dir(target)
    data = read.load(run_dir)
    token = secrets.token_hex(8)  # a page left from an earlier report says so instead of mixing in
    keys = pages.keys(data)
    inlined, capped = 0, False
    for key in keys:
        budget = pages.Budget()
        # Not synced one by one: 200 fsyncs were a sixth of the report's time, and a page lost
        # to a power cut is written again by the next report (the index is synced, and last).
        write_text(
            folder / f"{key}.js",
            detail_script(key, token, pages.page(data.ws, data, key, budget)),
            durable=False,
        )
        inlined, capped = inlined + budget.used, capped or budget.refused
    options = PageOptions(
        files_base="" if base == "." else f"{base}/",
        details_base=f"{quote(folder.name)}/",
        token=token,
        inlined=inlined,
        capped=capped,
    )
    html = render(run_dir, options=options, data=data)
    write_text(target, html)
    stale = (
        [p for p in folder.iterdir() if DETAIL_NAME.fullmatch(p.name) and p.stem not in keys]
        if folder.is_dir()
        else []
    )
    for path in stale:  # only what an earlier report wrote: the folder may hold anything else
        path.unlink(missing_ok=True)
    return target
