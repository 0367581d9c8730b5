"""Where settings come from: built-in defaults < config.toml < an evals file's eval_config <
OPTIMIZER_<SECTION>_<KEY> environment variables < --set section.key=value < explicit flags. An
unknown key or a bad value is one sentence naming where it was set, never a silent default."""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from datetime import date, datetime, time
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from optimizer.catalog import DEFAULT_PRICES
from optimizer.config.sections import EVAL_CONFIG_KEYS, SECTIONS, Loaded, Settings
from optimizer.errors import BadInput
from optimizer.prices import PRICE_FIELDS, env_prices, price_key, quoted, set_price

# The settings being built, section by section, and where each key was set ("--set loop.seed").
Tree = dict[str, dict[str, object]]
Sources = dict[str, str]

# A value of a TOML document as tomllib reads it (config.toml, a run.toml's settings).
TomlValue = (
    str | int | float | bool | datetime | date | time | list["TomlValue"] | dict[str, "TomlValue"]
)


def known_keys() -> list[str]:
    return [f"{s}.{k}" for s, model in SECTIONS.items() for k in model.model_fields]


def _suggest(key: str) -> str:
    close = difflib.get_close_matches(key, known_keys(), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else "; see config.toml for the known keys."


def _type_name(section: str, key: str) -> str:
    annotation = SECTIONS[section].model_fields[key].annotation
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(annotation))
    return getattr(annotation, "__name__", str(annotation))


_KIND: dict[object, str] = {
    int: "a whole number",
    float: "a number",
    bool: "true or false",
    str: "a text",
}


def check_flag(flag: str, dotted: str, raw: str) -> None:
    """A command-line shorthand's value for a setting (cli/shorthands.py), checked where it was
    typed, so that the error names the flag the user wrote rather than the setting it feeds."""
    section, _, key = dotted.partition(".")
    annotation = SECTIONS[section].model_fields[key].annotation
    assert annotation is not None  # every setting is annotated
    try:
        TypeAdapter(annotation).validate_python(_coerce(section, key, raw))
    except ValidationError:
        if get_origin(annotation) is Literal:
            allowed = ", ".join(str(a) for a in get_args(annotation))
            raise BadInput(f"{flag} {raw!r}: use one of {allowed} ({dotted}).") from None
        kinds = [t for t in get_args(annotation) or [annotation] if t is not type(None)]
        shown = " or ".join(_KIND.get(t) or str(getattr(t, "__name__", t)) for t in kinds)
        raise BadInput(f"{flag} {raw!r}: give {shown} ({dotted}).") from None


def _coerce(section: str, key: str, raw: str) -> str | bool | None:
    """Text from the environment or --set becomes the field's type; pydantic checks the rest."""
    annotation = SECTIONS[section].model_fields[key].annotation
    if type(None) in get_args(annotation) and raw.strip().lower() in ("", "none", "unset"):
        return None  # an optional setting (loop.max_iterations) set back to unset
    if annotation is bool:
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
    return raw


# Settings the stop rule no longer reads (issue 48): a run.toml of an older run still resumes; set
# anywhere else, they are named with what replaced them.
RETIRED = {
    "loop.min_proposals_without_step": "loop.stop_window",
    "loop.min_step": "loop.stop_window",
}

# Keys that took a new name: the old one is read as the new, wherever it is set, so a config.toml
# or a run.toml written before still loads ("selection" is the promotion rule's word alone).
RENAMED = {"loop.parent_selection": "loop.parent"}


def _set(tree: Tree, sources: Sources, dotted: str, value: object, origin: str) -> None:
    dotted = RENAMED.get(dotted, dotted)
    section, _, key = dotted.partition(".")
    if dotted in RETIRED:
        if origin == "run.toml":
            return
        raise BadInput(
            f"{origin}: '{dotted}' is retired (the stop rule reads the evidence, docs/design.md "
            f"§9); remove it, or set {RETIRED[dotted]}."
        )
    if section == "prices":
        set_price(tree, sources, *price_key(key, origin), value, origin)
    elif section not in SECTIONS or key not in SECTIONS[section].model_fields:
        raise BadInput(f"{origin}: unknown setting '{dotted}'{_suggest(dotted)}")
    else:
        tree.setdefault(section, {})[key] = value
    sources[dotted] = origin


def _read_toml(path: Path) -> dict[str, TomlValue]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: not valid TOML ({exc}); fix the syntax at that line.") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot be read ({exc}); check the path.") from exc


