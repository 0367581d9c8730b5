"""What the simulated service refuses about a request's model, as the API does (optimizer/catalog.py
holds the facts): a name it does not serve or has retired (404), a max_tokens past the model's
output ceiling, a forced tool to a model that does not take one (400), a body past the request
size limit (413); and its Models endpoint (`GET /v1/models`, `GET /v1/models/{id}`)."""

from __future__ import annotations

import datetime as dt

from optimizer import catalog
from optimizer.sim.protocol import Reply, error_reply, json_reply

MAX_REQUEST_BYTES = 32 * 1024 * 1024  # the Messages API's request size limit
# When the simulated catalog's models were released: the Models endpoint's created_at (a fixed
# date: the simulator's answers never change with the day it runs).
CREATED_AT = "2026-01-01T00:00:00Z"


def refusal(
    body: dict, raw_size: int, today: dt.date | None, *, counting: bool = False, local: bool = False
) -> Reply | None:
    """The error the API answers this Messages (or token counting) request with, or None. A
    `local` server refuses only a body past the size limit: its models are its own."""
    if raw_size > MAX_REQUEST_BYTES:
        return error_reply(
            413,
            "request_too_large",
            f"Request exceeds the maximum allowed number of bytes ({MAX_REQUEST_BYTES}).",
        )
    model = str(body.get("model", ""))
    if local:
        return None
    if unknown := _not_served(model, today):
        return unknown
    facts = catalog.facts(model)
    max_tokens = body.get("max_tokens")
    if not counting and isinstance(max_tokens, int) and max_tokens > facts.max_output_tokens:
        return error_reply(
            400,
            "invalid_request_error",
            f"max_tokens: {max_tokens} > {facts.max_output_tokens}, which is the maximum "
            f"allowed number of output tokens for {model}",
        )
    choice = body.get("tool_choice")
    forced = isinstance(choice, dict) and choice.get("type") in ("tool", "any")
    thinking = body.get("thinking")
    off = isinstance(thinking, dict) and thinking.get("type") == "disabled"
    if facts.refuses_forced_tool and (forced or off):
        # The models that always think: no forced tool, and no thinking turned off.
        what = (
            'tool_choice: type "tool" and "any" are' if forced else 'thinking: type "disabled" is'
        )
        return error_reply(400, "invalid_request_error", f"{what} not supported for this model.")
    if forced and facts.thinks_by_default and not off:
        return error_reply(
            400,
            "invalid_request_error",
            "Thinking may not be enabled when tool_choice forces tool use.",
        )
    return None


def models_endpoint(path: str, today: dt.date | None) -> Reply:
    """`GET /v1/models` (every model served, newest first as the API lists them) or
    `GET /v1/models/{id}`."""
    wanted = path.removeprefix("/v1/models").strip("/")
    if not wanted:
        data = [_model(name) for name in catalog.served(today)]
        return json_reply(
            200,
            {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]},
        )
    return _not_served(wanted, today) or json_reply(200, _model(wanted))


def _not_served(model: str, today: dt.date | None) -> Reply | None:
    if catalog.listed(model) is None or catalog.retired(model, today) is not None:
        return error_reply(404, "not_found_error", f"model: {model}")
    return None


def _model(name: str) -> dict:
    facts = catalog.facts(name)
    return {
        "type": "model",
        "id": name,
        "display_name": name.replace("claude-", "Claude ").replace("-", " ").title(),
        "created_at": CREATED_AT,
        "max_tokens": facts.max_output_tokens,
    }
