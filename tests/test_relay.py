"""The sandbox's relay to the model, on its own: it forwards to its target only, with the real
key in place of the placeholder, and streams the answer back. The simulator on loopback is the
target; nothing reaches the network."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path

import httpx2
import pytest

from optimizer.sandbox.relay import PLACEHOLDER_KEY, Relay
from optimizer.sim import Simulator, serve

BODY = {"model": "claude-sonnet-4-6", "max_tokens": 64,
        "messages": [{"role": "user", "content": "hello"}]}


class Seen(Simulator):
    def __init__(self) -> None:
        super().__init__(seed=0)
        self.requests: list[tuple[str, dict]] = []

    def handle(self, method, path, headers, raw):  # type: ignore[no-untyped-def]
        self.requests.append((path, {k.lower(): v for k, v in headers.items()}))
        return super().handle(method, path, headers, raw)


@pytest.fixture
def sim():
    sim = Seen()
    server, port = serve(sim, "127.0.0.1", 0)
    sim.url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    yield sim
    server.shutdown()
    server.server_close()


def through(sock: Path) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(uds=str(sock)),
                              base_url="http://127.0.0.1:8089")


async def test_requests_go_to_the_target_with_the_real_key(tmp_path: Path, sim) -> None:
    sock = tmp_path / "relay.sock"
    async with Relay(sock, sim.url + "/", "real-key", {"x-optimizer-sample": "3"}) as relay, \
            through(sock) as client:
        headers = {"x-api-key": PLACEHOLDER_KEY, "anthropic-version": "2023-06-01"}
        plain = await client.post("/v1/messages", json=BODY, headers=headers)
        streamed = await client.post("/v1/messages", json={**BODY, "stream": True},
                                     headers=headers)
    assert plain.status_code == 200 and plain.json()["type"] == "message"
    assert streamed.status_code == 200 and "event: message_stop" in streamed.text
    assert relay.requests == 2 and [path for path, _ in sim.requests] == ["/v1/messages"] * 2
    for _, seen in sim.requests:
        assert seen["x-api-key"] == "real-key" and seen["x-optimizer-sample"] == "3"
        assert seen["host"] == sim.url.removeprefix("http://")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test certificate")
async def test_an_https_target_gets_tls_from_the_relay(tmp_path: Path, sim, monkeypatch) -> None:
    # As with api.anthropic.com: the CLI speaks plain HTTP to the relay, the relay does TLS,
    # checking the target's certificate (here one made for 127.0.0.1, trusted for this test).
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server, port = serve(sim, "127.0.0.1", 0)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    sock = tmp_path / "relay.sock"
    try:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # the usual trust store
        async with Relay(sock, f"https://127.0.0.1:{port}", "real-key"), through(sock) as client:
            untrusted = await client.post("/v1/messages", json=BODY)
        reached = list(sim.requests)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        async with Relay(sock, f"https://127.0.0.1:{port}", "real-key"), through(sock) as client:
            answer = await client.post("/v1/messages", json=BODY, headers={"x-api-key": "x"})
    finally:
        server.shutdown()
        server.server_close()
    assert untrusted.status_code == 502 and reached == []
    assert answer.status_code == 200 and answer.json()["type"] == "message"
    assert sim.requests[-1][1]["x-api-key"] == "real-key"


async def test_a_way_to_another_host_is_refused(tmp_path: Path, sim) -> None:
    sock = tmp_path / "relay.sock"
    async with Relay(sock, sim.url, "real-key"):
        for head in (b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
                     b"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n"):
            reader, writer = await asyncio.open_unix_connection(str(sock))
            writer.write(head)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing sent on
            writer.close()
    assert sim.requests == []


async def test_an_unreachable_target_answers_502(tmp_path: Path) -> None:
    sock = tmp_path / "relay.sock"
    async with Relay(sock, "http://127.0.0.1:9", "real-key"), through(sock) as client:
        answer = await client.post("/v1/messages", json=BODY)
    assert answer.status_code == 502 and "could not reach the model endpoint" in answer.text