def load(
    config_path: Path | None = None,
    *,
    eval_config: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    flags: Mapping[str, object] | None = None,
    base: Mapping[str, TomlValue] | None = None,
) -> Loaded:
    """Build the effective settings. `base` (a run.toml's settings) replaces the built-in
    defaults when a run is resumed; `flags` maps dotted keys to explicit command-line values."""
    tree: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if base:
        _set_tables(
            tree, sources, {k: v for k, v in base.items() if isinstance(v, dict)}, "run.toml"
        )
    if config_path is not None and config_path.is_file():
        _set_tables(tree, sources, _read_toml(config_path), str(config_path))
    for key, value in (eval_config or {}).items():
        if key in EVAL_CONFIG_KEYS and value is not None:
            _set(tree, sources, EVAL_CONFIG_KEYS[key], value, "evals.json eval_config")
    _set_env(tree, sources, env if env is not None else os.environ)
    _set_overrides(tree, sources, overrides)
    for dotted, value in (flags or {}).items():
        if value is not None:
            _set(tree, sources, dotted, value, "command-line flag")
    if "prices" in tree:
        listed = {k: v.model_dump() for k, v in DEFAULT_PRICES.items()}
        tree["prices"] = {
            **listed,
            **{m: {**listed.get(m, {}), **p} for m, p in tree["prices"].items()},
        }
    try:
        settings = Settings.model_validate(tree)
    except ValidationError as exc:
        raise BadInput(*(_explain(err, sources) for err in exc.errors())) from None
    return Loaded(settings=settings, sources=sources)


def _set_env(tree: Tree, sources: Sources, env: Mapping[str, str]) -> None:
    """OPTIMIZER_<SECTION>_<KEY> variables (and OPTIMIZER_PRICES…), in name order."""
    for name, raw in sorted(env.items()):
        if name == "OPTIMIZER_PRICES" or name.startswith("OPTIMIZER_PRICES_"):
            _set_tables(tree, sources, {"prices": env_prices(name, raw)}, f"env {name}")
            continue
        if not name.startswith("OPTIMIZER_") or name.count("_") < 2:
            continue
        section, _, key = name[len("OPTIMIZER_") :].lower().partition("_")
        if section in SECTIONS:
            dotted = RENAMED.get(f"{section}.{key}", f"{section}.{key}")
            section, _, key = dotted.partition(".")
            if key not in SECTIONS[section].model_fields:
                raise BadInput(f"environment variable {name}: unknown setting{_suggest(dotted)}")
            _set(tree, sources, dotted, _coerce(section, key, raw), f"env {name}")


def _set_overrides(tree: Tree, sources: Sources, overrides: list[str] | tuple[str, ...]) -> None:
    """--set section.key=value, in the order given: a later one wins."""
    for item in overrides:
        given, eq, raw = item.partition("=")
        given = given.strip()
        dotted = RENAMED.get(given, given)
        if not eq or "." not in dotted:
            raise BadInput(f"--set {item!r}: expected section.key=value, e.g. --set loop.seed=3.")
        section, _, key = dotted.partition(".")
        value = (
            _coerce(section, key, raw)
            if section in SECTIONS and key in SECTIONS[section].model_fields
            else raw
        )
        _set(tree, sources, dotted, value, f"--set {given}")


def _set_tables(tree: Tree, sources: Sources, tables: Mapping[str, TomlValue], origin: str) -> None:
    for section, values in tables.items():
        if not isinstance(values, dict):
            raise BadInput(f"{origin}: '{section}' must be a [section] table of settings.")
        for key, value in values.items():
            if section == "prices":
                set_price(tree, sources, key, None, value, origin)
            else:
                _set(tree, sources, f"{section}.{key}", value, origin)


def _explain(err: ErrorDetails, sources: Mapping[str, str]) -> str:
    loc = [str(p) for p in err["loc"]]
    if loc[0] == "prices" and len(loc) == 3:
        origin, key = sources.get(f"prices.{loc[1]}", "settings"), f"prices.{quoted(loc[1])}"
        if err["type"] == "missing":
            return (
                f"{origin}: {key} has no {loc[2]} price; set it too (e.g. --set '{key}.{loc[2]}"
                f"=0'), or {key} = 0 for a free model."
            )
        if err["type"] == "extra_forbidden":
            return f"{origin}: {key}.{loc[2]} is not a price field; use {', '.join(PRICE_FIELDS)}."
        return f"{origin}: {key}.{loc[2]} {err['msg'].lower()} (USD per million tokens)."
    dotted = ".".join(loc[:2])
    origin = sources.get(dotted, "settings")
    if err["type"] == "value_error" and len(loc) == 1:
        # A rule across a section's keys: name where those keys were set.
        origins = sorted({v for k, v in sources.items() if k.startswith(f"{loc[0]}.")})
        where = ", ".join(origins) or "settings"
        return f"{where}: {str(err['msg']).removeprefix('Value error, ')}."
    if err["type"] == "extra_forbidden":
        return f"{origin}: unknown setting '{'.'.join(loc)}'{_suggest('.'.join(loc))}"
    if len(loc) >= 2 and loc[0] in SECTIONS and loc[1] in SECTIONS[loc[0]].model_fields:
        expected = _type_name(loc[0], loc[1])
        return f"{origin}: '{dotted}' must be {expected} ({err['msg'].lower()})."
    return f"{origin}: '{'.'.join(loc)}' {err['msg'].lower()}."
