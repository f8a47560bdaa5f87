"""What the gateway assumes of uvicorn's internals, each checked at start-up: the installed uvicorn
passes, and for each assumption a stand-in of uvicorn's protocol that breaks it (made here, never
uvicorn itself changed) is refused, naming it.
"""

import asyncio
import contextvars
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httptools
import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from elicitation_gateway.server import uvicorn_internals
from elicitation_gateway.server.uvicorn_internals import (
    ASSUMPTIONS,
    HOOKS,
    DeadlineProtocol,
    UvicornMismatch,
    check_uvicorn,
)

ROOT = Path(__file__).resolve().parents[2]


def refused(stand_in: type) -> UvicornMismatch:
    with pytest.raises(UvicornMismatch) as caught:
        check_uvicorn(stand_in)
    return caught.value


def refused_server(stand_in: type) -> UvicornMismatch:
    with pytest.raises(UvicornMismatch) as caught:
        check_uvicorn(server_class=stand_in)
    return caught.value


def test_the_installed_uvicorn_does_all_the_gateway_relies_on():
    check_uvicorn(HttpToolsProtocol)
    check_uvicorn()  # uvicorn's own, as the server checks it
    for name in HOOKS:  # each is also the subclass's own, calling uvicorn's
        assert name in vars(DeadlineProtocol)


def test_each_assumption_is_named_once_and_said_in_words():
    names = [assumption.name for assumption in ASSUMPTIONS]
    assert len(names) == len(set(names))
    assert all(assumption.what for assumption in ASSUMPTIONS)


def test_a_mismatch_names_the_assumption_what_it_says_and_what_was_found():
    error = UvicornMismatch("cycle", "response_complete was None")
    assert error.assumption.name == "cycle"
    message = str(error)
    assert "(cycle: the protocol's `cycle` is the request being answered" in message
    assert "response_complete was None" in message
    assert "uvicorn_internals.py" in message


# ---------------------------------------------------------------------------------------------------
# hooks, constructor: what the subclass overrides and how uvicorn makes it


def without(name: str) -> type:
    """uvicorn's protocol as it would be without its own ``name`` (asyncio's, if any, left)."""
    kept = {key: value for key, value in vars(HttpToolsProtocol).items() if key not in (name, "__dict__")}
    return type("StandIn", (asyncio.Protocol,), kept)


@pytest.mark.parametrize("name", list(HOOKS))
def test_a_protocol_without_one_of_the_hooks_is_refused(name):
    error = refused(without(name))
    assert error.assumption.name == "hooks"
    assert f"defines no {name}" in str(error)


@pytest.mark.parametrize("name", list(HOOKS))
def test_a_hook_that_takes_other_parameters_is_refused(name):
    def changed(self: Any, *args: Any, extra: Any = None) -> None:
        getattr(HttpToolsProtocol, name)(self, *args)

    error = refused(type("StandIn", (HttpToolsProtocol,), {name: changed}))
    assert error.assumption.name == "hooks"
    assert f"{name} takes (args, extra)" in str(error)


def test_a_protocol_made_another_way_is_refused():
    class StandIn(HttpToolsProtocol):
        def __init__(self, config: Any, server_state: Any, state: Any) -> None:
            super().__init__(config, server_state, state)

    assert refused(StandIn).assumption.name == "constructor"


def test_a_protocol_whose_constructor_fails_so_made_is_refused():
    class StandIn(HttpToolsProtocol):
        def __init__(self, config: Any, server_state: Any, app_state: Any, **more: Any) -> None:
            raise TypeError("needs a loop_factory")

    error = refused(StandIn)
    assert error.assumption.name == "constructor"
    assert "needs a loop_factory" in str(error)


# ---------------------------------------------------------------------------------------------------
# loggers, parser, scope, headers, cycle, on_response_complete: what the subclass reads and writes


def test_a_protocol_that_logs_elsewhere_is_refused():
    class StandIn(HttpToolsProtocol):
        def __init__(self, config: Any, server_state: Any, app_state: Any) -> None:
            super().__init__(config, server_state, app_state)
            self.logger = logging.getLogger("uvicorn.protocol")  # a name the filters are not on

    error = refused(StandIn)
    assert error.assumption.name == "loggers"
    assert "'uvicorn.protocol'" in str(error)


class Misreporting:
    """An httptools parser that says no HTTP version."""

    def __init__(self, inner: httptools.HttpRequestParser) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get_http_version(self) -> str:
        return ""


def test_a_protocol_whose_parser_is_not_the_connections_is_refused():
    class StandIn(HttpToolsProtocol):
        def __init__(self, config: Any, server_state: Any, app_state: Any) -> None:
            super().__init__(config, server_state, app_state)
            self.parser = Misreporting(self.parser)  # type: ignore[assignment]

    error = refused(StandIn)
    assert error.assumption.name == "parser"
    assert "version read ''" in str(error)


