"""Batch mode through the real SDK against the simulator's batch endpoints: a stage's judge calls
go as one Message Batch joined back by custom_id, errored items go direct, cost is at the batch
rate, and a resumed client re-attaches to a batch in flight instead of sending it again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import anthropic
import httpx2
import pytest

from optimizer.budget import cost_model
from optimizer.budget import estimate as preview
from optimizer.config import Settings
from optimizer.execute import get_executor
from optimizer.grade.jobs import Side, jobs_for
from optimizer.grade.unit import Grader
from optimizer.inputs import skill as skills
from optimizer.inputs.evals import load_evals
from optimizer.model import batch as batching
from optimizer.model import build_client, make_client
from optimizer.model.prompts import load_prompt
from optimizer.schemas import Comparison
from optimizer.sim import Service, Simulator
from optimizer.store.db import Store
from optimizer.store.files import Workspace

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "fixtures" / "csv-report"
FAST = {"batch_poll_s": 0.01, "batch_poll_max_s": 0.05, "batch_settle_s": 0.05, "batch_hold_s": 5.0}


async def no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


def settings_for(batch: bool, **llm) -> Settings:
    # No structural gate: every run of a stage reaches the grader, whatever the world's draws,
    # so that a stage of two evals and two runs each is four grader calls.
    return Settings.model_validate(
        {
            "llm": {"provider": "sim", "batch": batch, **FAST, **llm},
            "evals": {"structural_gate": False},
        }
    )


async def stage(tmp: Path, settings: Settings, sim: Simulator, store: Store | None = None):
    """One grading stage (v0, evals 1 and 2, two runs each) with its own workspace."""
    ws = Workspace(tmp)
    skills.snapshot(EXAMPLE, ws.skill("v0"))
    store = store or Store(ws.state_db)
    client = make_client(settings, store, simulator=sim, sleep=no_wait)
    evalset = load_evals(EXAMPLE)
    executor = get_executor("anthropic", settings, client=client)
    grader = Grader(
        store, client, settings, evalset, executor, skill_name="csv-report", inputs_root=EXAMPLE
    )
    try:
        results = await grader.grade(
            jobs_for(
                [1, 2], 2, prefix="v0/", root=ws.root, side=Side("with_skill", ws.skill("v0"), "v0")
            ),
            scope="v0",
        )
    finally:
        await client.aclose()
    return results, store


def rows(store: Store, role: str) -> list[dict]:
    return store.query(
        "select * from calls where role = ? and outcome = 'ok' order by hash", [role]
    )


async def test_a_stage_of_judge_calls_is_one_batch_joined_by_custom_id(tmp_path):
    sim = Simulator(seed=0)
    batched, store = await stage(tmp_path / "batch", settings_for(True), sim)
    graders = rows(store, "grader")
    assert sim.batches.stats.created == 1, "the stage's grader calls went as one batch"
    assert sim.batches.stats.requests == len(graders) == 4
    assert all(r["batch_id"] for r in graders) and sim.stats.by_role["grader"] == 4
    assert sim.stats.calls == sim.stats.by_role["executor"], "no grader call went direct"
    (only,) = store.query("select * from batches")
    assert only["status"] == "ended" and only["scope"] == "v0"
    assert sorted(json.loads(only["custom_ids_json"])) == [r["hash"] for r in graders]
    # The service answered in another order than it was asked: the join is by custom_id.
    served = [line["custom_id"] for line in sim.batches._batches[only["id"]].results]
    assert served != json.loads(only["custom_ids_json"])

    direct, plain = await stage(tmp_path / "direct", settings_for(False), Simulator(seed=0))
    assert [r["hash"] for r in rows(plain, "grader")] == [r["hash"] for r in graders]
    for e in (1, 2):  # each run got its own answer back: the same grading as without batches
        assert [(s.status, s.score) for s in batched[e]] == [(s.status, s.score) for s in direct[e]]
    for b, d in zip(graders, rows(plain, "grader"), strict=True):
        assert (
            json.loads(b["response_json"])["content"] == json.loads(d["response_json"])["content"]
        )


async def test_cost_is_recorded_at_the_batch_rate(tmp_path):
    settings = settings_for(True)
    _, store = await stage(tmp_path, settings, Simulator(seed=0))
    price = settings.price(settings.models.grader)
    for row in rows(store, "grader"):
        standard = (
            row["input_tokens"] * price.input
            + row["output_tokens"] * price.output
            + row["cache_write_tokens"] * price.cache_write
            + row["cache_read_tokens"] * price.cache_read
        ) / 1e6
        assert row["cost_usd"] == pytest.approx(standard * batching.BATCH_PRICE_FACTOR)
    assert preview.BATCH_PRICE_FACTOR == batching.BATCH_PRICE_FACTOR
    assert cost_model.BATCH_ROLES == batching.BATCH_ROLES


async def test_errored_and_expired_items_are_sent_directly_at_the_standard_price(tmp_path):
    sim = Simulator(seed=0)
    sim.batches.force("errored", "expired")
    _, store = await stage(tmp_path, settings_for(True), sim)
    graders = rows(store, "grader")
    direct = [r for r in graders if not r["batch_id"]]
    assert len(graders) == 4 and len(direct) == 2 and sim.batches.stats.created == 1
    assert sim.stats.calls - sim.stats.by_role["executor"] == 2, "the two went direct, once each"
    assert sim.batches.stats.outcomes == {"errored": 1, "expired": 1, "succeeded": 2}
    counts = json.loads(store.query("select counts_json from batches")[0]["counts_json"])
    assert counts == {"errored": 1, "expired": 1, "succeeded": 2}
    assert store.query("select count(*) as n from gradings where status = 'ok'")[0]["n"] == 4


def comparator_request(n: int) -> dict:
    text = f"<task>Write report {n}</task>\n<output_a>alpha {n}</output_a>\n<output_b>beta {n}</output_b>"
    return {
        "system": load_prompt("comparator").render(),
        "schema": Comparison,
        "tool_name": "submit_comparison",
        "messages": [{"role": "user", "content": text}],
    }


async def test_calls_without_a_stage_go_as_one_batch_once_they_stop_coming(settings, store):
    sim = Simulator(seed=0)
    client = make_client(settings_for(True), store, simulator=sim, sleep=no_wait)
    answers = await asyncio.gather(
        *(client.structured("comparator", **comparator_request(n)) for n in range(5))
    )
    await client.aclose()
    assert sim.batches.stats.created == 1 and sim.batches.stats.requests == 5
    assert all(a.winner in ("A", "B", "TIE") for a in answers)


async def test_a_resumed_client_reattaches_to_the_batch_in_flight(settings, store):
    """Kill between submission and results: the batch id is in state.db, so the next client
    collects that batch instead of creating a second one."""
    sim = Simulator(seed=0, service=Service(batch_delay_s=0.3))
    first = make_client(settings_for(True), store, simulator=sim, sleep=no_wait)
    asks = [comparator_request(n) for n in range(3)]
    pending = [asyncio.ensure_future(first.structured("comparator", **a)) for a in asks]
    for _ in range(500):  # until the batch is acknowledged and recorded
        if store.query("select id from batches"):
            break
        await asyncio.sleep(0.01)
    (recorded,) = store.query("select * from batches")
    assert recorded["status"] == "in_progress"
    for task in pending:  # the process dies: its callers and its polling go away
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    await first.aclose()
    assert not store.query("select * from calls"), "nothing was answered before the kill"

    second = make_client(settings_for(True), store, simulator=sim, sleep=no_wait)
    answers = await asyncio.gather(*(second.structured("comparator", **a) for a in asks[:2]))
    await second.aclose()
    assert sim.batches.stats.created == 1, "no second batch"
    assert sim.batches.stats.results_fetched == 1 and second.batch.stats["reattached"] == 1
    calls = store.query("select hash, batch_id from calls")
    assert len(calls) == 3 and {c["batch_id"] for c in calls} == {recorded["id"]}
    assert set(json.loads(recorded["custom_ids_json"])) == {c["hash"] for c in calls}
    assert store.query("select status from batches")[0]["status"] == "ended"
    assert len(answers) == 2 and sim.stats.calls == 0, "nothing went direct"

    third = make_client(settings_for(True), store, simulator=sim, sleep=no_wait)
    await third.structured("comparator", **asks[2])  # answered by the batch, never asked for
    await third.aclose()
    assert third.stats()["cache_hits"] == 1 and sim.batches.stats.created == 1


async def test_a_server_without_batches_turns_batch_mode_off(settings, store, log_capture):
    sim = Simulator(seed=0)
    inner = sim.transport()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.startswith("/v1/messages/batches"):
            return httpx2.Response(
                404,
                json={
                    "type": "error",
                    "error": {"type": "not_found_error", "message": "Not found"},
                },
            )
        return await inner.handle_async_request(request)

    sdk = anthropic.AsyncAnthropic(
        api_key="k",
        base_url="http://sim.invalid",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    client = build_client(settings_for(True), store, sdk, simulated=True, sleep=no_wait)
    await asyncio.gather(
        *(client.structured("comparator", **comparator_request(n)) for n in range(2))
    )
    await client.structured("comparator", **comparator_request(9))
    await client.aclose()
    assert sim.stats.by_role["comparator"] == 3 and not client.batch.handles("comparator")
    assert any(e["event"] == "batch.unsupported" for e in log_capture)
    assert all(r["batch_id"] is None for r in store.query("select batch_id from calls"))


def faulty_batches(sim: Simulator, faults: dict[tuple[str, str], list]) -> anthropic.AsyncAnthropic:
    """An SDK client over the simulator whose batch endpoints first answer with `faults`, keyed by
    (method, "create" or "retrieve"): each fault is a status code, or an exception to raise."""
    inner = sim.transport()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path.rstrip("/")
        if path.startswith("/v1/messages/batches") and not path.endswith("/results"):
            kind = "create" if path.endswith("/batches") else "retrieve"
            queued = faults.get((request.method, kind)) or []
            if queued:
                fault = queued.pop(0)
                if isinstance(fault, int):
                    return httpx2.Response(
                        fault,
                        json={
                            "type": "error",
                            "error": {"type": "overloaded_error", "message": "Overloaded"},
                        },
                    )
                raise fault(f"simulated {kind} failure", request=request)
        return await inner.handle_async_request(request)

    return anthropic.AsyncAnthropic(
        api_key="k",
        base_url="http://sim.invalid",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )


async def test_batch_endpoints_are_retried_by_the_clients_one_policy(store, log_capture):
    sim = Simulator(seed=0)
    sdk = faulty_batches(sim, {("POST", "create"): [529], ("GET", "retrieve"): [529]})
    client = build_client(settings_for(True), store, sdk, simulated=True, sleep=no_wait)
    answers = await asyncio.gather(
        *(client.structured("comparator", **comparator_request(n)) for n in range(2))
    )
    await client.aclose()
    assert len(answers) == 2 and sim.batches.stats.created == 1 and sim.stats.calls == 0
    retries = [e for e in log_capture if e["event"] == "llm.retry_scheduled"]
    assert [(e["what"], e["cause"], e["attempt"], e["role"]) for e in retries] == [
        ("batch_create", "overloaded", 1, "comparator"),
        ("batch_poll", "overloaded", 1, "comparator"),
    ]
    assert client.stats()["retries"] == {"overloaded": 2}


async def test_a_batch_create_that_timed_out_is_not_sent_again(store, log_capture):
    """It may have been accepted: a second create could be paid twice. Its items go direct."""
    sim = Simulator(seed=0)
    sdk = faulty_batches(sim, {("POST", "create"): [httpx2.ReadTimeout]})
    client = build_client(settings_for(True), store, sdk, simulated=True, sleep=no_wait)
    await asyncio.gather(
        *(client.structured("comparator", **comparator_request(n)) for n in range(2))
    )
    await client.aclose()
    assert sim.batches.stats.created == 0 and sim.stats.by_role["comparator"] == 2
    assert not [e for e in log_capture if e["event"] == "llm.retry_scheduled"]
    assert any(e["event"] == "batch.create_failed" for e in log_capture)


async def test_the_simulated_batch_endpoints_through_the_sdk():
    sim = Simulator(seed=0, service=Service(batch_delay_s=60))
    sdk = anthropic.AsyncAnthropic(
        api_key="k",
        base_url="http://sim.invalid",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=sim.transport()),
    )
    params = {
        "model": "claude-haiku-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    }
    made = await sdk.messages.batches.create(
        requests=[{"custom_id": "a", "params": params}, {"custom_id": "b", "params": params}]
    )
    assert made.processing_status == "in_progress" and made.request_counts.processing == 2
    with pytest.raises(anthropic.AnthropicError):
        await sdk.messages.batches.results(made.id)  # no results_url before it ends
    canceled = await sdk.messages.batches.cancel(made.id)
    assert canceled.processing_status == "canceling"
    ended = await sdk.messages.batches.retrieve(made.id)
    assert ended.processing_status == "ended" and ended.request_counts.canceled == 2
    lines = [entry async for entry in await sdk.messages.batches.results(made.id)]
    assert sorted(e.custom_id for e in lines) == ["a", "b"] and {e.result.type for e in lines} == {
        "canceled"
    }
    with pytest.raises(anthropic.BadRequestError):
        await sdk.messages.batches.create(requests=[{"custom_id": "x", "params": params}] * 2)
    with pytest.raises(anthropic.NotFoundError):
        await sdk.messages.batches.retrieve("msgbatch_nope")
    quick = Simulator(seed=0)
    sdk2 = anthropic.AsyncAnthropic(
        api_key="k",
        base_url="http://sim.invalid",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=quick.transport()),
    )
    done = await sdk2.messages.batches.create(requests=[{"custom_id": "a", "params": params}])
    (line,) = [e async for e in await sdk2.messages.batches.results(done.id)]
    direct = await sdk2.messages.create(**params)
    assert line.result.type == "succeeded" and line.result.message.content == direct.content
    await sdk.close()
    await sdk2.close()
