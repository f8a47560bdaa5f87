"""Logging set-up: readable lines, or one JSON object a line for log collectors."""

import json
import logging
import sys
import time
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from starlette.requests import ClientDisconnect

from elicitation_gateway.server.uvicorn_internals import (
    ACCESS_LOGGER,
    ERROR_LOGGER,
    DeliberateEnds,
    access_parts,
    set_access_path,
)
from elicitation_gateway.settings import Settings

# Attributes every LogRecord has; anything else was passed with ``extra=`` and belongs in the JSON.
# uvicorn's ``color_message`` is its message again with terminal colour escapes: never for a collector.
_LEFT_OUT = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName", "color_message"}

_request_started: ContextVar[float] = ContextVar("request_started")
"""When the app received the request being served (``time.perf_counter()``): set by ``note_request_start``."""


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class TextFormatter(logging.Formatter):
    """The readable lines: :data:`TEXT_FORMAT`, exactly as ``logging.Formatter`` writes it, with the
    date and time of a second formatted once for all of that second's records."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)  # local time changes on whole seconds, as UTC offsets are
        cached, text = self._second
        if second != cached:
            text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (second, text)
        return self.default_msec_format % (text, record.msecs)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time``, ``level``, ``logger``, ``message``, then the record's extras.

    uvicorn's access lines also get their parts as fields (``client``, ``method``, ``path``,
    ``http_version``, ``status``), so that a collector need not parse the message.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.name == ACCESS_LOGGER:
            entry.update(access_fields(record))
        entry.update({k: v for k, v in vars(record).items() if k not in _LEFT_OUT})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)


def access_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The parts of one of uvicorn's access lines (``client``, ``method``, ``path``, ``http_version``,
    ``status``); none for a record of another shape, which its message alone says."""
    return access_parts(record) or {}


def note_request_start() -> None:
    """The app has received the request this task serves (``AccessTiming`` says so)."""
    _request_started.set(time.perf_counter())  # each request is its own task: its own context


class AccessDuration(logging.Filter):
    """Adds ``duration_ms`` to an access record logged while serving a request ``AccessTiming`` saw.

    A handler's filter runs when the record is handled, in the task that logged it, so the request's
    start time is still in its context."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == ACCESS_LOGGER and (started := _request_started.get(None)) is not None:
            record.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        return True


CLIENT_GONE = "client disconnected before its request was read: %s"
"""The one line for a client that left mid-request, with its ``route_of``."""


class ClientGone(logging.Filter):
    """On the MCP SDK's Streamable HTTP logger, which logs a client that left before its ``POST`` body
    was read as an ERROR with a traceback: that record becomes the ``CLIENT_GONE`` INFO line the app
    writes for its own routes. Every other record passes as it is."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info is None or not isinstance(record.exc_info[1], ClientDisconnect):
            return True
        record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        record.msg, record.args = CLIENT_GONE, (f"POST {self.path}",)
        record.exc_info = record.exc_text = None
        return logging.getLogger(record.name).isEnabledFor(logging.INFO)


LINK_PREFIX = "/link/"


class AccessPath(logging.Filter):
    """On uvicorn's access logger: its line names the path without the query string, which may hold
    the answerer's password (``?auth_token=``, for browsers' EventSource) and whatever credentials the
    upstream takes in bridge mode; nor a one-tap link's token (``/link/…``). uvicorn writes the path
    with the query; the path it starts with is percent-encoded, so its first ``?`` is where the query
    begins."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (parts := access_parts(record)) is not None:
            path = parts["path"].partition("?")[0]
            if path.startswith(LINK_PREFIX):  # a one-tap link's token answers a question
                path = LINK_PREFIX + "…"
            set_access_path(record, path)
        return True


def hide_access_queries() -> None:
    """Put :class:`AccessPath` on uvicorn's access logger (once), whoever configured its handlers."""
    _add_once(logging.getLogger(ACCESS_LOGGER), AccessPath())


def quiet_dropped_clients(mcp_path: str = "/mcp") -> None:
    """Put the filters that keep a dropped client to one INFO line on uvicorn's error logger and the
    MCP SDK's (once each)."""
    _add_once(logging.getLogger(ERROR_LOGGER), DeliberateEnds())
    _add_once(logging.getLogger("mcp.server.streamable_http"), ClientGone(mcp_path))


def _add_once(target: logging.Logger, added: logging.Filter) -> None:
    if not any(type(existing) is type(added) for existing in target.filters):
        target.addFilter(added)


def timing_wanted(settings: Settings) -> bool:
    """Whether access lines carry ``duration_ms``: JSON logs with the access log on (level ``info`` or
    lower)."""
    return settings.log_format == "json" and settings.log_level in ("debug", "info")


def configure_logging(settings: Settings) -> dict:
    """Set up the root logger and return the matching uvicorn ``log_config``."""
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
        handler.addFilter(AccessDuration())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # Neither format shows where a record was logged from, nor the process: logging need not look
    # them up for every record (the logging HOWTO's "Optimization"; threads stay, notify_workers.py
    # reads them).
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root.setLevel(settings.log_level.upper())
    # Python's warnings go through the same handler, so JSON logs hold nothing but JSON.
    logging.captureWarnings(True)
    # uvicorn's own loggers go through the same handler, so every line has one format.
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "loggers": {
            "uvicorn": {"level": settings.log_level.upper()},
            ERROR_LOGGER: {"level": settings.log_level.upper()},
            ACCESS_LOGGER: {"level": settings.log_level.upper()},
        },
    }


def setup_line(settings: Settings) -> str:
    """What start-up says it serves with: the store's kind (its scheme, never its address or
    credentials) and how many notification targets."""
    store = settings.store.split("://", 1)[0] if "://" in settings.store else settings.store
    targets = len(settings.notify)
    notified = "no notifications"
    if targets:
        notified = f"{targets} notification target{'s' if targets != 1 else ''}"
    return f"store: {store}; {notified}"


def listening_line(settings: Settings, url: str) -> str:
    """The line printed at start, which scripts and tests wait for: the same words in both formats,
    and in JSON one log record with the address also as ``url``."""
    message = f"Elicitation Gateway listening on {url}"
    if settings.log_format != "json":
        return message
    fields = {"name": "elicitation_gateway", "levelno": logging.INFO, "levelname": "INFO", "msg": message}
    return JsonFormatter().format(logging.makeLogRecord({**fields, "url": url}))
