"""structlog configured once per process: JSON lines to the run's optimizer.log, a console renderer
on a terminal, and secret redaction in front of both. Never let a key-like value reach a sink."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import structlog

MASK = "[redacted]"

# Key-like values wherever they appear inside a string: Anthropic keys of any length, other
# `sk-` keys long enough not to be ordinary words, and the credential after "Bearer".
_SECRET_IN_TEXT = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]+"
    r"|sk-[A-Za-z0-9_\-]{20,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/\-]{8,}=*"
)
# A field named like a credential has its string value masked whole; numbers stay, so token
# counts (input_tokens=123) are still logged.
_SECRET_NAME = re.compile(r"key|token|secret|password|authorization", re.IGNORECASE)


def _mask_text(text: str) -> str:
    def repl(match: re.Match[str]) -> str:
        found = match.group(0)
        return f"Bearer {MASK}" if found[:6].lower() == "bearer" else MASK

    return _SECRET_IN_TEXT.sub(repl, text)


def redact(value: Any, name: str | None = None) -> Any:
    """A copy of value with key-like strings masked, recursing into mappings and sequences; a
    string under a credential-like field name is masked whole."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        if name is not None and _SECRET_NAME.search(name) and value:
            return MASK
        return _mask_text(value)
    if isinstance(value, Mapping):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [redact(v, name) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    # Objects (exceptions, paths, models) are rendered by the sinks via str(); mask that text now.
    return _mask_text(str(value))


def redact_processor(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> dict:
    return {k: redact(v, k) for k, v in event_dict.items()}


_HANDLER_MARK = "_optimizer_handler"


class _RunLogHandler(logging.FileHandler):
    """The run's log on a full disk or a read-only folder loses the line quietly: the run's own
    next write stops it with one sentence, where logging would print a traceback per event."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - stdlib name
        if not isinstance(sys.exc_info()[1], OSError):
            super().handleError(record)


def _handler(handler: logging.Handler, renderer: Any, level: int) -> logging.Handler:
    # Tracebacks become text before redaction, so a key inside an exception message is masked.
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_shared_processors(),
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                redact_processor,
                renderer,
            ],
        )
    )
    handler.setLevel(level)
    setattr(handler, _HANDLER_MARK, True)
    return handler


def _shared_processors() -> list:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def colours_for(stream: Any) -> bool:
    """Colour only on a terminal, never when NO_COLOR is set (https://no-color.org), always when
    FORCE_COLOR is: a pipe or a file gets plain text, not escape codes (as rich decides too)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed stream
        return False


def _console_renderer(stream: Any) -> Any:
    return structlog.dev.ConsoleRenderer(
        colors=colours_for(stream), exception_formatter=structlog.dev.plain_traceback
    )


def _remove_handlers() -> None:
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
        old.close()


def reset() -> None:
    """Undo configure(): close the sinks and restore structlog's defaults (tests, embedding)."""
    _remove_handlers()
    logging.getLogger().setLevel(logging.WARNING)
    structlog.reset_defaults()


def configure(log_path: Path | None, *, console: bool, level: int = logging.INFO) -> None:
    """Send every structlog event (and stdlib logging, e.g. the SDK's) through redaction to JSON
    lines in log_path (debug and up) and, when console is true, to stderr (level and up).
    Calling it again replaces the sinks of the previous call."""
    _remove_handlers()
    root = logging.getLogger()
    file_level = logging.DEBUG if log_path is not None else level
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        root.addHandler(
            _handler(
                _RunLogHandler(log_path, encoding="utf-8"),
                structlog.processors.JSONRenderer(sort_keys=False),
                logging.DEBUG,
            )
        )
    if console:
        root.addHandler(_handler(logging.StreamHandler(sys.stderr), _console_renderer(sys.stderr),
                                 level))
    root.setLevel(min(file_level, level))
    # Libraries talk at debug level about every request; their warnings are enough.
    for noisy in ("httpx2", "httpcore", "anthropic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared_processors(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached, so tests may capture or reconfigure loggers made at import time.
        cache_logger_on_first_use=False,
    )
