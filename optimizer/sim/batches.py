"""The Message Batches endpoints of the simulated Messages API: create, retrieve, list, results as
JSONL and cancel, with a processing delay. Every item is answered exactly as the same request
sent alone would be (same seed, role and sample), so batch mode never changes what a run says."""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

from optimizer.sim import models, world
from optimizer.sim.protocol import ERRORS, Reply, error_reply, invalid, json_reply, malform


class Host(Protocol):
    """What the batch half needs of its Simulator (transport.py), named here so that the two
    modules do not import each other."""

    seed: int
    lock: threading.Lock
    stats: Any
    today: date | None
    local: bool

    def draw_fault(
        self, body: dict, role: str, headers: dict[str, str], streaming: bool
    ) -> str | None: ...

    def respond(self, body: dict, headers: Mapping[str, str]) -> dict: ...


PREFIX = "/v1/messages/batches"
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# The header our client adds to a batch it sends to the simulator: {custom_id[:16]: sample} for
# every item whose sample index is not 0 (a batch has no per-request headers of its own).
SAMPLES_HEADER = "x-optimizer-samples"
OUTCOMES = ("succeeded", "errored", "canceled", "expired")


@dataclass
class BatchStats:
    created: int = 0
    requests: int = 0
    retrieved: int = 0
    results_fetched: int = 0
    canceled: int = 0
    outcomes: Counter = field(default_factory=Counter)


@dataclass
class _Batch:
    id: str
    requests: list[dict]
    samples: dict[str, int]
    created: float  # wall clock, for the timestamps shown
    ready_at: float  # monotonic
    cancel_at: float | None = None
    results: list[dict] | None = None  # one line per request, in the (shuffled) order served


