"""The model calls a program makes on its own (the Claude Code CLI), as the relay in front of it
sees them: each request admitted against the run's budget before it is sent, and each answer
charged to the ledger when it ends, at our prices. So what the CLI spends is in the one ledger,
stops the night at its ceiling like any other call, and shows in every view by role."""

from __future__ import annotations

import hashlib
import json
import uuid
from types import SimpleNamespace
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from optimizer.errors import BudgetExhausted
from optimizer.model.cost import call_cost
from optimizer.model.port import Client
from optimizer.model.scopes import scope
from optimizer.store.rows import CallRow

# A relayed call is paid once and never replayed (the CLI's requests carry its own session ids):
# its ledger key is unique, and marked so that no replay or cache lookup ever takes it for one.
RELAYED_PREFIX = "relayed:"
KEPT_ANSWER = 4 * 1024 * 1024  # a JSON answer read for its usage; an SSE stream is read by line
DEFAULT_MAX_TOKENS = 4096  # a request without a valid one is the service's to refuse
USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


Parsed = TypeVar("Parsed", bound="_Wire")


class _Wire(BaseModel):
    """What the meter reads of the JSON on the wire; everything else is ignored, and a value of
    the wrong type reads as absent (a program's request is the service's to refuse, not ours)."""

    model_config = ConfigDict(extra="ignore")


class WireRequest(_Wire):
    model: str = ""
    max_tokens: int | None = None


class _Usage(_Wire):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class _Delta(_Wire):
    stop_reason: str | None = None


class _Answer(_Wire):
    """A JSON answer, or an SSE event's data (message_start carries the answer as `message`)."""

    type: str = ""
    usage: _Usage | None = None
    stop_reason: str | None = None
    message: _Answer | None = None
    delta: _Delta | None = None


def read_request(body: bytes) -> WireRequest:
    return _parsed(WireRequest, body)


class UsageReader:
    """The usage of one answer, read from its bytes as they pass: a JSON body, or an SSE stream
    (message_start's usage, then message_delta's, which carry the final output tokens)."""

    def __init__(self, content_type: str) -> None:
        self.streamed = "event-stream" in content_type.lower()
        self.usage: dict[str, int] = {}
        self.stop_reason: str | None = None
        self._pending = b""
        self._body = bytearray()

    def feed(self, chunk: bytes) -> None:
        if not self.streamed:
            self._body += chunk[: max(0, KEPT_ANSWER - len(self._body))]
            return
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line)

    def finish(self) -> dict[str, int] | None:
        """The answer's usage, or None when it carried none (an error, a cut stream)."""
        if self.streamed:
            self._line(self._pending)
        else:
            answer = _parsed(_Answer, bytes(self._body))
            self._take(answer.usage, answer.stop_reason)
        return self.usage or None

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        event = _parsed(_Answer, line[5:])
        if event.type == "message_start" and event.message is not None:
            self._take(event.message.usage, None)
        elif event.type == "message_delta":
            self._take(event.usage, event.delta.stop_reason if event.delta else None)

    def _take(self, usage: _Usage | None, stop_reason: str | None) -> None:
        # message_delta's counts are cumulative: the latest value of each field is the answer's.
        for name, count in (usage.model_dump(exclude_none=True) if usage else {}).items():
            self.usage[name] = count
        self.stop_reason = stop_reason or self.stop_reason


class Metered:
    """One relayed request: admitted (its estimate held in the budget) and then settled."""

    def __init__(self, model: str, estimate: float) -> None:
        self.model = model
        self.estimate = estimate
        self.reader = UsageReader("")

    def answered(self, content_type: str) -> UsageReader:
        """The reader of the answer, once its head says how it comes."""
        self.reader = UsageReader(content_type)
        return self.reader


class RelayMeter:
    """Admits and charges one program run's model calls through `client` under one role and
    sample; the scope is the run's, taken where the meter is made (the relay serves its
    connections in tasks of its own). A refusal for the budget is kept to be raised by the
    executor once the program has ended: the night stops, the run stays unscored."""

    def __init__(self, client: Client, *, role: str, sample: int) -> None:
        self.client = client
        self.role = role
        self.sample = sample
        self.scope = scope.get()
        self.spent_usd = 0.0
        self.calls = 0
        self.stopped: BudgetExhausted | None = None

    def admit(self, body: bytes) -> Metered | str:
        """The admitted request, or why it may not be sent (the budget would pass its ceiling)."""
        request = read_request(body)
        model, most = request.model, request.max_tokens
        most = most if most is not None and most > 0 else DEFAULT_MAX_TOKENS
        estimate = self.client.estimate(self.role, model, len(body), most)
        try:
            self.client.hold(self.role, model, estimate)
        except BudgetExhausted as exc:
            self.stopped = self.stopped or exc
            return str(exc)
        return Metered(model, estimate)

    def settle(self, metered: Metered, status: int, latency_ms: float) -> float:
        """Charge what the answer's usage says (nothing for an answer without one) and release
        the hold; the cost."""
        usage = metered.reader.finish() if status == 200 else None
        cost = 0.0
        row: CallRow | None = None
        if usage is not None:
            priced = SimpleNamespace(**{name: usage.get(name, 0) for name in USAGE_FIELDS})
            cost = call_cost(self.client.price(metered.model), priced)
            row = self._row(metered, usage, cost, latency_ms)
            self.spent_usd += cost
            self.calls += 1
        self.client.release(metered.estimate, row)
        return cost

    def check(self) -> None:
        """Raise the budget stop a request of this run met, if any."""
        if self.stopped is not None:
            raise self.stopped

    def _row(
        self, metered: Metered, usage: dict[str, int], cost: float, latency_ms: float
    ) -> CallRow:
        nonce = uuid.uuid4().hex  # an id, never read to decide anything
        key = hashlib.sha256(f"{self.role}\0{self.sample}\0{nonce}".encode()).hexdigest()
        answer = {"relayed": True, "stop_reason": metered.reader.stop_reason, "usage": usage}
        return {
            "hash": RELAYED_PREFIX + key,
            "role": self.role,
            "model": metered.model,
            "sample": self.sample,
            "outcome": "ok",
            "response_json": json.dumps(answer, sort_keys=True),
            "input_tokens": usage.get("input_tokens", 0),
            "output_tokens": usage.get("output_tokens", 0),
            "cache_write_tokens": usage.get("cache_creation_input_tokens", 0),
            "cache_read_tokens": usage.get("cache_read_input_tokens", 0),
            "cost_usd": cost,
            "latency_ms": latency_ms,
            "attempts": 1,
            "error": None,
            "scope": self.scope,
        }


def _parsed(kind: type[Parsed], raw: bytes) -> Parsed:
    """`raw` read as `kind`; anything that is not such JSON reads as an empty one."""
    try:
        return kind.model_validate_json(raw)
    except ValidationError:
        return kind()
