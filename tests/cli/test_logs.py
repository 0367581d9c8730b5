"""Logging: redaction of key-like values, the JSON-lines run log and the console sink, and a whole
simulated session after which the fake API key is in no file that was written."""

from __future__ import annotations

import json
import logging

import anthropic
import httpx2
import pytest
import structlog
from pydantic import BaseModel

from optimizer import logs
from optimizer.config import Settings
from optimizer.model import ModelCallFailed, ModelClient
from optimizer.store.db import Store

FAKE_KEY = "sk-ant-api03-FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE-0123456789abcdef-AAAA"


@pytest.fixture(autouse=True)
def restore_logging():
    yield
    logs.reset()


def test_redact_masks_key_like_values_anywhere_in_a_string():
    text = f"calling with {FAKE_KEY} and sk-proj-abcdefghijklmnopqrstuvwx, Authorization: Bearer abc.def-123456"
    masked = logs.redact(text)
    assert FAKE_KEY not in masked and "sk-proj-abcdefghijklmnop" not in masked
    assert "abc.def-123456" not in masked and "Bearer [redacted]" in masked
    assert (
        logs.redact("sk-learn is a library; bearer tokens expire")
        == "sk-learn is a library; bearer tokens expire"
    )


def test_redact_masks_credential_fields_but_keeps_token_counts():
    event = {
        "api_key": "hunter2",
        "headers": {"Authorization": "Basic Zm9vOmJhcg==", "x-api-key": "abc", "accept": "json"},
        "input_tokens": 1200,
        "output_tokens": 80,
        "cache_read_tokens": 0,
        "tokens": "12",
        "password": None,
        "secret_things": ["a", "b"],
        "note": f"key={FAKE_KEY}",
        "nested": [{"client_secret": "s3cret"}],
        "by_header": {f"Bearer {FAKE_KEY}": 1},
    }
    out = logs.redact(event)
    assert (
        out["api_key"]
        == out["headers"]["Authorization"]
        == out["headers"]["x-api-key"]
        == "[redacted]"
    )
    assert out["headers"]["accept"] == "json"
    assert (out["input_tokens"], out["output_tokens"], out["cache_read_tokens"]) == (1200, 80, 0)
    assert out["tokens"] == "[redacted]" and out["password"] is None
    assert out["secret_things"] == ["[redacted]", "[redacted]"]
    assert out["note"] == "key=[redacted]" and out["nested"] == [{"client_secret": "[redacted]"}]
    assert out["by_header"] == {"Bearer [redacted]": 1}


def test_configure_writes_redacted_json_lines_to_the_run_log(tmp_path, capsys):
    path = tmp_path / "optimizer.log"
    logs.configure(path, console=False)
    log = structlog.get_logger()
    log.info("iteration.completed", number=3, api_key=FAKE_KEY, input_tokens=50)
    log.debug("llm.call_completed", role="grader")
    logging.getLogger("anthropic.client").warning("retrying with %s", FAKE_KEY)
    try:
        raise RuntimeError(f"boom {FAKE_KEY}")
    except RuntimeError:
        log.exception("loop.failed")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["event"] for line in lines] == [
        "iteration.completed",
        "llm.call_completed",
        f"retrying with {logs.MASK}",
        "loop.failed",
    ]
    assert (
        lines[0]["number"] == 3 and lines[0]["input_tokens"] == 50 and lines[0]["level"] == "info"
    )
    assert lines[0]["api_key"] == logs.MASK and "timestamp" in lines[0]
    assert "RuntimeError: boom [redacted]" in lines[3]["exception"]
    assert FAKE_KEY not in path.read_text()
    assert capsys.readouterr().err == ""