def test_a_protocol_that_gives_the_app_another_scope_is_refused():
    class StandIn(HttpToolsProtocol):
        def on_headers_complete(self) -> None:
            self.scope = {key: value for key, value in self.scope.items() if key != "extensions"}  # type: ignore[assignment]
            super().on_headers_complete()

    assert refused(StandIn).assumption.name == "scope"


def test_a_protocol_that_keeps_headers_otherwise_is_refused():
    class StandIn(HttpToolsProtocol):
        def on_header(self, name: bytes, value: bytes) -> None:
            super().on_header(name, value.upper())

    error = refused(StandIn)
    assert error.assumption.name == "headers"
    assert "b'GIVEN'" in str(error)


class Stuck:
    """A request's cycle whose ``response_complete`` never turns true where the protocol reads it."""

    response_complete = False

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "inner", inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.inner, name, value)


def test_a_protocol_whose_cycle_says_otherwise_is_refused():
    class StandIn(HttpToolsProtocol):
        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self.cycle = Stuck(self.cycle)  # type: ignore[assignment]

    error = refused(StandIn)
    assert error.assumption.name == "cycle"
    assert "False before the last chunk and False after" in str(error)


def test_a_protocol_not_told_of_a_complete_response_is_refused():
    class StandIn(HttpToolsProtocol):
        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self.cycle.on_response = lambda: None

    error = refused(StandIn)
    assert error.assumption.name == "response_complete"
    assert "called 0 times" in str(error)


def test_a_protocol_whose_cycle_writes_past_its_transport_is_refused():
    class Elsewhere:
        """What a cycle holding its own reference to the connection would do."""

        def __init__(self, transport: Any) -> None:
            self.transport = transport

        def write(self, data: bytes) -> None:
            self.transport.write(data)

    class StandIn(HttpToolsProtocol):
        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            cycle = self.cycle
            real = Elsewhere(cycle.transport)
            send = cycle.send

            async def send_past(message: Any) -> None:
                saved, cycle.transport = cycle.transport, real
                try:
                    await send(message)
                finally:
                    cycle.transport = saved

            cycle.send = send_past  # type: ignore[method-assign]

    error = refused(StandIn)
    assert error.assumption.name == "cycle_transport"
    assert "in 2 writes" in str(error)


# ---------------------------------------------------------------------------------------------------
# bad_request, unfinished_closes, unfinished_logged, access_record: what uvicorn does on its own


def test_a_protocol_that_keeps_an_unparsable_connection_open_is_refused():
    class StandIn(HttpToolsProtocol):
        def data_received(self, data: bytes) -> None:
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserError:
                self.transport.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")

    error = refused(StandIn)
    assert error.assumption.name == "bad_request"
    assert "left it open" in str(error)


def test_a_protocol_whose_sends_do_not_wait_while_writing_is_paused_is_refused():
    class StandIn(HttpToolsProtocol):
        def pause_writing(self) -> None:
            pass  # the transport's buffer would grow without bound

    error = refused(StandIn)
    assert error.assumption.name == "flow"
    assert "went through while writing was paused" in str(error)


