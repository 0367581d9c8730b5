"""What a failed model call means to its caller: failed for good, refused for the whole account,
or answered without valid structure. Never retries and never records; it only names the failure."""

from __future__ import annotations

import re

import anthropic
import structlog

from optimizer.errors import (
    BudgetExhausted,
    OptimizerError,
    ProviderSpendLimit,
    ProviderUnavailable,
    WorkFailed,
)
from optimizer.logs import redact
from optimizer.model.retry import api_message, is_spend_limit, retry_cause
from optimizer.words import dollars

log = structlog.get_logger()


class ModelCallFailed(WorkFailed):
    """A call that failed for good: retries spent, or an error no retry can fix (a 400, a 404).
    Callers that run one eval turn it into data; nothing is recorded as paid."""

    def __init__(self, message: str, *, role: str, cause: str, attempts: int) -> None:
        super().__init__(message)
        self.role, self.cause, self.attempts = role, cause, attempts


class StructuredAnswerError(OptimizerError):
    """The model twice failed to answer through the forced tool with valid input; callers record
    it as data (judge_error), never as a pass or a fail."""

    def __init__(self, *, role: str, tool_name: str, first_error: str, second_error: str) -> None:
        super().__init__(
            f"The {role} did not answer through the tool {tool_name!r} with valid input, twice: "
            f"first {first_error}; after the repair request, {second_error}."
        )
        self.role, self.tool_name = role, tool_name
        self.first_error, self.second_error = first_error, second_error


def account_error(exc: anthropic.APIStatusError) -> OptimizerError | None:
    """The error that stops the run when the account itself is refused (spend limit, credentials):
    no other request would fare better. None for a refusal of this one request."""
    if is_spend_limit(exc):
        return ProviderSpendLimit(
            f"The model provider says the account's spend limit is reached "
            f"(HTTP {exc.status_code}: {redact(api_message(exc))}); raise the limit or wait "
            "for it to reset, then resume the run."
        )
    if exc.status_code in (401, 403):
        return WorkFailed(
            f"The model provider refused the credentials (HTTP {exc.status_code}); check "
            "ANTHROPIC_API_KEY, or use the offline simulator with --provider sim."
        )
    return None


# How servers say a request does not fit the model's context: Anthropic ("prompt is too long"),
# llama.cpp ("exceeds the available context size"), OpenAI-style proxies and vLLM ("maximum
# context length", "context_length_exceeded").
_TOO_LONG = re.compile(r"context.(size|length|window)|prompt is too long|too many tokens", re.I)


def call_failure(exc: Exception, role: str, model: str, attempts: int) -> OptimizerError:
    """The error a caller sees for a call that failed for good, the key redacted."""
    if isinstance(exc, OptimizerError):
        return exc
    cause = retry_cause(exc)
    detail = redact(api_message(exc) if isinstance(exc, anthropic.APIStatusError) else str(exc))
    if cause == "connection" and exc.__cause__ is not None:  # the SDK says only "Connection error."
        detail = f"{detail} {redact(str(exc.__cause__))}".strip()
    if cause is not None:
        hint = (
            "; check the network, or that the server at llm.base_url is running"
            if cause == "connection"
            else ""
        )
        return ModelCallFailed(
            f"The {role} call to {model} failed after {attempts} attempts ({cause}: {detail}){hint}.",
            role=role,
            cause=cause,
            attempts=attempts,
        )
    status = getattr(exc, "status_code", None)
    if status in (400, 413) and _TOO_LONG.search(detail):
        fix = (
            "the request is longer than the model's context window; use a model or server with "
            "a longer context (llama.cpp splits its context across parallel slots), or fewer "
            "execute.max_turns or a smaller execute.max_tokens"
        )
    elif status == 413:
        # Said by the API (request_too_large) or by a proxy in front of it, often without a body.
        fix = (
            "the request is larger than the endpoint takes (the Messages API's limit is 32 MB): "
            "fewer or smaller images and files in an eval, or a smaller execute.max_turns"
        )
    elif status == 404:
        fix = f"check models.{role} and llm.base_url"
    else:
        fix = f"check models.{role} and that the server at llm.base_url takes this request"
    return ModelCallFailed(
        f"The {role} call to {model} was refused"
        + (f" (HTTP {status}: {detail})" if status else f" ({type(exc).__name__}: {detail})")
        + f"; {fix}.",
        role=role,
        cause=f"http_{status}" if status else type(exc).__name__,
        attempts=attempts,
    )


def over_budget(
    role: str,
    model: str,
    *,
    estimate: float,
    spent: float,
    in_flight: float,
    budget: float,
    kept: float,
    kept_for: str,
) -> BudgetExhausted:
    """The stop of a call that would take the run past its budget (less what is kept), logged."""
    log.warning(
        "llm.budget_exhausted",
        role=role,
        model=model,
        spent_usd=spent,
        in_flight_usd=in_flight,
        estimate_usd=estimate,
        budget_usd=budget,
    )
    return BudgetExhausted(
        f"The next {role} call to {model} (estimated {dollars(estimate)}) would take the "
        f"run's spend from {dollars(spent)}"
        + (f" (plus {dollars(in_flight)} in flight)" if in_flight > 0 else "")
        + f" past its budget of ${budget:.2f}"
        + (f" less ${kept:.2f} kept {kept_for}" if kept else "")
        + ", so it was not started."
    )


def outage(failed: int, last: Exception) -> ProviderUnavailable:
    """The stop of a run whose provider failed `failed` different calls in a row for good."""
    return ProviderUnavailable(
        f"The model provider failed {failed} different calls in a row for good (the last: "
        f"{last}); the run stops here with everything committed: resume it once the provider "
        "answers again."
    )
