"""The models of a command, checked before its first paid call (and before anything is written):
every role's model must be one the provider serves and one we can price, or the command says so
in one sentence and exits 2. Offline against the catalog first (a retired name, a name the
simulator would refuse, a model without a price); then, on Anthropic's own API, with the provider
itself (the Models endpoint, which costs nothing). A server of the user's own (llm.base_url
elsewhere) names and prices its models as it likes: it is not checked."""

from __future__ import annotations

from collections.abc import Callable

import structlog

from optimizer import catalog
from optimizer.config import Settings
from optimizer.model.cost import unpriced
from optimizer.model.provider import is_anthropic_api
from optimizer.prices import quoted

log = structlog.get_logger()

# Asks the provider about one model name: True served, False not (a 404), None unknown (the
# provider could not be asked: a network failure is no reason to refuse a night).
Ask = Callable[[str], bool | None]


def anthropic_api(settings: Settings) -> bool:
    """Whether calls go to Anthropic's own API: the endpoint the client uses (llm.base_url,
    else ANTHROPIC_BASE_URL) is unset or its host."""
    return settings.llm.provider == "anthropic" and is_anthropic_api(settings)


def roles_and_models(settings: Settings) -> list[tuple[str, str]]:
    """(role, model) for every role of a night, in the settings' order."""
    return [(role, str(model)) for role, model in settings.models.model_dump().items()]


def refused_offline(settings: Settings) -> str | None:
    """The first role whose model the provider would refuse or we cannot price, in one
    sentence; None when every one passes (or the server is the user's own)."""
    simulated = settings.llm.provider == "sim"
    if not (simulated or anthropic_api(settings)):
        return None
    for role, model in roles_and_models(settings):
        setting = f"models.{role} = {model}"
        if date := catalog.retired(model):
            return (
                f"{setting}: the Claude API retired this model on {date} and answers 404 for it; "
                f"set models.{role} to a model it serves, e.g. {catalog.DEFAULT_MODELS[role]} "
                "(docs/real-api.md lists them)."
            )
        if catalog.listed(model) is None and simulated:
            return (
                f"{setting}: not a model the Claude API serves, and the simulator refuses what "
                f"the API refuses (404); use one of {', '.join(catalog.served()[:4])} "
                "(docs/real-api.md lists them)."
            )
        if catalog.listed(model) is None and unpriced(settings, model) is not None:
            key = f"prices.{quoted(model)}"
            return (
                f"no price for model {model} ({setting}): set {key} or OPTIMIZER_PRICES, e.g. "
                f"--set '{key}.input=2' --set '{key}.output=10' (USD per million tokens), or "
                "pick a model docs/real-api.md lists."
            )
    return None


def refused_by_provider(settings: Settings, ask: Ask) -> str | None:
    """The first role whose model Anthropic's API says it does not serve (checked once per
    name); None when each is served or the provider could not be asked."""
    if not anthropic_api(settings):
        return None
    answers: dict[str, bool | None] = {}
    for role, model in roles_and_models(settings):
        if model not in answers:
            answers[model] = ask(model)
        if answers[model] is False:
            return (
                f"models.{role} = {model}: the Messages API does not serve this model to this "
                f"key (404 from its Models endpoint); set models.{role} to one it serves, e.g. "
                f"{catalog.DEFAULT_MODELS[role]}."
            )
        if answers[model] is None:
            log.warning("preflight.model_unchecked", role=role, model=model)
    return None


def ask_with_sdk(api_key: str, base_url: str | None = None) -> Ask:
    """An Ask that calls the Models endpoint (GET /v1/models/{id}) through the SDK."""
    import anthropic

    sdk = anthropic.Anthropic(api_key=api_key, base_url=base_url or None, max_retries=1, timeout=20)

    def ask(model: str) -> bool | None:
        try:
            sdk.models.retrieve(model)
        except anthropic.NotFoundError:
            return False
        except anthropic.AnthropicError:
            return None
        return True

    return ask
