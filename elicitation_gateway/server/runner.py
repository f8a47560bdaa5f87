"""Running the service under uvicorn, with a shutdown that finishes every question first."""

import asyncio
import errno
import gc
import logging
import signal
import socket
from types import FrameType
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from elicitation_gateway.gateway import Gateway
from elicitation_gateway.server.app import create_app
from elicitation_gateway.server.logs import (
    configure_logging,
    listening_line,
    quiet_dropped_clients,
    setup_line,
    timing_wanted,
)
from elicitation_gateway.server.mcp_endpoint import PATH as MCP_PATH
from elicitation_gateway.server.middleware.access_timing import AccessTiming
from elicitation_gateway.server.security import warn_if_exposed
from elicitation_gateway.server.uvicorn_internals import StoppableServer, check_uvicorn, deadline_protocol
from elicitation_gateway.settings import Settings

logger = logging.getLogger(__name__)


class GatewayServer(StoppableServer):
    """On SIGINT/SIGTERM, finish pending questions (tools get ``cancel``, answerers see
    ``question.rejected``) and end the event streams, then let uvicorn stop. A second signal stops
    at once."""

    def __init__(self, config: uvicorn.Config, gateway: Gateway) -> None:
        super().__init__(config)
        self.gateway = gateway
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining = False
        self._drain_task: asyncio.Task[None] | None = None

    def on_stop_signal(self, sig: int, frame: FrameType | None) -> None:
        if self._draining or self.stopping or self._loop is None:
            self.stop(sig, frame)
            return
        self._draining = True
        # A signal handler may run between two steps of the loop: hand the drain to the loop itself.
        self._loop.call_soon_threadsafe(self._start_drain, sig, frame)

    def _start_drain(self, sig: int, frame: FrameType | None) -> None:
        self._drain_task = asyncio.get_running_loop().create_task(self._drain_then_exit(sig, frame))

    async def _drain_then_exit(self, sig: int, frame: FrameType | None) -> None:
        try:
            await asyncio.wait_for(self.gateway.shutdown(), self.gateway.settings.shutdown_grace)
            await asyncio.sleep(0.05)  # let the streams flush what shutdown queued
        except TimeoutError:
            logger.warning("shutdown grace period ended with work left")
        finally:
            self.stop(sig, frame)

    def on_starting(self) -> None:
        self._loop = asyncio.get_running_loop()

    def on_listening(self, addresses: list[Any]) -> None:
        for host, port, *_ in addresses:
            shown = f"[{host}]" if ":" in host else host
            # Printed whatever the log level: it is how scripts know the address (with --port 0).
            print(listening_line(self.gateway.settings, f"http://{shown}:{port}"), flush=True)


def uvicorn_config(app: ASGIApp, settings: Settings, **options: Any) -> uvicorn.Config:
    """How the gateway is served, the same for the service and its tests; ``options`` are where they
    differ (address, logging)."""
    config = uvicorn.Config(
        app,
        http=deadline_protocol(
            settings.header_timeout,
            settings.send_timeout,
            max_header_size=settings.max_header_size,
            max_headers=settings.max_headers,
            max_url_length=settings.max_url_length,
        ),
        timeout_graceful_shutdown=settings.shutdown_grace + 5,
        lifespan="on",
        # X-Forwarded-For and -Proto are believed from these addresses only (the reverse proxy's).
        proxy_headers=True,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        **options,
    )
    quiet_dropped_clients(MCP_PATH)  # after the Config, which may have configured uvicorn's loggers
    return config


class AddressUnusable(Exception):
    """The address to listen on cannot be had; the message says why and what to do."""


def listening_socket(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything starts: a port that is taken is said at once, in
    words a newcomer can act on, instead of after the app has announced that it started."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise AddressUnusable(f"cannot listen on {host!r}: {error.strerror} (--host, GATEWAY_HOST)") from None
    family, _, _, _, address = infos[0]
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        listener.bind(address)
    except OSError as error:
        listener.close()
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if error.errno == errno.EADDRINUSE:
            raise AddressUnusable(
                f"port {port} is already in use on {host}: stop what listens there, or choose another "
                f'port with --port N (make run ARGS="--port N") or GATEWAY_PORT=N'
            ) from None
        if error.errno == errno.EACCES:
            raise AddressUnusable(
                f"not allowed to listen on {shown}: ports below 1024 need privileges; choose another "
                f'with --port N (make run ARGS="--port N") or GATEWAY_PORT=N'
            ) from None
        raise AddressUnusable(f"cannot listen on {shown}: {error.strerror} (--host, GATEWAY_HOST)") from None
    listener.set_inheritable(True)
    return listener


def settle_garbage_collection() -> None:
    """Once started: what start-up allocated (modules, models, the app) lives as long as the process.
    Frozen, it is no longer scanned by every full collection, which otherwise stalls the loop for as
    long; young collections are made 70 times rarer (``bench/FINDINGS.md``, F1)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def serve(settings: Settings) -> None:
    """Serve until stopped; raises :class:`AddressUnusable` before start-up when the address is, and
    :class:`~.uvicorn_internals.UvicornMismatch` when the installed uvicorn is not what the gateway
    relies on."""
    check_uvicorn()
    listener = listening_socket(settings.host, settings.port)
    log_config = configure_logging(settings)
    warn_if_exposed(settings)
    logger.info(setup_line(settings))
    gateway = Gateway(settings)
    app = create_app(settings, gateway)
    config = uvicorn_config(
        AccessTiming(app) if timing_wanted(settings) else app,
        settings,
        host=settings.host,
        port=settings.port,
        log_config=log_config,
        log_level=settings.log_level,
    )
    server = GatewayServer(config, gateway)
    settle_garbage_collection()
    # Once stopped in order, uvicorn raises the signal it stopped on again. SIGINT's default action, as
    # SIGTERM's, then ends the process with that signal's status; Python's own handler would end it in
    # a KeyboardInterrupt traceback instead, a stray text block in JSON logs.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    server.run(sockets=[listener])
