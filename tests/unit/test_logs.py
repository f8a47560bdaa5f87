"""The log format: what a collector reads from each JSON line, and what the text format prints."""

import asyncio
import contextvars
import io
import json
import logging
import logging.config
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import ClientDisconnect

from elicitation_gateway.server.logs import (
    ACCESS_LOGGER,
    CLIENT_GONE,
    TEXT_FORMAT,
    AccessDuration,
    AccessPath,
    ClientGone,
    JsonFormatter,
    TextFormatter,
    configure_logging,
    listening_line,
    quiet_dropped_clients,
    setup_line,
    timing_wanted,
)
from elicitation_gateway.server.middleware.access_timing import AccessTiming
from elicitation_gateway.server.protocol import route_of
from elicitation_gateway.server.uvicorn_internals import DeliberateEnds, end_unfinished_on_purpose
from elicitation_gateway.settings import Settings

ACCESS_FORMAT = '%s - "%s %s HTTP/%s" %d'  # as uvicorn's HTTP protocols log each response


def record(name: str = "elicitation_gateway.gateway", msg: str = "hello %s", args: Any = ("world",), **extra):
    return logging.getLogger(name).makeRecord(name, logging.INFO, __file__, 1, msg, args, None, extra=extra)


def formatted(made: logging.LogRecord) -> dict[str, Any]:
    line = JsonFormatter().format(made)
    assert "\n" not in line
    return json.loads(line)


def test_a_record_is_one_object_with_its_extras():
    entry = formatted(record(elicitation="que_1", outcome="declined", duration=1.5))
    assert entry.pop("time").endswith("+00:00")
    assert entry == {
        "level": "info",
        "logger": "elicitation_gateway.gateway",
        "message": "hello world",
        "elicitation": "que_1",
        "outcome": "declined",
        "duration": 1.5,
    }


def test_an_extra_json_cannot_hold_is_written_as_text():
    assert formatted(record(path=sys.modules[__name__].__file__, thing=object()))["thing"].startswith(
        "<object"
    )


