"""Which provider a command that calls models uses when nobody chose one. The simulator answers
only when someone asked for it (--provider sim, OPTIMIZER_LLM_PROVIDER, --set, a config.toml
line): a night, a gate or a run scored by it unasked would report simulated numbers as findings.
Unchosen, the Messages API is used when ANTHROPIC_API_KEY is set; otherwise the command refuses
before anything is written (docs/design.md §9). Light on purpose: no SDK is imported here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from optimizer import config
from optimizer.config import Settings
from optimizer.errors import BadInput

KEY = "ANTHROPIC_API_KEY"
ANTHROPIC_HOST = "api.anthropic.com"
UNCHOSEN = (
    f"no model provider chosen and {KEY} is not set: export {KEY}=… to call the Messages API, "
    "or pass --provider sim for the offline simulator (every score it gives is simulated)."
)


def chosen(
    loaded: config.Loaded, environ: Mapping[str, str], *, need_key: bool = True
) -> config.Loaded:
    """The settings with llm.provider decided: as set when anyone set it, else "anthropic" when
    the key is set (or when `need_key` is false: a cost preview, or a night that says in its own
    log that the key is missing); else BadInput with the one sentence of UNCHOSEN."""
    if loaded.source("llm.provider") != "default":
        return loaded
    if not environ.get(KEY) and need_key:
        raise BadInput(UNCHOSEN)
    llm = loaded.settings.llm.model_copy(update={"provider": "anthropic"})
    origin = f"{KEY} is set" if environ.get(KEY) else "no provider chosen"
    return config.Loaded(
        settings=loaded.settings.model_copy(update={"llm": llm}),
        sources={**loaded.sources, "llm.provider": origin},
    )


def endpoint(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """Where the Messages API calls go: llm.base_url, else ANTHROPIC_BASE_URL, else None (the
    SDK's default, Anthropic's own API)."""
    env = os.environ if environ is None else environ
    return settings.llm.base_url or env.get("ANTHROPIC_BASE_URL") or None


def is_anthropic_api(settings: Settings, environ: Mapping[str, str] | None = None) -> bool:
    """True when the calls go to Anthropic's own API, or to the simulator that plays it; False
    for any other Messages-API server (llama.cpp, LiteLLM, vLLM, Ollama)."""
    if settings.llm.provider == "sim":
        return True
    url = endpoint(settings, environ)
    return url is None or urlsplit(url).hostname == ANTHROPIC_HOST
