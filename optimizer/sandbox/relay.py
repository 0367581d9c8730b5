"""The host end of a confined agent's one way out: an HTTP relay on a unix socket, bound into the
sandbox, that forwards each request to the model endpoint and nowhere else. It must never forward
to another host, nor let the real API key into the sandbox: it puts the key in on the way out."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx2

from optimizer.model.clock import ModelCall, current_clock
from optimizer.model.relayed import Metered

# In the sandbox, where the agent's HTTP client is pointed (ANTHROPIC_BASE_URL); its own network
# namespace has nothing else listening, so any port would do.
INNER_PORT = 8089
# The only key the sandboxed agent holds: the relay swaps it for the real one.
PLACEHOLDER_KEY = "sk-ant-sandboxed-by-the-relay"
HEAD_LIMIT = 256 * 1024
MAX_BODY = 32 * 1024 * 1024  # a request the relay holds in the daemon's memory, outside any cgroup
# What an agent needs of the API. The rest (files, batches, skills, models of the organisation)
# would let a command in the sandbox act on the user's account with the real key.
ALLOWED = {("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens")}
# Tools the service runs itself, reaching hosts on the sandbox's behalf.
SERVER_TOOLS = ("web_search", "web_fetch", "code_execution", "mcp")
# Per connection, not end to end: they are always about to be (re)used, or gone.
_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}
# The forwarder inside the sandbox (node, run with `node -e FORWARDER -- SOCKET PORT CMD...`):
# listens on loopback, pipes every connection to the relay's socket, and starts CMD once it
# listens, so that the agent's first request finds it; it ends with CMD's exit status. It sets
# the agent's ANTHROPIC_* variables itself, since bwrap passes no credential-looking name.
FORWARDER = r"""
const net = require("net"), { spawn } = require("child_process"), os = require("os");
const [sock, port, ...cmd] = process.argv.slice(1);
const server = net.createServer((inner) => {
  const outer = net.connect(sock);
  inner.pipe(outer); outer.pipe(inner);
  inner.on("error", () => outer.destroy()); outer.on("error", () => inner.destroy());
  inner.on("close", () => outer.destroy()); outer.on("close", () => inner.destroy());
});
server.on("error", (e) => { console.error("sandbox relay: " + e.message); process.exit(125); });
server.listen(Number(port), "127.0.0.1", () => {
  process.env.ANTHROPIC_BASE_URL = "http://127.0.0.1:" + port;
  process.env.ANTHROPIC_API_KEY = "@KEY@";
  const child = spawn(cmd[0], cmd.slice(1), { stdio: "inherit" });
  child.on("error", (e) => { console.error("sandbox relay: " + e.message); process.exit(127); });
  child.on("exit", (code, sig) => process.exit(code ?? 128 + (os.constants.signals[sig] || 0)));
});
""".replace("@KEY@", PLACEHOLDER_KEY)


METERED_PATH = "/v1/messages"  # count_tokens is free


class Meter(Protocol):
    """What the relay asks of the run's budget (model.relayed.RelayMeter): admit a request, or
    say why not; settle its answer once it has ended."""

    def admit(self, body: bytes) -> Metered | str: ...

    def settle(self, metered: Metered, status: int, latency_ms: float) -> float: ...


@dataclass(frozen=True)
class Upstream:
    """The model endpoint a relay forwards to (`target`, a base URL), the real key it puts in,
    and any headers it sets on every request."""

    target: str
    api_key: str = field(repr=False)  # a logged or printed record must not show the key
    headers: Mapping[str, str] = field(default_factory=dict)


class Relay:
    """Serves one run's socket: each request goes to `target` (its path appended to the target's),
    with the real key and any `headers` set; the answer streams back as it comes. With a `meter`,
    each Messages request is admitted against the run's budget first and charged to its ledger
    when its answer ends."""

    def __init__(
        self, socket_path: Path | None, upstream: Upstream, meter: Meter | None = None
    ) -> None:
        # None: a loopback TCP port instead (`url`), for the CLI on the host (sandbox mode none).
        self.socket_path = socket_path
        self.url = ""
        self.target = upstream.target.rstrip("/")
        self.api_key = upstream.api_key
        self.headers = dict(upstream.headers)
        self.meter = meter
        self.requests = 0
        # Answers that say the endpoint failed us, not the agent (429, 5xx, unreachable): all of
        # them, and those since the last answer that came through. A program that retried past a
        # failure and got its answer was not failed by the endpoint (`unrecovered` is 0 again).
        self.failures = 0
        self.unrecovered = 0
        # The run's clock, made where the relay is: it stops while a request is relayed, as for
        # our own model calls, so the CLI's waiting on the provider is never the skill's time.
        self.clock = current_clock()
        self._server: asyncio.AbstractServer | None = None
        self._client: httpx2.AsyncClient | None = None

    async def __aenter__(self) -> Relay:
        if self.socket_path is not None:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(self.socket_path), limit=HEAD_LIMIT
            )
        else:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=HEAD_LIMIT)
            port = self._server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"
        # No read timeout: an answer may stream for minutes; the run's own clock ends it. The
        # daemon's environment applies (its proxy, SSL_CERT_FILE), as for its own model calls.
        self._client = httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=None))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        if self._client is not None:
            await self._client.aclose()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except Exception:  # noqa: BLE001 - whatever the sandbox sent, the relay goes on serving
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Relay one request; whether the connection stays open for the next."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # the client closed between requests
        method, path, headers = _parse_head(head)
        if int(headers.get("content-length") or 0) > MAX_BODY:
            await _refuse(writer, 413, "the request is larger than the sandbox relay forwards")
            return False
        body = await _read_body(reader, headers)
        keep = headers.get("connection", "").lower() != "close"
        refusal = _refusal(method, path, body)
        if refusal:
            await _refuse(writer, 403, refusal)
            return keep
        metered = self._admit(path, body)
        if isinstance(metered, str):
            await _refuse(writer, 400, metered)
            return keep
        sent = {k: v for k, v in headers.items() if k not in _HOP}
        if "x-api-key" in sent:
            sent["x-api-key"] = self.api_key
        if metered is not None:
            # The meter reads the answer's usage from its bytes as they pass: not compressed.
            sent["accept-encoding"] = "identity"
        sent.update(self.headers)
        self.requests += 1
        with ModelCall(self.clock):
            return await self._forward(method, path, sent, body, keep, writer, metered)

    def _admit(self, path: str, body: bytes) -> Metered | str | None:
        """The request admitted by the meter (None: not metered), or why the budget refuses it."""
        if self.meter is None or path.split("?", 1)[0] != METERED_PATH:
            return None
        return self.meter.admit(body)

    async def _forward(
        self,
        method: str,
        path: str,
        sent: dict[str, str],
        body: bytes,
        keep: bool,
        writer: asyncio.StreamWriter,
        metered: Metered | None = None,
    ) -> bool:
        assert self._client is not None
        started, status = time.perf_counter(), 0
        try:
            async with self._client.stream(
                method, self.target + path, headers=sent, content=body
            ) as answer:
                status = answer.status_code
                self._count(status)
                reader = (
                    metered.answered(answer.headers.get("content-type", "")) if metered else None
                )
                bodyless = method == "HEAD" or status in (204, 304)
                writer.write(_answer_head(answer, chunked=not bodyless))
                if not bodyless:
                    async for chunk in answer.aiter_raw():
                        if reader is not None:
                            reader.feed(chunk)
                        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        await writer.drain()
                    writer.write(b"0\r\n\r\n")
        except httpx2.HTTPError as exc:  # unreachable, refused, cut: the endpoint failed us
            self._count(502)
            await _refuse(
                writer,
                502,
                f"the sandbox relay could not reach the model endpoint: {type(exc).__name__}",
            )
            return False
        except Exception as exc:  # noqa: BLE001 - a request the client library will not send
            await _refuse(
                writer, 400, f"the sandbox relay could not send this request: {type(exc).__name__}"
            )
            return False
        finally:
            # A stream cut after its start was billed for what it carried: charged as far as read.
            if metered is not None and self.meter is not None:
                self.meter.settle(metered, status, (time.perf_counter() - started) * 1000)
        await writer.drain()
        return keep

    def _count(self, status: int) -> None:
        if status == 429 or status >= 500:
            self.failures += 1
            self.unrecovered += 1
        elif status < 400:
            self.unrecovered = 0


def _refusal(method: str, path: str, body: bytes) -> str | None:
    """Why a request may not leave the sandbox, or None."""
    if (method, path.split("?", 1)[0]) not in ALLOWED:
        return f"{method} {path.split('?', 1)[0]} is not relayed: only the Messages API is"
    try:
        request = json.loads(body)
    except ValueError:
        return "the request body is not JSON the relay can check"
    if not isinstance(request, dict):
        return "the request body is not a JSON object"
    if request.get("mcp_servers"):
        return "MCP servers are not relayed: they would reach other hosts"
    for tool in request.get("tools") or []:
        kind = str(tool.get("type", "")) if isinstance(tool, dict) else ""
        if kind.startswith(SERVER_TOOLS):
            return f"the server tool {kind!r} is not relayed: it would reach other hosts"
    return None


async def _refuse(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {
        400: "Bad Request",
        403: "Forbidden",
        413: "Payload Too Large",
        502: "Bad Gateway",
    }.get(status, "Error")
    data = json.dumps({"type": "error", "error": {"type": "relay_error", "message": text}}).encode()
    writer.write(
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"\r\n%s" % (status, reason.encode(), len(data), data)
    )
    await writer.drain()


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    if not path.startswith("/"):  # an absolute URL or a CONNECT: a way to another host
        raise ValueError("only origin-form requests are relayed")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return method, path, headers


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts: list[bytes] = []
        total = 0
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            total += size
            if total > MAX_BODY:
                raise ValueError("a chunked body larger than the relay forwards")
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, if any
            pass
        return b"".join(parts)
    return await reader.readexactly(int(headers.get("content-length") or 0))


def _answer_head(answer: httpx2.Response, *, chunked: bool) -> bytes:
    lines = [f"HTTP/1.1 {answer.status_code} {answer.reason_phrase or 'Status'}"]
    lines += [f"{k}: {v}" for k, v in answer.headers.multi_items() if k.lower() not in _HOP]
    if chunked:
        lines.append("transfer-encoding: chunked")
    else:
        lines.append("content-length: 0")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
