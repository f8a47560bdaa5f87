"""Logging set-up: readable lines, or one JSON object a line for log collectors."""

import json
import logging
import sys
from datetime import UTC, datetime

from elicitation_gateway.settings import Settings

# Attributes every LogRecord has; anything else was passed with ``extra=`` and belongs in the JSON.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(settings: Settings) -> dict:
    """Set up the root logger and return the matching uvicorn ``log_config``."""
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    # uvicorn's own loggers go through the same handler, so every line has one format.
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "loggers": {
            "uvicorn": {"level": settings.log_level.upper()},
            "uvicorn.error": {"level": settings.log_level.upper()},
            "uvicorn.access": {"level": settings.log_level.upper()},
        },
    }