def test_an_exception_is_its_traceback_in_one_field():
    def fail() -> None:
        raise ValueError("broken")

    try:
        fail()
    except ValueError:
        made = logging.getLogger("x").makeRecord(
            "x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    entry = formatted(made)
    assert entry["message"] == "failed"
    assert entry["exception"].startswith("Traceback (most recent call last):")
    assert "ValueError: broken" in entry["exception"]


def test_uvicorns_color_message_is_left_out():
    colored = "Started server process [\x1b[36m%d\x1b[0m]"
    made = record("uvicorn.error", "Started server process [%d]", (42,), color_message=colored)
    line = JsonFormatter().format(made)
    assert "color_message" not in line
    assert "\x1b" not in line
    assert "\\u001b" not in line
    assert json.loads(line)["message"] == "Started server process [42]"


def test_an_access_line_has_its_parts_as_fields():
    made = record(ACCESS_LOGGER, ACCESS_FORMAT, ("127.0.0.1:5000", "POST", "/elicit?timeout=5", "1.1", 200))
    entry = formatted(made)
    assert entry["message"] == '127.0.0.1:5000 - "POST /elicit?timeout=5 HTTP/1.1" 200'
    assert {k: entry[k] for k in ("client", "method", "path", "http_version", "status")} == {
        "client": "127.0.0.1:5000",
        "method": "POST",
        "path": "/elicit?timeout=5",
        "http_version": "1.1",
        "status": 200,
    }
    assert "duration_ms" not in entry  # only a request AccessTiming saw has one


@pytest.mark.parametrize(
    ("sent", "logged"),
    [
        ("/event?auth_token=b3BlbmNvZGU6cHc=", "/event"),
        ("/question?directory=%2Fsrv&token=secret", "/question"),
        ("/a%3Fb?c", "/a%3Fb"),  # a question mark in the path is percent-encoded: the query starts at "?"
        ("/livez", "/livez"),
        ("/link/eyJhIjoxfQ.c2lnbmF0dXJl", "/link/…"),  # a one-tap link's token answers a question
        ("/link/eyJhIjoxfQ.c2ln?x=1", "/link/…"),
    ],
)
def test_an_access_line_names_the_path_without_its_query(sent, logged):
    made = record(ACCESS_LOGGER, ACCESS_FORMAT, ("127.0.0.1:5000", "GET", sent, "1.1", 200))
    assert AccessPath().filter(made)
    assert made.getMessage() == f'127.0.0.1:5000 - "GET {logged} HTTP/1.1" 200'
    assert formatted(made)["path"] == logged
    other = record(ACCESS_LOGGER, "%s", ("GET /x?auth_token=y",))
    assert AccessPath().filter(other)
    assert other.args == ("GET /x?auth_token=y",)  # a record of another shape is left as it is


def test_an_access_record_of_another_shape_is_its_message_alone():
    entry = formatted(record(ACCESS_LOGGER, "something else %s", ("happened",)))
    assert entry["message"] == "something else happened"
    assert "method" not in entry


async def test_access_timing_gives_the_access_line_its_duration():
    """The filter reads when AccessTiming saw the request, in the task that serves it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(AccessDuration())
    access = logging.getLogger(ACCESS_LOGGER)
    saved = (access.handlers[:], access.level, access.propagate)
    access.handlers[:], access.propagate = [handler], False
    access.setLevel(logging.INFO)

    async def app(scope: dict, receive: Any, send: Any) -> None:
        access.info(ACCESS_FORMAT, "127.0.0.1:5000", "GET", "/livez", "1.1", 200)

    try:
        await asyncio.create_task(AccessTiming(app)({"type": "http"}, None, None))  # a task, as uvicorn's
        access.info(ACCESS_FORMAT, "127.0.0.1:5000", "GET", "/livez", "1.1", 200)  # outside any request
    finally:
        access.handlers[:], access.level, access.propagate = saved
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert 0 <= inside["duration_ms"] < 1000
    assert inside["status"] == 200
    assert "duration_ms" not in outside


def test_timing_is_wanted_only_for_json_access_lines():
    assert timing_wanted(Settings(log_format="json", log_level="info"))
    assert timing_wanted(Settings(log_format="json", log_level="debug"))
    assert not timing_wanted(Settings(log_format="json", log_level="warning"))
    assert not timing_wanted(Settings(log_format="text", log_level="info"))


def test_the_listening_line_in_text_and_json():
    url = "http://127.0.0.1:4096"
    assert listening_line(Settings(), url) == f"Elicitation Gateway listening on {url}"
    entry = json.loads(listening_line(Settings(log_format="json"), url))
    assert (entry["level"], entry["message"], entry["url"]) == (
        "info",
        f"Elicitation Gateway listening on {url}",
        url,
    )


@pytest.mark.parametrize(
    ("store", "notify", "line"),
    [
        ("memory", [], "store: memory; no notifications"),
        ("sqlite:////var/lib/5ecret/gateway.db", ["json://a"], "store: sqlite; 1 notification target"),
        (
            "redis://:pw-5ecret@redis.internal:6379/0",
            ["json://a", "ntfy://b"],
            "store: redis; 2 notification targets",
        ),
        ("rediss://user:pw-5ecret@redis.internal/0", [], "store: rediss; no notifications"),
    ],
)
def test_the_setup_line_names_the_store_s_kind_never_its_address_and_counts_targets(store, notify, line):
    assert setup_line(Settings.model_construct(store=store, notify=notify)) == line


@given(st.lists(st.floats(min_value=0, max_value=4_102_444_800), min_size=1, max_size=20))
def test_text_lines_are_logging_s_own_whatever_the_times_and_their_order(times):
    ours, plain = TextFormatter(), logging.Formatter(TEXT_FORMAT)
    for created in [*times, *sorted(times)]:  # out of order, and each second's records together
        record = logging.makeLogRecord({"name": "n", "levelname": "INFO", "msg": "m %s", "args": ("a",)})
        record.created, record.msecs = created, (created - int(created)) * 1000
        assert ours.format(record) == plain.format(record)
        assert ours.formatTime(record, "%H") == plain.formatTime(record, "%H")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """``configure_logging`` sets process-wide state: give the next test what this one found."""
    root = logging.getLogger()
    names = ("uvicorn", "uvicorn.error", ACCESS_LOGGER)
    saved = (root.handlers[:], root.level, [logging.getLogger(name).level for name in names])
    lookups = (logging._srcfile, logging.logProcesses, logging.logMultiprocessing)  # type: ignore[attr-defined]
    yield
    logging._srcfile, logging.logProcesses, logging.logMultiprocessing = lookups  # type: ignore[attr-defined]
    root.handlers[:], root.level = saved[0], saved[1]
    for name, level in zip(names, saved[2], strict=True):
        logging.getLogger(name).setLevel(level)
    logging.captureWarnings(False)


class Counted:
    """An argument that notes each time a record holding it is formatted."""

    def __init__(self) -> None:
        self.formatted = 0

    def __str__(self) -> str:
        self.formatted += 1
        return "counted"


@pytest.mark.usefixtures("restore_logging")
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_record_below_the_level_is_never_formatted(log_format, capsys):
    settings = Settings(log_format=log_format, log_level="warning")
    logging.config.dictConfig(configure_logging(settings))
    below, above = Counted(), Counted()
    logging.getLogger(ACCESS_LOGGER).info(ACCESS_FORMAT, below, "GET", "/", "1.1", 200)
    logging.getLogger("elicitation_gateway.gateway").info("%s", below)
    logging.getLogger("elicitation_gateway.gateway").warning("shown %s", above)
    assert (below.formatted, above.formatted) == (0, 1)
    assert capsys.readouterr().err.count("shown counted") == 1


@pytest.mark.usefixtures("restore_logging")
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_records_skip_the_caller_and_process_no_format_shows_but_keep_the_thread(log_format, capsys):
    logging.config.dictConfig(configure_logging(Settings(log_format=log_format)))
    kept: list[logging.LogRecord] = []
    logger = logging.getLogger("elicitation_gateway.gateway")
    handler = logging.Handler()
    handler.emit = kept.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        logger.info("asked %s", "que_1")
    finally:
        logger.removeHandler(handler)
    [record] = kept
    assert (record.funcName, record.process, record.processName) == ("(unknown function)", None, None)
    assert record.thread is not None  # notification workers' records are told apart by it
    [line] = capsys.readouterr().err.splitlines()
    assert "asked que_1" in line
    if log_format == "json":
        assert set(json.loads(line)) == {"time", "level", "logger", "message"}
    else:
        assert line.endswith(" INFO elicitation_gateway.gateway: asked que_1")


@pytest.mark.usefixtures("restore_logging")
def test_json_logs_hold_python_warnings_too(capsys):
    logging.config.dictConfig(configure_logging(Settings(log_format="json")))
    warnings.warn("something is deprecated", DeprecationWarning, stacklevel=1)
    [line] = capsys.readouterr().err.splitlines()
    entry = json.loads(line)
    assert (entry["level"], entry["logger"]) == ("warning", "py.warnings")
    assert "something is deprecated" in entry["message"]


# ---------------------------------------------------------------------------------------------------
# Dropped clients: one INFO line, never uvicorn's or the MCP SDK's ERROR


def test_the_unfinished_line_is_left_out_only_in_the_context_that_ended_on_purpose():
    """Known by its shape (an ERROR without arguments or exception), never its words; that uvicorn
    logs it so is checked at start-up (tests/unit/test_uvicorn_internals.py)."""
    deliberate = DeliberateEnds()
    unfinished = record("uvicorn.error", "ASGI callable returned without completing response.", ())
    unfinished.levelno = logging.ERROR
    crashed = record("uvicorn.error", "Exception in ASGI application\n", ())
    crashed.levelno = logging.ERROR
    crashed.exc_info = (ValueError, ValueError("broken"), None)
    other = record("uvicorn.error", "ASGI callable should return None, but returned '%s'.", (1,))
    other.levelno = logging.ERROR
    warned = record("uvicorn.error", "Invalid HTTP request received.", ())
    warned.levelno = logging.WARNING

    def in_a_dropping_request() -> list[bool]:
        end_unfinished_on_purpose()
        return [deliberate.filter(made) for made in (unfinished, crashed, other, warned)]

    assert contextvars.copy_context().run(in_a_dropping_request) == [False, True, True, True]
    assert deliberate.filter(unfinished)  # another request (this context) is logged as ever
    assert deliberate.filter(other)


def sdk_error(error: Exception) -> logging.LogRecord:
    """The record the MCP SDK logs with ``logger.exception`` when handling a POST raised ``error``."""
    made = record("mcp.server.streamable_http", "Error handling POST request", ())
    made.exc_info = (type(error), error, None)
    return made


def test_the_mcp_sdks_error_for_a_client_gone_mid_body_becomes_one_info_line(caplog):
    gone = ClientGone("/mcp")
    made = sdk_error(ClientDisconnect())
    caplog.set_level(logging.INFO, logger="mcp.server.streamable_http")
    assert gone.filter(made)
    assert (made.levelno, made.levelname) == (logging.INFO, "INFO")
    assert made.getMessage() == CLIENT_GONE % "POST /mcp"
    assert made.exc_info is None
    assert "Traceback" not in logging.Formatter().format(made)

    caplog.set_level(logging.WARNING, logger="mcp.server.streamable_http")
    assert not gone.filter(sdk_error(ClientDisconnect()))  # an INFO line, below this logger's level


def test_the_mcp_sdks_other_errors_pass_as_they_are():
    gone = ClientGone("/mcp")
    made = sdk_error(ValueError("broken"))
    plain = record("mcp.server.streamable_http", "Error in message router", ())
    for kept in (made, plain):
        before = dict(vars(kept))
        assert gone.filter(kept)
        assert vars(kept) == before


def test_the_filters_are_put_on_once():
    quiet_dropped_clients()
    quiet_dropped_clients()
    uvicorn_filters = logging.getLogger("uvicorn.error").filters
    mcp_filters = logging.getLogger("mcp.server.streamable_http").filters
    assert sum(isinstance(f, DeliberateEnds) for f in uvicorn_filters) == 1
    assert sum(isinstance(f, ClientGone) for f in mcp_filters) == 1


@pytest.mark.parametrize(
    ("scope", "route"),
    [
        (
            {"method": "POST", "path": "/elicit", "raw_path": b"/elicit", "query_string": b"auth_token=x"},
            "POST /elicit",
        ),
        # As sent: a percent-encoded line break stays three characters, and forges no line.
        (
            {"method": "POST", "path": "/question/que\nx/reply", "raw_path": b"/question/que%0Ax/reply"},
            "POST /question/que%0Ax/reply",
        ),
        ({"method": "GET", "path": "/\u00e9", "raw_path": b"/\xc3\xa9"}, "GET /\\xc3\\xa9"),
        ({"method": "GET", "path": "/a\nb"}, "GET '/a\\nb'"),  # a server that gives no raw_path
    ],
)
def test_a_route_in_a_log_line_is_one_printable_line_without_the_query(scope, route):
    assert route_of(scope) == route
    assert route_of(scope).isprintable()
