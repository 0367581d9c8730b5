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
import tiers

from optimizer.sandbox.relay import PLACEHOLDER_KEY, Relay, Upstream
from optimizer.sim import Simulator, serve

pytestmark = pytest.mark.slow  # the relay's servers on loopback

BODY = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hello"}],
}


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
    return httpx2.AsyncClient(
        transport=httpx2.AsyncHTTPTransport(uds=str(sock)), base_url="http://127.0.0.1:8089"
    )


async def test_requests_go_to_the_target_with_the_real_key(tmp_path: Path, sim) -> None:
    sock = tmp_path / "relay.sock"
    async with (
        Relay(sock, Upstream(sim.url + "/", "real-key", {"x-optimizer-sample": "3"})) as relay,
        through(sock) as client,
    ):
        headers = {"x-api-key": PLACEHOLDER_KEY, "anthropic-version": "2023-06-01"}
        plain = await client.post("/v1/messages", json=BODY, headers=headers)
        streamed = await client.post("/v1/messages", json={**BODY, "stream": True}, headers=headers)
    assert plain.status_code == 200 and plain.json()["type"] == "message"
    assert streamed.status_code == 200 and "event: message_stop" in streamed.text
    assert relay.requests == 2 and [path for path, _ in sim.requests] == ["/v1/messages"] * 2
    for _, seen in sim.requests:
        assert seen["x-api-key"] == "real-key" and seen["x-optimizer-sample"] == "3"
        assert seen["host"] == sim.url.removeprefix("http://")


@tiers.needs("openssl", None if shutil.which("openssl") else "openssl makes the test certificate")
async def test_an_https_target_gets_tls_from_the_relay(tmp_path: Path, sim, monkeypatch) -> None:
    # As with api.anthropic.com: the CLI speaks plain HTTP to the relay, the relay does TLS,
    # checking the target's certificate (here one made for 127.0.0.1, trusted for this test).
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server, port = serve(sim, "127.0.0.1", 0)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    sock = tmp_path / "relay.sock"
    try:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # the usual trust store
        async with (
            Relay(sock, Upstream(f"https://127.0.0.1:{port}", "real-key")),
            through(sock) as client,
        ):
            untrusted = await client.post("/v1/messages", json=BODY)
        reached = list(sim.requests)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        async with (
            Relay(sock, Upstream(f"https://127.0.0.1:{port}", "real-key")),
            through(sock) as client,
        ):
            answer = await client.post("/v1/messages", json=BODY, headers={"x-api-key": "x"})
    finally:
        server.shutdown()
        server.server_close()
    assert untrusted.status_code == 502 and reached == []
    assert answer.status_code == 200 and answer.json()["type"] == "message"
    assert sim.requests[-1][1]["x-api-key"] == "real-key"


async def test_a_way_to_another_host_is_refused(tmp_path: Path, sim) -> None:
    sock = tmp_path / "relay.sock"
    async with Relay(sock, Upstream(sim.url, "real-key")):
        for head in (
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
            b"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
        ):
            reader, writer = await asyncio.open_unix_connection(str(sock))
            writer.write(head)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing sent on
            writer.close()
    assert sim.requests == []


async def test_an_unreachable_target_answers_502_and_counts_as_a_failure_of_ours(
    tmp_path: Path,
) -> None:
    sock = tmp_path / "relay.sock"
    async with (
        Relay(sock, Upstream("http://127.0.0.1:9", "real-key")) as relay,
        through(sock) as client,
    ):
        answer = await client.post("/v1/messages", json=BODY)
    assert answer.status_code == 502 and "could not reach the model endpoint" in answer.text
    assert relay.failures == 1  # the Claude Code executor leaves such a run unscored


