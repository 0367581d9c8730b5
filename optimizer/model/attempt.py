"""One HTTP attempt of a Messages request, inside a slot of the concurrency limit, streamed or not,
with the limit told how it went. Never retries and never records: the client does both."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
from anthropic.types import Message

from optimizer.model.errors import account_error
from optimizer.model.limiter import AdaptiveLimiter
from optimizer.model.retry import Truncated, retry_cause


async def attempt_once(
    sdk: anthropic.AsyncAnthropic,
    limiter: AdaptiveLimiter,
    request: dict[str, Any],
    headers: dict[str, str],
    stream: bool,
) -> Message:
    """The answer, or the failure as raised (an account-wide refusal as its OptimizerError)."""
    async with limiter.slot() as epoch:
        try:
            if stream:
                message, response_headers = await _stream_once(sdk, request, headers)
            else:
                raw = await sdk.messages.with_raw_response.create(**request, extra_headers=headers)
                response_headers = raw.headers
                try:
                    message = await raw.parse()
                except ValueError as exc:  # a body cut short is not valid JSON
                    raise Truncated(f"the response body broke off ({exc})") from None
                if not isinstance(message, Message):
                    raise Truncated("the response body is not a message")
        except anthropic.APIStatusError as exc:
            if retry_cause(exc) == "rate_limit":
                limiter.on_rate_limited(epoch)
            raise account_error(exc) or exc from None
    usage = message.usage
    limiter.on_success(response_headers, (usage.input_tokens or 0) + (usage.output_tokens or 0))
    return message


async def _stream_once(
    sdk: anthropic.AsyncAnthropic, request: dict[str, Any], headers: dict[str, str]
) -> tuple[Message, httpx2.Headers]:
    async with sdk.messages.stream(**request, extra_headers=headers) as stream:
        stopped = False
        try:
            async for event in stream:
                stopped = stopped or event.type == "message_stop"
        except ValueError as exc:  # a body cut inside an event's JSON
            raise Truncated(f"the stream broke off ({exc})") from None
        if not stopped:
            raise Truncated("the stream ended without message_stop")
        final = await stream.get_final_message()
        data = final.model_dump(mode="json", exclude_none=True, warnings=False)
        return Message.model_validate(data), stream.response.headers
