"""structlog configured once per process: JSON lines to the run's optimizer.log, a console renderer
on a terminal, and secret redaction in front of both. Never let a key-like value reach a sink."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypedDict, Unpack, overload

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

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


@functools.lru_cache(maxsize=4096)
def _secret_name(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None


_PLAIN = frozenset({type(None), bool, int, float})


@overload
def redact(value: str | bytes, name: str | None = None) -> str: ...
@overload
def redact(value: object, name: str | None = None) -> object: ...
def redact(value: object, name: str | None = None) -> object:
    """A copy of value with key-like strings masked, recursing into mappings and sequences; a
    string under a credential-like field name is masked whole."""
    if type(value) in _PLAIN:  # most fields of most events: counts, costs, flags
        return value
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        if name is not None and value and _secret_name(name):
            return MASK
        return _mask_text(value)
    if isinstance(value, Mapping):  # a key can be text a model or a server wrote, too
        return {
            _mask_text(k) if isinstance(k, str) else k: redact(v, str(k)) for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [redact(v, name) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    # Objects (exceptions, paths, models) are rendered by the sinks via str(); mask that text now.
    return _mask_text(str(value))


def redact_processor(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    return {k: _redacted(v, k) for k, v in event_dict.items()}


def _redacted(value: object, name: str) -> object:
    # A value whose str() raises must not turn a log call into a failure of the caller's work.
    try:
        return redact(value, name)
    except Exception:  # noqa: BLE001 - logging never raises into its caller
        return f"<{type(value).__name__} that could not be rendered>"


_HANDLER_MARK = "_optimizer_handler"


class _RunLogHandler(logging.FileHandler):
    """The run's log on a full disk or a read-only folder loses the line quietly: the run's own
    next write stops it with one sentence, where logging would print a traceback per event."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - stdlib name
        if not isinstance(sys.exc_info()[1], OSError):
            super().handleError(record)


def _handler(handler: logging.Handler, renderer: Processor, level: int) -> logging.Handler:
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


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def colours_for(stream: object) -> bool:
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


def _console_renderer(stream: object) -> structlog.dev.ConsoleRenderer:
    return structlog.dev.ConsoleRenderer(
        colors=colours_for(stream), exception_formatter=structlog.dev.plain_traceback
    )


def _remove_handlers() -> None:
    _sinks.clear()
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
        old.close()


def reset() -> None:
    """Undo configure(): close the sinks and restore structlog's defaults (tests, embedding)."""
    _remove_handlers()
    logging.getLogger().setLevel(logging.WARNING)
    structlog.reset_defaults()


class _DumpsOptions(TypedDict, total=False):
    """What structlog's JSONRenderer passes its serializer besides the event."""

    default: Callable[[object], object]


def _json_line(event: EventDict, **kw: Unpack[_DumpsOptions]) -> str:
    """One event as compact JSON; orjson is 8x faster than the json module, which still writes
    what orjson refuses (an integer past 64 bits)."""
    try:
        return orjson.dumps(event, default=kw.get("default")).decode("utf-8")
    except TypeError:
        return json.dumps(event, **kw)


# The sinks of the last configure(): (its handler, the renderer of its lines). Read at each event,
# so a logger bound before a configure() writes to the new sinks, never to a closed file.
# The renderer stays Any: JSONRenderer declares str | bytes, though _json_line makes it str.
_sinks: list[tuple[logging.Handler, Any]] = []


class _Sinks:
    """structlog's logger: each event, already redacted, rendered once per sink and written through
    that sink's handler (its stream and lock), without a LogRecord. Through stdlib logging an event
    cost about 100 us, and every model call logs one."""

    def _emit(self, method: str, event: EventDict) -> None:
        level = logging.getLevelName(event.get("level", method).upper())
        for handler, render in _sinks:
            if not isinstance(level, int) or level < handler.level:
                continue
            try:
                line = render(None, method, dict(event)) + "\n"
            except Exception as exc:  # noqa: BLE001 - logging never raises into its caller
                line = (
                    render(
                        None,
                        method,
                        {
                            "event": str(event.get("event")),
                            "level": event.get("level"),
                            "timestamp": event.get("timestamp"),
                            "log_error": f"fields not rendered: {type(exc).__name__}",
                        },
                    )
                    + "\n"
                )
            handler.acquire()
            try:
                stream = getattr(handler, "stream", None)
                if stream is not None:
                    stream.write(line)
                    stream.flush()
            except (OSError, ValueError):
                pass  # as _RunLogHandler: the run's own next write stops it with one sentence
            finally:
                handler.release()

    def __getattr__(self, method: str) -> Callable[..., None]:
        if method.startswith("_"):
            raise AttributeError(method)
        return lambda **event: self._emit(method, event)


_SINKS = _Sinks()


def _events_only(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    return dict(event_dict)  # handed to _Sinks as keyword arguments, rendered per sink


def configure(log_path: Path | None, *, console: bool, level: int = logging.INFO) -> None:
    """Send every structlog event (and stdlib logging, e.g. the SDK's) through redaction to JSON
    lines in log_path (debug and up) and, when console is true, to stderr (level and up).
    Calling it again replaces the sinks of the previous call."""
    _remove_handlers()
    root = logging.getLogger()
    file_level = logging.DEBUG if log_path is not None else level
    sinks = _sinks
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        renderer: Processor = structlog.processors.JSONRenderer(serializer=_json_line)
        sinks.append(
            (
                _handler(_RunLogHandler(log_path, encoding="utf-8"), renderer, logging.DEBUG),
                renderer,
            )
        )
    if console:
        renderer = _console_renderer(sys.stderr)
        sinks.append((_handler(logging.StreamHandler(sys.stderr), renderer, level), renderer))
    for handler, _ in sinks:  # stdlib records (the SDK's) go through the handlers themselves
        root.addHandler(handler)
    lowest = min(file_level, level)
    root.setLevel(lowest)
    # Libraries talk at debug level about every request; their warnings are enough.
    for noisy in ("httpx2", "httpcore", "anthropic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    structlog.configure(
        processors=[
            *_shared_processors(),
            structlog.processors.StackInfoRenderer(),
            # Tracebacks become text before redaction, so a key inside an exception message is masked.
            structlog.processors.format_exc_info,
            redact_processor,
            _events_only,
        ],
        logger_factory=lambda *_args: _SINKS,
        wrapper_class=structlog.make_filtering_bound_logger(lowest),
        # Not cached, so tests may capture or reconfigure loggers made at import time.
        cache_logger_on_first_use=False,
    )
