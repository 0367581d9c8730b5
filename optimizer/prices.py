"""Model prices: the Price a settings file, the environment or the command line gives a model,
the built-in table, and how a model name (dots and all) is addressed as a settings key. Shared by
config (which loads them) and the model client (which charges by them)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.errors import BadInput


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    """US dollars per million tokens; cache writes and reads cost as input unless given (a server
    other than Anthropic's seldom prices them apart)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float = Field(ge=0)
    cache_read: float = Field(ge=0)

    @model_validator(mode="before")
    @classmethod
    def _cache_as_input(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "input" in data:
            try:
                same = float(data["input"])
            except (TypeError, ValueError):
                same = 0.0  # input's own error is the one to report, once
            return {"cache_write": same, "cache_read": same, **data}
        return data


PRICE_FIELDS = tuple(Price.model_fields)


def quoted(model: str) -> str:
    """A model name as a settings key: quoted when a dot would split it."""
    return f'"{model}"' if "." in model or '"' in model else model


def price_key(rest: str, origin: str) -> tuple[str, str | None]:
    """`<model>` or `<model>.<field>` after `prices.`: the model may be quoted ("qwen2.5:0.5b")
    and, unquoted, keeps its dots; a trailing price field name is the field."""
    model, field = rest, None
    if rest.startswith('"') and '"' in rest[1:]:
        model, _, tail = rest[1:].partition('"')
        field = tail[1:] if tail.startswith(".") else (tail or None)
    elif rest.rpartition(".")[2] in PRICE_FIELDS:
        model, _, field = rest.rpartition(".")
    if not model or (field is not None and field not in PRICE_FIELDS):
        raise BadInput(
            f"{origin}: expected prices.<model>.<field> with a field of "
            f"{', '.join(PRICE_FIELDS)}, e.g. --set 'prices.\"qwen2.5:0.5b\".input=0'."
        )
    return model, field


def set_price(
    tree: dict, sources: dict, model: str, field: str | None, value: Any, origin: str
) -> None:
    """One model's price, merged over what a lower layer gave it; a price of 0 means free."""
    entry = tree.setdefault("prices", {}).setdefault(model, {})
    if field is not None or isinstance(value, Mapping):
        entry.update({field: value} if field is not None else value)
    elif not isinstance(value, bool) and str(value).strip() in ("0", "0.0"):
        entry.update(dict.fromkeys(PRICE_FIELDS, 0.0))
    else:
        raise BadInput(
            f"{origin}: prices.{quoted(model)} = {value!r} is not a price; give its "
            f"fields ({', '.join(PRICE_FIELDS)}, USD per million tokens), or 0 for a "
            "free model."
        )
    sources[f"prices.{model}"] = origin


def env_prices(name: str, raw: str) -> dict:
    """OPTIMIZER_PRICES: a JSON object of model name to price (a model name is seldom a valid
    part of a variable's name)."""
    try:
        prices = json.loads(raw) if name == "OPTIMIZER_PRICES" else None
    except ValueError:
        prices = None
    if not isinstance(prices, dict):
        raise BadInput(
            f"environment variable {name}: expected OPTIMIZER_PRICES set to a JSON "
            'object, e.g. OPTIMIZER_PRICES=\'{"qwen2.5:0.5b": 0, "my-model": {"input": '
            '1.0, "output": 2.0}}\' (USD per million tokens; 0 = free).'
        )
    return prices
