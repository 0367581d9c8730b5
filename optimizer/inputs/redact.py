"""Secrets out of text mined from the user's sessions, before it is written or sent anywhere: the
logs' redaction plus the usual key shapes. Never return text that still holds one it knows."""

from __future__ import annotations

import re
from typing import Any

from optimizer.logs import MASK, redact

# Shapes the logs' redaction does not know, each specific enough not to eat ordinary words.
_SHAPES = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"
    r"|\bAKIA[0-9A-Z]{16}\b|\bASIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}\b|\bgithub_pat_[A-Za-z0-9_]{20,}\b"  # GitHub tokens
    r"|\bglpat-[A-Za-z0-9_\-]{20,}\b"  # GitLab
    r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}\b"  # Slack
    r"|\bAIza[0-9A-Za-z_\-]{35}\b"  # Google API keys
    r"|\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}\b"  # Stripe
    r"|\bnpm_[A-Za-z0-9]{36}\b"  # npm
    r"|\bhf_[A-Za-z0-9]{30,}\b"  # Hugging Face
    r"|\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWTs
    re.DOTALL,
)
# user:password@ in a URL keeps the user and the host.
_URL_CREDENTIAL = re.compile(
    r"(?P<head>[a-z][a-z0-9+.\-]*://[^\s:/@]+:)[^\s@/]+(?=@)", re.IGNORECASE
)
# `password = hunter2`, `API_KEY: abc`, `"token": "abc"`: the value after a credential-like name.
_ASSIGNED = re.compile(
    r"(?P<head>\b[\w.\-]*(?:api[_-]?key|secret|token|passw(?:or)?d|passwd|pwd|credential|auth)[\w.\-]*"
    r"[\"']?\s*[:=]\s*[\"']?)(?P<value>[^\s\"',;]{4,})",
    re.IGNORECASE,
)


def text(value: str) -> str:
    """value with every key-like part replaced by the mask."""
    masked = redact(value)
    masked = _SHAPES.sub(MASK, masked)
    masked = _URL_CREDENTIAL.sub(lambda m: m.group("head") + MASK, masked)
    return _ASSIGNED.sub(
        lambda m: m.group("head") + (m.group("value") if m.group("value") == MASK else MASK), masked
    )


def deep(value: Any) -> Any:
    """A copy of a JSON-like value with every string in it passed through text()."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {text(k) if isinstance(k, str) else k: deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [deep(v) for v in value]
    return value


def holds_secret(value: str) -> bool:
    return text(value) != value
