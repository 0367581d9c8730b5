"""The simulated Messages API service: routing, auth, faults, prompt-cache accounting, stats and
the httpx2 MockTransport. Never lets latency or a fault change the content of a successful reply."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import random
import re
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx2

from optimizer import catalog
from optimizer.sim import drafter, models
from optimizer.sim import world as sim_world
from optimizer.sim.batches import BatchService
from optimizer.sim.billing import input_usage
from optimizer.sim.ceiling import Ceiling
from optimizer.sim.ceiling import ceiling as latent_ceiling
from optimizer.sim.latent import World
from optimizer.sim.protocol import (
    ERRORS,
    FAULT_KINDS,
    Reply,
    cap,
    error_reply,
    invalid,
    json_reply,
    malform,
    sse_events,
    tokens,
)
from optimizer.sim.text import REMINDER, canonical
from optimizer.sim.world import Knobs

if TYPE_CHECKING:
    from optimizer.config import Sim as SimSettings


@dataclass
class SimStats:
    calls: int = 0
    faults_injected: Counter = field(default_factory=Counter)
    in_flight: int = 0
    max_in_flight: int = 0
    by_role: Counter = field(default_factory=Counter)


@dataclass(frozen=True)
class Service:
    """How the simulated service delivers a reply, never what the reply says: its delay, its
    faults, an outage and how long a message batch takes."""

    latency_ms: float = 0.0  # every request waits this long before it is answered
    fault_rate: float = 0.0  # share of attempts that fail (429, 529, 500, timeout, ...)
    fail_role: str = ""  # with fail_match: this role's calls naming it fail every attempt
    fail_match: str = ""
    batch_delay_s: float = 0.0  # how long a message batch stays in progress


class Simulator:
    """A deterministic stand-in for the Messages API: the same seed, role, sample index and
    request always give the same reply, whatever the latency, faults or concurrency.
    `Simulator()` is the default world; `Simulator(seed=3, knobs=Knobs(judge_noise=0.0),
    service=Service(latency_ms=20))` changes some knobs; `Simulator.from_settings(settings.sim)`
    is the world the `sim.*` settings describe."""

    def __init__(
        self,
        *,
        seed: int = 0,
        knobs: Knobs = Knobs(),
        service: Service = Service(),
        today: dt.date | None = None,
        local: bool = False,
    ) -> None:
        self.seed = seed
        self.knobs = knobs  # what the world answers: the judges, the proposer, the hidden habits
        self.service = service
        # The day that decides which models are retired (the machine's, unless a test fixes it).
        self.today = today
        # A server of the user's own (llm.base_url: llama.cpp, Ollama, vLLM), which names its
        # models as it likes: no model name is refused. Otherwise the Claude API's rules hold.
        self.local = local
        self.stats = SimStats()
        self.lock = threading.Lock()
        self._attempts: Counter = Counter()
        self.batches = BatchService(self, delay_s=service.batch_delay_s)  # /v1/messages/batches*

    @classmethod
    def from_settings(cls, sim: SimSettings) -> Simulator:
        """The simulator the `sim.*` settings describe (config/sections.py), as the CLI builds it."""
        hidden = World(
            world=sim.world,
            habits=sim.habits,
            infeasible=sim.infeasible,
            position_cost=sim.position_cost,
            length_cost=sim.length_cost,
            focus_cost=sim.focus_cost,
        )
        knobs = Knobs(
            judge_noise=sim.judge_noise,
            position_bias=sim.position_bias,
            proposal_quality=sim.proposal_quality,
            overfit_rate=sim.overfit_rate,
            harmful_rate=sim.harmful_rate,
            world=hidden,
        )
        service = Service(
            latency_ms=sim.latency_ms,
            fault_rate=sim.fault_rate,
            fail_role=sim.fail_role,
            fail_match=sim.fail_match,
            batch_delay_s=sim.batch_delay_s,
        )
        return cls(seed=sim.seed, knobs=knobs, service=service)

    def ceiling(self, evals: Iterable[tuple[str, Sequence[str]]]) -> Ceiling:
        """The best possible skill's expected judged pass rate in this simulator's world
        (`sim/ceiling.py`): the limit a bench measures a search's captured headroom against."""
        return latent_ceiling(evals, self.knobs.world)

    # --- content -------------------------------------------------------------------------------

    def _key(self, body: dict, role: str, sample: int, *, whole: bool = False) -> str:
        # The simulated world has one model: which one is named, and how its answer is asked
        # for (a forced tool or a told one, thinking on or off), never changes what it answers.
        shown = {k: v for k, v in body.items() if k not in _NOT_CONTENT}
        if role in sim_world.TOOL_OF_ROLE and not whole:
            # Single-shot roles answer their prompt: a re-ask after a validation error (extra
            # turns appended) gets the answer a fault-free call got, so faults leave no trace.
            shown["messages"] = body["messages"][:1]
        # Harness reminders carry the date: a key with them would change every night. The Claude
        # Code CLI names its (host) working folder: the same run answers alike wherever it is.
        # Prompt caching changes the bill, never the answer: its breakpoints are not content.
        request = canonical(_uncached(shown))
        text = REMINDER.sub("", request)
        if (cwd := _CLI_CWD.search(request)) is not None:
            folder = cwd.group(1)
            text = text.replace(folder, "<cwd>").replace(
                re.sub(r"[^A-Za-z0-9]", "-", folder), "<cwd>"
            )
        text = _CLI_HOME.sub("<home>", text)
        return hashlib.sha256(f"{self.seed}\0{role}\0{sample}\0{text}".encode()).hexdigest()

    def respond(self, body: dict, headers: Mapping[str, str]) -> dict:
        """The reply to a valid request as a Messages API response dict, without any fault."""
        headers = {k.lower(): v for k, v in headers.items()}
        role = sim_world.detect_role(body, headers)
        key = self._key(body, role, _sample(headers))
        content, stop = (
            drafter.reply(body, key)
            if drafter.handles(body)  # `evals mine --provider`
            else sim_world.reply(body, role, random.Random(int(key, 16)), key, self.knobs)
        )
        content, stop = cap(content, stop, int(body.get("max_tokens") or 4096))
        return {
            "id": f"msg_sim_{key[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "sim"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": self._usage(body, content),
        }

    def _usage(self, body: dict, content: list[dict]) -> dict:
        # Prompt caching as the service bills it (sim/billing.py), at the model's minimum.
        minimum = catalog.facts(str(body.get("model", ""))).cache_minimum_tokens
        return {
            **input_usage(body, self.seed, minimum),
            "output_tokens": tokens(len(canonical(content))),
        }

    # --- the service ---------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: Mapping[str, str], raw: bytes) -> Reply:
        """One HTTP request, minus latency: the routing, auth, validation, faults and reply."""
        headers = {k.lower(): v for k, v in headers.items()}
        path = target.split("?", 1)[0].rstrip("/") or "/"
        if method in ("GET", "HEAD") and path == "/":
            return json_reply(200, {})
        if path.startswith("/v1/messages/batches"):
            if not (headers.get("x-api-key") or headers.get("authorization")):
                return error_reply(401, "authentication_error", "x-api-key header is required")
            return self.batches.handle(method, path, headers, raw)
        if method == "GET" and (path == "/v1/models" or path.startswith("/v1/models/")):
            if not (headers.get("x-api-key") or headers.get("authorization")):
                return error_reply(401, "authentication_error", "x-api-key header is required")
            return models.models_endpoint(path, self.today)
        if method != "POST" or path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return error_reply(404, "not_found_error", f"Not found: {method} {path}")
        if not (headers.get("x-api-key") or headers.get("authorization")):
            return error_reply(401, "authentication_error", "x-api-key header is required")
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return error_reply(400, "invalid_request_error", "The request body is not valid JSON.")
        counting = path.endswith("count_tokens")
        problem = invalid(body, ("model", "messages") if counting else None)
        if problem:
            return error_reply(400, "invalid_request_error", problem)
        refused = models.refusal(body, len(raw), self.today, counting=counting, local=self.local)
        if refused is not None:
            return refused
        if counting:
            return json_reply(200, {"input_tokens": tokens(len(canonical(body)))})
        return self._messages(body, headers)

    def _messages(self, body: dict, headers: dict[str, str]) -> Reply:
        role = sim_world.detect_role(body, headers)
        streaming = bool(body.get("stream"))
        forced = headers.get("x-sim-force-error", "").strip()
        if forced and forced not in ERRORS and forced not in FAULT_KINDS:
            return error_reply(
                400, "invalid_request_error", f"x-sim-force-error: unknown fault {forced!r}"
            )
        fault = (
            forced or self._outage(body, role) or self.draw_fault(body, role, headers, streaming)
        )
        with self.lock:
            self.stats.calls += 1
            self.stats.by_role[role] += 1
            if fault:
                self.stats.faults_injected[fault] += 1
        request_id = {
            "request-id": f"req_sim_{self._key(body, role, _sample(headers), whole=True)[:24]}"
        }
        if fault in ERRORS:
            status, kind, text = ERRORS[fault]
            extra = {"retry-after": "0"} if fault == "429" else {}
            return error_reply(status, kind, text, **request_id, **extra)
        if fault == "timeout" or (fault == "truncate" and not streaming):
            return Reply(0, {}, drop="timeout" if fault == "timeout" else "disconnect")
        message = self.respond(body, headers)
        if fault == "malformed":
            message = malform(message, body)
        if not streaming:
            return json_reply(200, message, **request_id)
        events = sse_events(message)
        if fault == "truncate":
            events = events[:4]  # message_start, ping, the first block's start and first delta
        return Reply(
            200,
            {"content-type": "text/event-stream", "cache-control": "no-cache", **request_id},
            events=events,
        )

    def _outage(self, body: dict, role: str) -> str | None:
        """sim.fail_role + sim.fail_match: those calls fail on every attempt, as in an outage."""
        fail_role, fail_match = self.service.fail_role, self.service.fail_match
        if fail_role and role == fail_role and fail_match in canonical(body):
            return "529"
        return None

    def draw_fault(
        self, body: dict, role: str, headers: dict[str, str], streaming: bool
    ) -> str | None:
        # Drawn per attempt: a retry of the same request gets a fresh draw, in a fixed sequence.
        if self.service.fault_rate <= 0:
            return None
        key = self._key(body, role, _sample(headers), whole=True)
        with self.lock:
            attempt = self._attempts[key]
            self._attempts[key] += 1
        rng = random.Random(
            int(hashlib.sha256(f"{key}\0fault\0{attempt}".encode()).hexdigest(), 16)
        )
        if rng.random() >= self.service.fault_rate:
            return None
        kinds = ["429", "529", "500", "timeout"]
        # Malformed input only on a first ask: the client repairs once (docs/design.md §7), and a drawn
        # second malformed answer would turn a transport fault into a judge error.
        first_ask = len(body.get("messages") or []) == 1
        kinds += ["malformed"] if role in sim_world.TOOL_OF_ROLE and first_ask else []
        kinds += ["truncate"] if streaming else []
        return rng.choice(kinds)

    # --- in-process transport ------------------------------------------------------------------

    def enter(self) -> None:
        with self.lock:
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)

    def leave(self) -> None:
        with self.lock:
            self.stats.in_flight -= 1

    def transport(self) -> httpx2.MockTransport:
        """An httpx2 transport for `httpx2.AsyncClient(transport=...)` under the real SDK."""

        async def handler(request: httpx2.Request) -> httpx2.Response:
            self.enter()
            try:
                if self.service.latency_ms > 0:
                    await asyncio.sleep(self.service.latency_ms / 1000)
                reply = self.handle(
                    request.method, request.url.raw_path.decode(), request.headers, request.content
                )
            finally:
                self.leave()
            if reply.drop == "timeout":
                raise httpx2.ReadTimeout("simulated timeout", request=request)
            if reply.drop:
                raise httpx2.RemoteProtocolError(
                    "peer closed connection without sending complete message body", request=request
                )
            if reply.events is not None:
                return httpx2.Response(
                    reply.status,
                    headers=reply.headers,
                    content=_stream(reply.events),
                    request=request,
                )
            return httpx2.Response(
                reply.status, headers=reply.headers, content=reply.body, request=request
            )

        return httpx2.MockTransport(handler)


_NOT_CONTENT = ("stream", "metadata", "model", "tool_choice", "thinking")
_CLI_CWD = re.compile(r"[Ww]orking directory:\s*(/[^\s\\\"]+)")
_CLI_HOME = re.compile(r"/[^\s\"'`]*?claude-home-[A-Za-z0-9_]+")  # the executor's private HOME


async def _stream(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event


def _uncached(value: object) -> object:
    """A request as the model reads it: without cache breakpoints, and a message whose content is
    one plain text block read as that text (a breakpoint on a string turns it into such a block)."""
    if isinstance(value, list):
        return [_uncached(item) for item in value]
    if not isinstance(value, dict):
        return value
    plain = {k: _uncached(v) for k, v in value.items() if k != "cache_control"}
    content = plain.get("content")
    if "role" in plain and isinstance(content, list) and len(content) == 1:
        only = content[0]
        if isinstance(only, dict) and set(only) == {"type", "text"} and only["type"] == "text":
            plain["content"] = only["text"]
    return plain


def _sample(headers: Mapping[str, str]) -> int:
    try:
        return int(headers.get("x-optimizer-sample", 0))
    except (TypeError, ValueError):
        return 0