class BatchService:
    """The batch half of one Simulator. `force(...)` queues outcomes for the next items processed
    (tests use it to make one item `errored` or `expired`); otherwise the simulator's fault_rate
    decides, per item, as it does per direct call."""

    def __init__(self, sim: Host, *, delay_s: float = 0.0, shuffle: bool = True) -> None:
        self.sim = sim
        self.delay_s = delay_s
        self.shuffle = shuffle
        self.stats = BatchStats()
        self._batches: dict[str, _Batch] = {}
        self._forced: deque[str] = deque()
        self._lock = threading.Lock()

    def force(self, *outcomes: str) -> None:
        for outcome in outcomes:
            if outcome not in OUTCOMES:
                raise ValueError(f"unknown batch outcome {outcome!r}; use one of {OUTCOMES}")
            self._forced.append(outcome)

    # --- routing -------------------------------------------------------------------------------

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        rest = path[len(PREFIX) :].strip("/")
        parts = rest.split("/") if rest else []
        if method == "POST" and not parts:
            return self._create(headers, raw)
        if method == "GET" and not parts:
            with self._lock:
                data = [self._view(b) for b in reversed(self._batches.values())]
            return json_reply(
                200,
                {
                    "data": data,
                    "has_more": False,
                    "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None,
                },
            )
        batch = self._batches.get(parts[0]) if parts else None
        if batch is None:
            return error_reply(
                404, "not_found_error", f"No message batch {parts[0] if parts else ''!r}."
            )
        if method == "GET" and len(parts) == 1:
            with self._lock:
                self.stats.retrieved += 1
                self._settle(batch)
                return json_reply(200, self._view(batch))
        if method == "GET" and parts[1:] == ["results"]:
            with self._lock:
                self._settle(batch)
                if batch.results is None:
                    return error_reply(
                        400,
                        "invalid_request_error",
                        f"Message batch {batch.id} is still in progress; results "
                        "are available once processing_status is 'ended'.",
                    )
                self.stats.results_fetched += 1
                body = "".join(json.dumps(line) + "\n" for line in batch.results).encode()
            return Reply(200, {"content-type": "application/binary"}, body)
        if method == "POST" and parts[1:] == ["cancel"]:
            with self._lock:
                if batch.results is None and batch.cancel_at is None:
                    batch.cancel_at = time.monotonic()
                    self.stats.canceled += 1
                return json_reply(200, self._view(batch))
        return error_reply(404, "not_found_error", f"Not found: {method} {path}")

    # --- the endpoints -------------------------------------------------------------------------

    def _create(self, headers: dict[str, str], raw: bytes) -> Reply:
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return error_reply(400, "invalid_request_error", "The request body is not valid JSON.")
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return error_reply(
                400, "invalid_request_error", "requests: at least one request is required"
            )
        seen: set[str] = set()
        for i, item in enumerate(requests):
            custom_id = item.get("custom_id") if isinstance(item, dict) else None
            if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
                return error_reply(
                    400,
                    "invalid_request_error",
                    f"requests.{i}.custom_id: 1 to 64 letters, digits, '-' or '_'",
                )
            if custom_id in seen:
                return error_reply(
                    400,
                    "invalid_request_error",
                    f"requests.{i}.custom_id: {custom_id!r} is not unique in the batch",
                )
            seen.add(custom_id)
            if not isinstance(item.get("params"), dict):
                return error_reply(
                    400, "invalid_request_error", f"requests.{i}.params: Field required"
                )
            if item["params"].get("stream"):
                return error_reply(
                    400,
                    "invalid_request_error",
                    f"requests.{i}.params.stream: streaming is not supported in batches",
                )
        try:
            samples = {
                str(k): int(v) for k, v in json.loads(headers.get(SAMPLES_HEADER) or "{}").items()
            }
        except (ValueError, TypeError, AttributeError):
            return error_reply(
                400, "invalid_request_error", f"{SAMPLES_HEADER}: not a JSON object of integers"
            )
        with self._lock:
            self.stats.created += 1
            self.stats.requests += len(requests)
            number = self.stats.created
            key = f"{self.sim.seed}\0{number}\0" + "\0".join(sorted(seen))
            digest = hashlib.sha256(key.encode()).hexdigest()
            batch = _Batch(
                f"msgbatch_sim{number:04d}{digest[:16]}",
                requests,
                samples,
                time.time(),
                time.monotonic() + self.delay_s,
            )
            self._batches[batch.id] = batch
            return json_reply(200, self._view(batch))

    def _settle(self, batch: _Batch) -> None:
        """Process the batch once its delay has passed (or it was canceled), under the lock."""
        if batch.results is not None:
            return
        canceled = batch.cancel_at is not None
        if not canceled and time.monotonic() < batch.ready_at:
            return
        lines = []
        for item in batch.requests:
            outcome = "canceled" if canceled else (self._forced.popleft() if self._forced else None)
            lines.append(
                {
                    "custom_id": item["custom_id"],
                    "result": self._answer(item, batch.samples, outcome),
                }
            )
            self.stats.outcomes[lines[-1]["result"]["type"]] += 1
        if self.shuffle:  # the service promises no order: neither does the simulator
            asked = [line["custom_id"] for line in lines]
            random.Random(batch.id).shuffle(lines)
            if len(lines) > 1 and [line["custom_id"] for line in lines] == asked:
                # A shuffle may draw the order asked; a caller's join by custom_id must still be
                # exercised, whatever the requests were.
                lines = lines[1:] + lines[:1]
        batch.results = lines

    def _answer(self, item: dict, samples: dict[str, int], outcome: str | None) -> dict[str, Any]:
        if outcome in ("canceled", "expired"):
            return {"type": outcome}
        if outcome == "errored":
            return _errored("api_error", "Internal server error (simulated, forced)")
        params = item["params"]
        problem = invalid(params)
        if problem:
            return _errored("invalid_request_error", problem)
        refused = models.refusal(params, 0, self.sim.today, local=self.sim.local)
        if refused is not None:
            error = json.loads(refused.body)["error"]
            return _errored(error["type"], error["message"])
        sample = samples.get(item["custom_id"][:16], 0)
        headers = {"x-optimizer-sample": str(sample)}
        role = world.detect_role(params, headers)
        fault = self.sim.draw_fault(params, role, headers, False)
        with self.sim.lock:
            self.sim.stats.by_role[role] += 1
            if fault:
                self.sim.stats.faults_injected[fault] += 1
        if fault in ERRORS:
            _, kind, text = ERRORS[fault]
            return _errored(kind, text)
        if fault == "timeout":
            return _errored("api_error", "The request timed out while processing (simulated).")
        message = self.sim.respond(params, headers)
        if fault == "malformed":
            message = malform(message, params)
        return {"type": "succeeded", "message": message}

    def _view(self, batch: _Batch) -> dict[str, Any]:
        created = datetime.fromtimestamp(batch.created, UTC)
        counts = dict.fromkeys(("processing", *OUTCOMES), 0)
        ended = None
        if batch.results is None:
            counts["processing"] = len(batch.requests)
            status = "canceling" if batch.cancel_at is not None else "in_progress"
        else:
            for line in batch.results:
                counts[line["result"]["type"]] += 1
            status = "ended"
            ended = _iso(created + timedelta(seconds=max(0.0, self.delay_s)))
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "created_at": _iso(created),
            "expires_at": _iso(created + timedelta(hours=24)),
            "ended_at": ended,
            "archived_at": None,
            "cancel_initiated_at": _iso(created) if batch.cancel_at is not None else None,
            "results_url": f"{PREFIX}/{batch.id}/results" if batch.results is not None else None,
        }


def _errored(kind: str, message: str) -> dict[str, Any]:
    return {
        "type": "errored",
        "error": {"type": "error", "error": {"type": kind, "message": message}},
    }


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
