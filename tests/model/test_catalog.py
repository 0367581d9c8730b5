"""The catalog of the API's models: every default is a model the API serves today and one we price
from it, a dated name reads as the model it extends, and a failure the provider answers with a
413 and no JSON body is told as a size to reduce, not as a wrong model."""

from __future__ import annotations

import datetime as dt

import anthropic
import httpx2

from optimizer import catalog
from optimizer.config import Settings
from optimizer.model.cost import unpriced
from optimizer.model.errors import call_failure


def test_every_default_model_is_served_priced_and_checked_by_the_preflight() -> None:
    settings = Settings()
    for role, model in settings.models.model_dump().items():
        assert model == catalog.DEFAULT_MODELS[role]
        assert catalog.listed(model) == model and catalog.retired(model) is None, model
        assert unpriced(settings, model) is None  # priced from the catalog, not the fallback
        assert settings.price(model) == catalog.facts(model).price


def test_a_dated_name_reads_as_the_model_it_extends_and_retirement_follows_the_day() -> None:
    assert catalog.listed("claude-haiku-4-5-20251001") == "claude-haiku-4-5"
    assert catalog.listed("claude-opus-4-60") is None  # a longer number is another model
    assert catalog.retired("claude-opus-4-1") == "2026-08-05"
    assert catalog.retired("claude-sonnet-4-5", dt.date(2026, 11, 29)) is None
    assert catalog.retired("claude-sonnet-4-5", dt.date(2026, 11, 30)) == "2026-11-30"
    assert "claude-opus-4-1" not in catalog.served(dt.date(2026, 11, 29))


def test_a_413_without_a_json_body_says_what_to_make_smaller() -> None:
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    edge = httpx2.Response(413, text="<html>Request Entity Too Large</html>", request=request)
    error = anthropic.APIStatusError("Request Entity Too Large", response=edge, body=None)
    said = str(call_failure(error, "grader", "claude-opus-5-5", attempts=1))
    assert "HTTP 413" in said and "32 MB" in said and "smaller" in said
    assert "check models.grader" not in said  # not a wrong model name
