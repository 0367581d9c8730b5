"""Whole runs in the test process: the real command line (typer's CliRunner), the real SDK, and a
simulator the test holds, so it can shape timing and read every request. Not a test module."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
from typer.testing import CliRunner

from optimizer.cli import app
from optimizer.model import factory as llm
from optimizer.sim import Simulator

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tests" / "fixtures" / "csv-report"
VOLATILE = {"created_at", "started_at", "decided_at"}  # wall-clock times only
MAKE_CLIENT = llm.make_client  # the real one, whatever a test has patched in since


class Recording(Simulator):
    """The simulator behind a transport that delays each call by `delay(role, sample, body)`
    seconds and keeps every request it answers (role, sample, canonical body)."""

    def __init__(
        self,
        *,
        delay: Callable[[str, int, bytes], float] | None = None,
        proposal: dict | None = None,
        **knobs,
    ) -> None:
        super().__init__(**knobs)
        self.delay = delay
        self.proposal = proposal  # when set, every proposer call answers with this tool input
        self.requests: list[tuple[str, int, str]] = []

    def respond(self, body: dict, headers) -> dict:
        reply = super().respond(body, headers)
        if self.proposal is not None and reply["content"][0].get("name") == "submit_proposal":
            reply["content"][0]["input"] = self.proposal
        return reply

    def transport(self) -> httpx2.MockTransport:
        inner = super().transport()

        async def handler(request: httpx2.Request) -> httpx2.Response:
            role = request.headers.get("x-optimizer-role", "")
            sample = int(request.headers.get("x-optimizer-sample", "0") or 0)
            if self.delay is not None:
                await asyncio.sleep(self.delay(role, sample, request.content))
            if request.url.path.rstrip("/").endswith("/v1/messages"):
                body = json.loads(request.content)
                body.pop("stream", None)  # a transport flag, not part of the question
                self.requests.append((role, sample, json.dumps(body, sort_keys=True)))
            return await inner.handle_async_request(request)

        return httpx2.MockTransport(handler)

    def bodies(self, *roles: str) -> list[str]:
        return sorted(body for role, _, body in self.requests if not roles or role in roles)


def spread(reverse: bool, most_s: float = 0.012) -> Callable[[str, int, bytes], float]:
    """Delays that make calls finish in opposite orders in two twins: one twin waits d for a call,
    the other `most_s − d`, d drawn from the call's own bytes and its sample (run) number."""

    def delay(_role: str, sample: int, body: bytes) -> float:
        d = (int(hashlib.sha256(body).hexdigest()[:8], 16) % 7 + 3 * (sample % 3)) / 12 * most_s
        return most_s - d if reverse else d

    return delay


def use_simulator(monkeypatch, sim: Simulator) -> None:
    """Model clients made in this process from now on send their calls to `sim`."""

    def with_sim(settings, store, **kw):
        kw["simulator"] = sim
        return MAKE_CLIENT(settings, store, **kw)

    monkeypatch.setattr(llm, "make_client", with_sim)


def cli(monkeypatch, sim: Simulator | None, *args: str, code: int = 0) -> str:
    """`optimizer ARGS` in this process; model calls go to `sim`. Returns what it printed."""
    if sim is not None:
        use_simulator(monkeypatch, sim)
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def history(run_dir: Path) -> dict:
    """history.json without wall-clock times."""

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads((run_dir / "history.json").read_text()))


class Recorder(ThreadingHTTPServer):
    """A loopback proxy in front of a model server (ours or an independent one) that keeps every
    request body, so a test sees the requests exactly as they left the product. Serves from a
    thread of its own once made; call shutdown() and server_close()."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream = upstream
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def since(self, mark: int) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.bodies[mark:])


class _Forward(BaseHTTPRequestHandler):
    server: Recorder

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        with self.server.lock:
            self.server.bodies.append(json.loads(raw))
        # End-to-end headers go on (the key, the role): the upstream may check them.
        headers = {
            k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
        }
        request = urllib.request.Request(
            self.server.upstream + self.path.split("?", 1)[0],
            data=raw,
            method="POST",
            headers=headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=300) as reply:
                status, body, kind = reply.status, reply.read(), reply.headers.get("content-type")
        except urllib.error.HTTPError as exc:
            status, body, kind = exc.code, exc.read(), exc.headers.get("content-type")
        self.send_response(status)
        self.send_header("content-type", kind or "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass
