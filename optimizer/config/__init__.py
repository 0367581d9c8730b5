"""Settings (docs/design.md §11): the sections and their defaults (sections.py), and where each value
comes from (loading.py). One frozen model passed explicitly; never read from a global; an unknown
key never passes silently."""

from optimizer.catalog import DEFAULT_PRICES
from optimizer.config.loading import check_flag, known_keys, load
from optimizer.config.sections import (
    EVAL_CONFIG_KEYS,
    ROLES,
    SECTIONS,
    Adopt,
    Budget,
    Evals,
    Execute,
    Llm,
    Loaded,
    Loop,
    Models,
    Probe,
    Ray,
    Sandbox,
    Scoring,
    Section,
    Selection,
    Settings,
    Sim,
    StoreSettings,
)
from optimizer.prices import Price

__all__ = [
    "Adopt",
    "DEFAULT_PRICES",
    "EVAL_CONFIG_KEYS",
    "ROLES",
    "SECTIONS",
    "Budget",
    "Evals",
    "Execute",
    "Llm",
    "Loaded",
    "Loop",
    "Models",
    "Price",
    "Probe",
    "Ray",
    "Sandbox",
    "Scoring",
    "Section",
    "Selection",
    "Settings",
    "Sim",
    "StoreSettings",
    "check_flag",
    "known_keys",
    "load",
]
