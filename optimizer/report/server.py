"""`optimizer review`: the report on 127.0.0.1 with a feedback box per run, autosaved to feedback.json.
Never listens beyond loopback, never serves a file outside the run folder or lets one script the page."""

from __future__ import annotations

import json
import mimetypes
import secrets
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pydantic import ValidationError
from rich.console import Console

from optimizer import schemas
from optimizer.errors import BadInput
from optimizer.grow import review as grow_review
from optimizer.report import html, pages, progress, read, status
from optimizer.report.view import RunView
from optimizer.schemas import JsonObject
from optimizer.store import readonly
from optimizer.store.db import now
from optimizer.store.files import Workspace, write_json

HOST = "127.0.0.1"
MAX_BODY = 1_000_000
MAX_FEEDBACK = 100_000
RUN_GLOBS = ("v*/eval-*/*/run-*", "baseline/eval-*/*/run-*", "test/v*/eval-*/*/run-*")
INERT = "default-src 'none'; img-src data:; sandbox"  # a served output cannot script our origin
CANDIDATE_ACTIONS = ("/api/candidates/accept", "/api/candidates/edit", "/api/candidates/reject")
DETAILS = "/api/details/"  # + <key>.js: one page of the report, read from the run when it is opened
REFRESH_MS = 5000  # how often the page asks for progress while the daemon runs


def run_ids(root: Path) -> set[str]:
    """The feedback ids of every run folder: its path under the root with '/' replaced by '-'."""
    ws = Workspace(root)
    return {ws.run_id(p) for pattern in RUN_GLOBS for p in root.glob(pattern) if p.is_dir()}


def load_feedback(ws: Workspace) -> dict:
    if not ws.feedback.is_file():
        return {"reviews": [], "status": "in_progress"}
    try:
        return schemas.Feedback.model_validate(
            json.loads(ws.feedback.read_text(encoding="utf-8"))
        ).model_dump(mode="json", exclude_none=True)
    except (ValueError, OSError) as exc:
        raise BadInput(
            f"{ws.feedback}: not a valid feedback file ({str(exc).splitlines()[0]}); "
            "fix it or move it away, then start `optimizer review` again."
        ) from None


def save_feedback(ws: Workspace, data: dict) -> dict:
    model = schemas.Feedback.model_validate(data)  # the proposer reads this file: never write junk
    write_json(ws.feedback, model)
    return model.model_dump(mode="json", exclude_none=True)


class ReviewServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, run_dir: Path, port: int, refresh_ms: int = REFRESH_MS) -> None:
        self.root = Path(run_dir).resolve()
        self.refresh_ms = refresh_ms
        self.ws = Workspace(self.root)
        self.lock = threading.Lock()  # one read-modify-write of feedback.json at a time
        self.known = run_ids(self.root)
        self.token = secrets.token_hex(8)
        self._loaded: tuple[tuple, RunView] | None = None
        self._load_lock = threading.Lock()  # also makes the commit watcher's one connection serial
        self._commits = readonly.Commits(self.ws.state_db)
        row = read.load(self.root).run  # the skill folder the run began from: its candidate evals
        self.skill_dir = Path(row.skill_dir) if row.skill_dir else None
        super().__init__((HOST, port), Handler)

    def candidates(
        self, action: str | None = None, body: JsonObject | None = None
    ) -> grow_review.Listing:
        settings = self.run_data().settings
        with self.lock:
            if action is None:
                return grow_review.listing(self.skill_dir, settings)
            return grow_review.act(self.skill_dir, settings, action, body or {})

    def page_options(self) -> html.PageOptions:
        """How this server serves the index page, the same for the page and its /api/index: the
        page swaps in what /api/index answers, so the two must never differ."""
        return html.PageOptions(
            review=True, details_base=DETAILS, token=self.token, refresh_ms=self.refresh_ms
        )

    def run_data(self) -> RunView:
        """The run as read.load reads it, read again only when its files changed: on a long run
        each version opened would otherwise read the whole run (seconds at 200 versions)."""
        with self._load_lock:
            files = (self.ws.state_db, self.ws.state_db.with_name("state.db-wal"), self.ws.history)
            stamp = (self._commits.version(), *(_stamp(p) for p in files))
            if self._loaded is None or self._loaded[0] != stamp:
                self._loaded = (stamp, read.load(self.root))
            return self._loaded[1]

    @property
    def port(self) -> int:
        return self.server_address[1]

    def review(self, run_id: str, text: str) -> dict:
        if run_id not in self.known:
            self.known = run_ids(self.root)  # a daemon may have added runs since the start
            if run_id not in self.known:
                raise BadInput(f"unknown run id {run_id!r}")
        if run_id.startswith("test-"):
            # The proposer reads feedback.json: a remark on a sealed test run would leak the test.
            raise BadInput(
                f"run {run_id} belongs to the sealed test split, which takes no feedback: "
                "whatever is said about it would reach the proposer; review a train run "
                "instead."
            )
        with self.lock:
            data = load_feedback(self.ws)
            reviews = [r for r in data["reviews"] if r["run_id"] != run_id]
            if text.strip():
                old = [i for i, r in enumerate(data["reviews"]) if r["run_id"] == run_id]
                entry = {"run_id": run_id, "feedback": text, "timestamp": now()}
                reviews.insert(old[0] if old else len(reviews), entry)
            # an edit after "submit all" reopens the review until it is submitted again
            return save_feedback(self.ws, {**data, "reviews": reviews, "status": "in_progress"})

    def submit(self) -> dict:
        with self.lock:
            return save_feedback(self.ws, {**load_feedback(self.ws), "status": "complete"})


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class Handler(BaseHTTPRequestHandler):
    server: ReviewServer
    server_version = "optimizer-review"
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass  # the terminal shows the URL; one line per request would bury it

    # -- guards ------------------------------------------------------------------------------
    def _host_ok(self) -> bool:
        # A page on another site may resolve its own name to 127.0.0.1 (DNS rebinding): only
        # requests addressed to the loopback names reach the handlers.
        allowed = {f"{HOST}:{self.server.port}", f"localhost:{self.server.port}"}
        if self.headers.get("Host", "") not in allowed:
            return False
        origin = self.headers.get("Origin")
        return origin is None or origin in {f"http://{a}" for a in allowed}

    def _path(self) -> str | None:
        """The decoded path, or None when it could leave the run folder."""
        raw = urlsplit(self.path).path
        once = unquote(raw)
        for candidate in (raw, once, unquote(once)):
            parts = candidate.replace("\\", "/").split("/")
            if ".." in parts or "\0" in candidate or "\\" in candidate:
                return None
        return once

    def _send(self, status: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        # A page of another site may not embed what this server serves (a <script> or <img>
        # load carries no Origin header): browsers drop such cross-site loads.
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: object) -> None:
        self._send(status, json.dumps(data).encode("utf-8"), "application/json")

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    # -- requests -------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if not self._host_ok():
            return self._error(HTTPStatus.FORBIDDEN, "requests must be addressed to 127.0.0.1")
        path = self._path()
        if path is None:
            return self._error(HTTPStatus.FORBIDDEN, "that path is outside the run folder")
        if path in ("/", "/index.html"):
            page = html.render(
                self.server.root,
                options=self.server.page_options(),
                data=self.server.run_data(),  # the read its pages then share
            )
            return self._send(HTTPStatus.OK, page.encode("utf-8"), "text/html; charset=utf-8")
        if path == "/api/progress":
            return self._json(
                HTTPStatus.OK,
                progress.snapshot(status.status(self.server.root, self.server.run_data())),
            )
        if path == "/api/index":  # the page's data again, when the progress says the run moved on
            return self._json(
                HTTPStatus.OK,
                html.build(
                    self.server.root,
                    options=self.server.page_options(),
                    data=self.server.run_data(),
                ),
            )
        if path.startswith(DETAILS):
            return self._details(path.removeprefix(DETAILS))
        if path in ("/api/feedback", "/api/candidates"):
            try:
                return self._json(
                    HTTPStatus.OK,
                    load_feedback(self.server.ws)
                    if path == "/api/feedback"
                    else self.server.candidates(),
                )
            except BadInput as exc:
                return self._error(HTTPStatus.CONFLICT, str(exc))
        return self._file(path)

    do_HEAD = do_GET

    def _details(self, name: str) -> None:
        # A version's page is a script: another site could load it with its own reportDetail()
        # and read the runs. Browsers say where a load comes from; only the review page may.
        if self.headers.get("Sec-Fetch-Site", "same-origin") != "same-origin":
            return self._error(
                HTTPStatus.FORBIDDEN, "a version's page loads only from the review page"
            )
        data = self.server.run_data()
        key = name.removesuffix(".js")
        if not html.DETAIL_NAME.fullmatch(name) or key not in pages.keys(data):
            return self._error(HTTPStatus.NOT_FOUND, f"the run has no page {key!r}")
        page = pages.page(data.ws, data, key, pages.Budget())
        script = html.detail_script(key, self.server.token, page).encode("utf-8")
        self._send(HTTPStatus.OK, script, "text/javascript; charset=utf-8")

    def _file(self, path: str) -> None:
        root = self.server.root
        target = (root / path.lstrip("/")).resolve()
        if not target.is_relative_to(root):
            return self._error(HTTPStatus.FORBIDDEN, "that path is outside the run folder")
        if any(p.startswith(".") for p in target.relative_to(root).parts) or not target.is_file():
            return self._error(HTTPStatus.NOT_FOUND, "no such file in the run folder")
        ctype = mimetypes.guess_type(target.name)[0] or ""
        # Run outputs are model-written: only images keep their type; the rest is plain text.
        if not ctype.startswith("image/") or ctype == "image/svg+xml":
            ctype = "text/plain; charset=utf-8"
        self._send(HTTPStatus.OK, target.read_bytes(), ctype, {"Content-Security-Policy": INERT})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        if not self._host_ok():
            return self._error(HTTPStatus.FORBIDDEN, "requests must come from the review page")
        path = self._path()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "feedback is too long")
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
            if path == "/api/feedback":
                run_id, text = body.get("run_id"), body.get("feedback", "")
                if (
                    not isinstance(run_id, str)
                    or not isinstance(text, str)
                    or len(text) > MAX_FEEDBACK
                ):
                    return self._error(
                        HTTPStatus.BAD_REQUEST, "send {run_id: text, feedback: text}"
                    )
                return self._json(HTTPStatus.OK, self.server.review(run_id, text))
            if path == "/api/feedback/submit":
                return self._json(HTTPStatus.OK, self.server.submit())
            if path in CANDIDATE_ACTIONS:  # accepting writes the skill's evals.json, never the run
                return self._json(
                    HTTPStatus.OK, self.server.candidates(path.rsplit("/", 1)[1], body)
                )
        except (ValueError, AttributeError, ValidationError) as exc:
            return self._error(HTTPStatus.BAD_REQUEST, f"bad request: {exc}")
        except BadInput as exc:
            return self._error(
                HTTPStatus.BAD_REQUEST if "unknown run id" in str(exc) else HTTPStatus.CONFLICT,
                str(exc),
            )
        return self._error(HTTPStatus.NOT_FOUND, "no such endpoint")


def _server(run_dir: Path, port: int, refresh_ms: int = REFRESH_MS) -> ReviewServer:
    read.load(run_dir)  # a clear error for a folder that is not a run
    load_feedback(Workspace(run_dir))
    try:
        return ReviewServer(run_dir, port, refresh_ms)
    except OSError as exc:
        raise BadInput(
            f"port {port} on {HOST} cannot be used ({exc.strerror}); pass another --port."
        ) from None


def serve_in_thread(
    run_dir: Path, port: int = 0, refresh_ms: int = REFRESH_MS
) -> tuple[ReviewServer, int]:
    """For tests: a running server and its port; stop it with server.shutdown(); server.server_close()."""
    server = _server(run_dir, port, refresh_ms)
    threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name="review-server",
        daemon=True,
    ).start()
    return server, server.port


def serve(run_dir: Path, port: int, console: Console) -> None:
    server = _server(run_dir, port)
    console.print(
        f"reviewing {run_dir} at http://{HOST}:{server.port}/  (feedback is saved to "
        f"{Workspace(run_dir).feedback}; Ctrl-C stops)"
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print("review stopped")
    finally:
        server.server_close()
