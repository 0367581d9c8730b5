"""run.toml: the settings a run was started with, each with where it came from as a trailing
comment. `optimizer resume` reads it back as the base layer of config.load; `status` shows where
each setting that is not a default came from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optimizer import config


def to_toml(settings: config.Settings, sources: Mapping[str, str]) -> str:
    """run.toml: every effective setting, with where it came from as a trailing comment."""
    lines = ["# The settings this run was started with; `optimizer resume` reads them back.", ""]
    data = settings.model_dump()
    for section in [*config.SECTIONS, "prices"]:
        values = data[section]
        if section == "prices":
            for model, price in values.items():
                lines.append(f"[prices.{_toml_value(model)}]")
                lines += [f"{k} = {_toml_value(v)}" for k, v in price.items()]
                lines.append("")
            continue
        lines.append(f"[{section}]")
        for key, value in values.items():
            origin = sources.get(f"{section}.{key}", "default")
            if value is None:  # TOML has no null: an unset setting is said, and read back unset
                lines.append(f"# {key} is unset  # {origin}")
                continue
            lines.append(f"{key} = {_toml_value(value)}  # {origin}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