def test_the_console_shows_info_and_up_and_a_second_configure_replaces_the_sinks(tmp_path, capsys):
    logs.configure(tmp_path / "a.log", console=True)
    log = structlog.get_logger()
    log.debug("llm.cache_hit", role="grader")
    log.info("run.started", token=FAKE_KEY)
    err = capsys.readouterr().err
    assert "run.started" in err and "llm.cache_hit" not in err and FAKE_KEY not in err
    logs.configure(tmp_path / "b.log", console=False)
    log.info("run.resumed")
    assert "run.resumed" not in (tmp_path / "a.log").read_text()
    assert "run.resumed" in (tmp_path / "b.log").read_text()
    assert capsys.readouterr().err == ""


def test_a_logger_bound_before_a_configure_writes_to_the_new_sinks(tmp_path):
    # An executor binds its logger once per run; a second configure() closes the first file,
    # and the bound logger's next event must reach the new file, not a closed one.
    logs.configure(tmp_path / "a.log", console=False)
    bound = structlog.get_logger().bind(executor="anthropic")
    bound.info("run.started")
    logs.configure(tmp_path / "b.log", console=False)
    bound.info("run.finished", api_key=FAKE_KEY)
    assert "run.finished" not in (tmp_path / "a.log").read_text()
    line = json.loads((tmp_path / "b.log").read_text().splitlines()[-1])
    assert (
        line["event"] == "run.finished"
        and line["executor"] == "anthropic"
        and line["api_key"] == logs.MASK
    )


def test_a_value_that_cannot_be_rendered_never_fails_the_caller(tmp_path):
    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    logs.configure(tmp_path / "o.log", console=False)
    log = structlog.get_logger()
    log.warning("odd.keys", table={(1, 2): "a"})
    log.warning("odd.value", thing=Broken(), api_key=FAKE_KEY)
    lines = [json.loads(line) for line in (tmp_path / "o.log").read_text().splitlines()]
    assert [line["event"] for line in lines] == ["odd.keys", "odd.value"]
    assert (
        "could not be rendered" in lines[1]["thing"]
        and FAKE_KEY not in (tmp_path / "o.log").read_text()
    )


class Label(BaseModel):
    label: str


async def test_a_simulated_session_leaves_the_key_in_no_file(tmp_path):
    from optimizer.sim import Simulator

    run = tmp_path / "run"
    logs.configure(run / "optimizer.log", console=False)
    sim = Simulator(seed=0)
    inner = sim.transport()
    faults = ["429", None, "malformed", None, None, "529", "529"]
    seen_auth: list[str] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        seen_auth.append(
            request.headers.get("authorization") or request.headers.get("x-api-key") or ""
        )
        if faults and (fault := faults.pop(0)):
            request.headers["x-sim-force-error"] = fault
        return await inner.handle_async_request(request)

    async def no_wait(_seconds: float) -> None:
        return None

    store = Store(run / "state.db")
    settings = Settings.model_validate({"llm": {"provider": "anthropic", "max_attempts": 2}})
    sdk = anthropic.AsyncAnthropic(
        api_key=FAKE_KEY,
        base_url="http://sim.invalid",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    client = ModelClient(settings, store, sdk, sleep=no_wait)
    log = structlog.get_logger()
    log.info("session.started", api_key=FAKE_KEY, note=f"using {FAKE_KEY}")
    user = [{"role": "user", "content": f"Say hello. (my key is {FAKE_KEY[:12]}…)"}]
    await client.message("executor", messages=user)
    await client.structured(
        "grader", system="Label.", messages=user, schema=Label, tool_name="label"
    )
    await client.message("executor", messages=user, sample=1, stream=True)
    with pytest.raises(ModelCallFailed):
        await client.message("executor", messages=user, sample=2)
    await client.aclose()
    store.close()
    logs.reset()

    assert any(FAKE_KEY in auth for auth in seen_auth)  # the key really was in use
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"optimizer.log", "state.db"}
    for path in written:
        assert FAKE_KEY.encode() not in path.read_bytes(), path
    assert "llm.retry_scheduled" in (run / "optimizer.log").read_text()