async def test_only_the_messages_api_without_server_side_reach_is_relayed(
    tmp_path: Path, sim
) -> None:
    # The key the relay adds could act on the whole account, and server tools or MCP servers
    # would reach other hosts on the sandbox's behalf.
    sock = tmp_path / "relay.sock"
    refused = [
        ("GET", "/v1/models", None),
        ("POST", "/v1/files", BODY),
        ("POST", "/v1/messages/batches", BODY),
        ("DELETE", "/v1/skills/x", None),
        ("POST", "/v1/messages", {**BODY, "mcp_servers": [{"type": "url", "url": "http://x"}]}),
        (
            "POST",
            "/v1/messages",
            {**BODY, "tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]},
        ),
        (
            "POST",
            "/v1/messages",
            {**BODY, "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
        ),
    ]
    key = {"x-api-key": PLACEHOLDER_KEY, "anthropic-version": "2023-06-01"}
    async with Relay(sock, Upstream(sim.url, "real-key")) as relay, through(sock) as client:
        answers = [
            await client.request(method, path, json=body, headers=key)
            for method, path, body in refused
        ]
        allowed = await client.post(
            "/v1/messages?beta=true",
            headers=key,
            json={
                **BODY,
                "tools": [
                    {"name": "Bash", "description": "run", "input_schema": {"type": "object"}}
                ],
            },
        )
        counted = await client.post("/v1/messages/count_tokens", json=BODY, headers=key)
        too_big = await client.post("/v1/messages", content=b"x" * (32 * 1024 * 1024 + 1))
    assert [a.status_code for a in answers] == [403] * len(refused)
    assert all(a.json()["error"]["type"] == "relay_error" for a in answers)
    assert allowed.status_code == 200 and counted.status_code in (200, 404)
    assert too_big.status_code == 413
    assert [path.split("?")[0] for path, _ in sim.requests] == [
        "/v1/messages",
        "/v1/messages/count_tokens",
    ]
    assert relay.failures == 0


def _metered_client(tmp_path: Path, budget: float):
    from optimizer.config import Settings
    from optimizer.model import make_client
    from optimizer.store.db import Store

    store = Store(tmp_path / "state.db")
    settings = Settings.model_validate({"llm": {"provider": "sim"}})
    return make_client(settings, store, budget_usd=budget, simulator=Simulator(seed=0)), store


async def test_with_a_meter_each_answer_is_charged_to_the_ledger_as_the_sim_billed_it(
    tmp_path: Path, sim
) -> None:
    from optimizer.model.relayed import RelayMeter

    client, store = _metered_client(tmp_path, budget=5.0)
    sock = tmp_path / "relay.sock"
    headers = {"x-api-key": PLACEHOLDER_KEY}
    meter = RelayMeter(client, role="executor", sample=3)
    try:
        async with Relay(sock, Upstream(sim.url, "real-key"), meter), through(sock) as http:
            plain = await http.post("/v1/messages", json=BODY, headers=headers)
            streamed = await http.post(
                "/v1/messages", json={**BODY, "stream": True}, headers=headers
            )
            counted = await http.post(
                "/v1/messages/count_tokens", json={**BODY, "max_tokens": None}, headers=headers
            )
        rows = store.query("select * from calls order by rowid")
    finally:
        await client.aclose()
    assert plain.status_code == streamed.status_code == counted.status_code == 200
    # A metered answer is asked for uncompressed: its usage is read from its bytes as they pass.
    assert [h.get("accept-encoding") for path, h in sim.requests if path == "/v1/messages"] == [
        "identity",
        "identity",
    ]
    billed = plain.json()["usage"]
    # Both answers charged (count_tokens is free), each at its own usage as the service gave it.
    assert len(rows) == 2 == meter.calls
    for row in rows:
        assert (row["input_tokens"], row["output_tokens"]) == (
            billed["input_tokens"],
            billed["output_tokens"],
        )
    assert store.spent_usd() == pytest.approx(meter.spent_usd) and meter.spent_usd > 0


async def test_with_a_meter_a_request_past_the_budget_is_never_sent(tmp_path: Path, sim) -> None:
    from optimizer.model.relayed import RelayMeter

    client, store = _metered_client(tmp_path, budget=0.0001)
    sock = tmp_path / "relay.sock"
    meter = RelayMeter(client, role="executor", sample=0)
    try:
        async with (
            Relay(sock, Upstream(sim.url, "real-key"), meter) as relay,
            through(sock) as http,
        ):
            answer = await http.post("/v1/messages", json=BODY)
    finally:
        await client.aclose()
    assert answer.status_code == 400 and "past its budget" in answer.text
    assert sim.requests == [] and relay.requests == 0 and store.spent_usd() == 0
    assert meter.stopped is not None  # the executor raises it once the CLI has ended


async def test_a_failure_the_program_retried_past_is_not_counted_as_unrecovered(
    tmp_path: Path, sim
) -> None:
    sock = tmp_path / "relay.sock"
    key = {"x-api-key": PLACEHOLDER_KEY}
    async with Relay(sock, Upstream(sim.url, "real-key")) as relay, through(sock) as http:
        failed = await http.post(
            "/v1/messages", json=BODY, headers={**key, "x-sim-force-error": "529"}
        )
        assert failed.status_code == 529 and relay.unrecovered == 1
        answered = await http.post("/v1/messages", json=BODY, headers=key)
        assert answered.status_code == 200
    # Counted as a failure of the endpoint, but the program got its answer after it.
    assert relay.failures == 1 and relay.unrecovered == 0


def test_the_upstream_record_never_shows_its_key():
    """A relay's endpoint may be logged or printed: its repr and str leave the real key out."""
    upstream = Upstream("https://api.example", "real-key", {"x-optimizer-sample": "3"})
    assert "real-key" not in repr(upstream) and "real-key" not in str(upstream)