class Unclosable:
    """A transport whose ``close`` does nothing, for the request's cycle only."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def close(self) -> None:
        pass


def test_a_protocol_that_leaves_an_unfinished_response_open_is_refused():
    class StandIn(HttpToolsProtocol):
        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            cycle.transport = Unclosable(cycle.transport)
            super()._start_asgi_task(cycle, app)

    error = refused(StandIn)
    assert error.assumption.name == "unfinished_closes"


class Worded(logging.LoggerAdapter):
    """A logger whose lines come as arguments of a format: another shape of record."""

    def error(self, msg: object, *args: Any, **kwargs: Any) -> None:
        self.logger.error("%s", msg % args if args else msg, **kwargs)


class Warned(logging.LoggerAdapter):
    """A logger whose errors come as warnings."""

    def error(self, msg: object, *args: Any, **kwargs: Any) -> None:
        self.logger.warning(msg, *args, **kwargs)


@pytest.mark.parametrize("adapter", [Worded, Warned])
def test_a_protocol_that_logs_an_unfinished_response_otherwise_is_refused(adapter):
    class StandIn(HttpToolsProtocol):
        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            cycle.logger = adapter(cycle.logger, {})
            super()._start_asgi_task(cycle, app)

    error = refused(StandIn)
    assert error.assumption.name == "unfinished_logged"


def test_a_protocol_that_logs_an_unfinished_response_outside_its_task_is_refused():
    """The mark that leaves the line out is the request's task's: a line logged elsewhere stays."""

    class Later(logging.LoggerAdapter):
        def error(self, msg: object, *args: Any, **kwargs: Any) -> None:
            later = lambda: self.logger.error(msg, *args, **kwargs)  # noqa: E731
            asyncio.get_running_loop().call_soon(later, context=contextvars.Context())  # not the task's

    class StandIn(HttpToolsProtocol):
        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            cycle.logger = Later(cycle.logger, {})
            super()._start_asgi_task(cycle, app)

    assert refused(StandIn).assumption.name == "unfinished_logged"


class Reshaped(logging.LoggerAdapter):
    """An access logger whose records hold the path without its query."""

    def info(self, msg: object, *args: Any, **kwargs: Any) -> None:
        client, method, path, version, status = args
        self.logger.info(msg, client, method, path.partition("?")[0], version, status, **kwargs)


def test_a_protocol_whose_access_records_have_another_shape_is_refused():
    class StandIn(HttpToolsProtocol):
        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            cycle.access_logger = Reshaped(cycle.access_logger, {})
            super()._start_asgi_task(cycle, app)

    error = refused(StandIn)
    assert error.assumption.name == "access_record"
    assert "'/whole'" in str(error)


def test_the_probe_leaves_the_real_loggers_alone(caplog):
    """What the check serves is logged on loggers of its own: no access line, no ERROR in the log."""
    caplog.set_level(logging.DEBUG)
    check_uvicorn(HttpToolsProtocol)
    assert [record for record in caplog.records if record.name.startswith("uvicorn")] == []


# ---------------------------------------------------------------------------------------------------
# server: the signal handler and start-up the gateway's server hooks into


def test_a_server_whose_signal_handler_takes_other_parameters_is_refused():
    class StandIn(uvicorn.Server):
        def handle_exit(self, sig: int) -> None:
            super().handle_exit(sig, None)

    error = refused_server(StandIn)
    assert error.assumption.name == "server"
    assert "handle_exit takes (sig), not (sig, frame)" in str(error)


def test_a_server_that_says_it_stops_otherwise_is_refused():
    class StandIn(uvicorn.Server):
        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            del self.should_exit
            self.exit_requested = False

    error = refused_server(StandIn)
    assert error.assumption.name == "server"
    assert "should_exit is 'missing'" in str(error)


def test_a_server_that_keeps_its_listeners_elsewhere_is_refused():
    class StandIn(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            self.listeners, self.servers = self.servers, []

        def close_listeners(self) -> None:
            for each in self.listeners:
                each.close()

    error = refused_server(StandIn)
    assert error.assumption.name == "server"
    assert "its servers listen on []" in str(error)


async def test_the_gateways_server_hooks_are_called_as_uvicorn_starts_and_stops():
    calls: list[Any] = []

    class Hooked(uvicorn_internals.StoppableServer):
        def on_stop_signal(self, sig: int, frame: Any) -> None:
            calls.append(("signal", sig))
            super().on_stop_signal(sig, frame)

        def on_starting(self) -> None:
            calls.append(("starting",))

        def on_listening(self, addresses: list[Any]) -> None:
            calls.append(("listening", addresses))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    config = uvicorn.Config(app, lifespan="off", log_config=None)
    config.load()
    server = Hooked(config)
    server.lifespan = config.lifespan_class(config)  # as uvicorn's serve makes it
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        await server.startup(sockets=[listener])  # serve() would raise the signal again on leaving
        try:
            assert not server.stopping
            server.handle_exit(signal.SIGTERM, None)  # as uvicorn's signal handler calls it
            assert calls == [
                ("starting",),
                ("listening", [listener.getsockname()]),
                ("signal", signal.SIGTERM),
            ]
            assert server.stopping
        finally:
            for each in server.servers:
                each.close()


# ---------------------------------------------------------------------------------------------------
# The server's start


def test_the_server_exits_before_it_starts_when_uvicorn_is_not_what_it_relies_on():
    """A gateway process whose uvicorn breaks an assumption (a stand-in put in its place for the
    check, in that process alone) says which and exits with 1, having announced nothing."""
    script = textwrap.dedent(
        """
        import sys
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
        from elicitation_gateway.server import uvicorn_internals

        class StandIn(HttpToolsProtocol):
            def on_headers_complete(self):
                super().on_headers_complete()
                self.cycle.on_response = lambda: None

        uvicorn_internals.HttpToolsProtocol = StandIn
        from elicitation_gateway.__main__ import main
        sys.exit(main(["--port", "0"]))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env = {key: value for key, value in env.items() if not key.startswith("GATEWAY_")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=30, cwd=ROOT
    )
    assert done.returncode == 1, done.stderr
    assert "listening" not in done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("elicitation-gateway: uvicorn ")
    assert "(response_complete: on_response_complete is called once" in line


def test_the_check_of_the_installed_uvicorn_runs_once_a_process(monkeypatch):
    """Every server of a process (the tests start many) is made after the same check."""
    check_uvicorn()
    monkeypatch.setattr(uvicorn_internals, "_probe", None)  # a second probe would fail here
    check_uvicorn()
