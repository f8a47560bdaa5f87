"""The processes that send notifications: a pool of warm workers in the gateway, and the loop each runs.

Apprise's plugins send with blocking calls (``requests``, ``smtplib``, name lookups) that nothing in the
calling process can end at a deadline. Each attempt therefore runs in a worker process: a worker that
misses its deadline is killed, which ends whatever it was blocked on (a socket read, a name lookup, a
plugin's own loop), is reaped at once, and is replaced by a new one started in the background.

Workers are started lazily, when an attempt finds none idle, as ``python -c`` with a bootstrap of their
own (:data:`BOOTSTRAP`) through asyncio's subprocess support: no thread of the gateway is forked, no
process-wide setting (of :mod:`multiprocessing` or anything else) is changed, and nothing of the
gateway's own program is run again in the worker (as :mod:`multiprocessing`'s ``spawn`` does with the
main script, which then needs a ``__main__`` guard). Each worker imports this module and Apprise once,
then serves attempts one at a time, keeping the plugin of each URL it was given. It talks JSON lines
over its stdin and a private copy of its stdout (its own stdout is its stderr, so that nothing a
plugin prints reaches the pipe); its Apprise log lines come back over the pipe and are logged in the
gateway, under Apprise's own logger names, at the level the gateway's logging asks for.

This module's top level imports the standard library only, so that a worker holds Apprise and little
else.
"""

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

logger = logging.getLogger(__name__)

START_TIMEOUT = 60.0  # seconds a new worker may take to import Apprise and say it is ready
CLOSE_GRACE = 1.0  # seconds an idle worker has to exit once told to, before it is killed
LINE_LIMIT = 16 * 1024 * 1024  # the longest line a worker may send (an Apprise log line quoting a reply)
BOOTSTRAP = (
    "import json, sys; config = json.loads(sys.stdin.buffer.readline()); sys.path[:] = config['path']; "
    "from elicitation_gateway.notify_workers import serve; serve(config)"
)
"""A worker's program: its first line of stdin is its configuration (never its command line, which
anyone on the machine can read, and the URLs hold secrets); the gateway's ``sys.path`` from it (so that
it finds the same package, and any module a test asks it to import), then :func:`serve`."""


class WorkerFailed(Exception):
    """A worker could not be started, or exited without answering: the attempt failed."""


# ---------------------------------------------------------------------------------------------------
# Plugins (used in both processes: the gateway checks URLs and names targets, workers send)


class _ThisThreadOnly(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread


@contextlib.contextmanager
def _apprise_quiet() -> Iterator[None]:
    """Apprise's own lines while it parses a URL: they may quote the URL, token and all
    (``Unsupported URL: <the whole value>``). The gateway says which URL failed by position instead."""
    apprise_logger = logging.getLogger("apprise")
    quiet = _ThisThreadOnly()
    apprise_logger.addFilter(quiet)
    try:
        yield
    finally:
        apprise_logger.removeFilter(quiet)


def load_plugin(url: str, timeout: float) -> Any | None:
    """The Apprise plugin of ``url`` with its connect and read timeouts (``cto``, ``rto``) set to
    ``timeout`` where the URL does not set them (Apprise's own are 4 s); None if Apprise cannot parse
    it."""
    import apprise  # only a gateway that notifies needs it (elicitation-gateway[notify])
    from apprise.plugins import url_to_dict

    with _apprise_quiet():
        try:
            parsed = url_to_dict(url)
            if not parsed:
                return None
            parsed.setdefault("cto", timeout)
            parsed.setdefault("rto", timeout)
            plugin = apprise.Apprise.instantiate(parsed)
        except Exception:  # a plugin that cannot take this URL
            return None
    return plugin if isinstance(plugin, apprise.NotifyBase) else None


# ---------------------------------------------------------------------------------------------------
# The worker process


class _Forward(logging.Handler):
    """A worker's log records, sent to the gateway as ``{"log": [level, logger name, message]}``."""

    def __init__(self, out: TextIO) -> None:
        super().__init__()
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _say(self.out, {"log": [record.levelno, record.name, record.getMessage()]})
        except Exception:  # the gateway has gone: the worker ends at its next read
            self.handleError(record)


def _say(out: TextIO, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def serve(config: dict[str, Any]) -> None:
    """A worker's life: import Apprise (and ``config["imports"]``), make the plugins of
    ``config["plugins"]`` (``[url, timeout]`` each: Apprise loads every plugin module the first time, which
    takes long enough to miss a deadline), say ``{"ready": true}``, then answer each
    ``{"send": [url, timeout, title, body]}`` line with ``{"done": [delivered, error type or null]}``
    until its stdin ends."""
    import importlib

    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # what a plugin prints goes to stderr, never into the pipe
    sys.stdout = sys.stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal: the gateway ends its workers
    apprise_logger = logging.getLogger("apprise")
    apprise_logger.setLevel(config["level"])
    apprise_logger.addHandler(_Forward(out))
    apprise_logger.propagate = False
    for module in config["imports"]:
        importlib.import_module(module)
    import apprise  # noqa: F401 (imported once, before the first attempt)

    plugins = {(url, timeout): load_plugin(url, timeout) for url, timeout in config["plugins"]}
    _say(out, {"ready": True})
    for line in sys.stdin.buffer:
        url, timeout, title, body = json.loads(line)["send"]
        plugin = plugins.get((url, timeout))
        if plugin is None:
            plugin = plugins[url, timeout] = load_plugin(url, timeout)
        delivered, error = False, None
        if plugin is None:
            error = "UnparseableURL"
        else:
            try:
                delivered = bool(plugin.notify(body=body, title=title))
            except Exception as failure:  # a plugin's bug is a failed attempt
                error = type(failure).__name__
        _say(out, {"done": [delivered, error]})


# ---------------------------------------------------------------------------------------------------
# The gateway's side


class Worker:
    """One worker process, started by :meth:`start`, ended (and reaped) by :meth:`end`."""

    def __init__(self, imports: tuple[str, ...], plugins: list[tuple[str, float]], level: int) -> None:
        self._config = {"path": sys.path, "imports": list(imports), "plugins": plugins, "level": level}
        self.process: asyncio.subprocess.Process | None = None
        self.reaped = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def start(self) -> None:
        """Start the process and wait until it has imported Apprise; killed and reaped on failure."""
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                BOOTSTRAP,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=LINE_LIMIT,
            )
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(self._config).encode() + b"\n")
            async with asyncio.timeout(START_TIMEOUT):
                message = await self._receive()
        except TimeoutError:
            await self.end()
            raise WorkerFailed(f"a notification worker did not start within {START_TIMEOUT:g} s") from None
        except OSError as error:
            await self.end()
            raise WorkerFailed(f"a notification worker could not start: {error}") from None
        except BaseException:
            await self.end()
            raise
        if "ready" not in message:
            await self.end()
            raise WorkerFailed("a notification worker did not say it was ready")

    async def send(self, url: str, plugin_timeout: float, title: str, body: str) -> tuple[bool, str | None]:
        """One attempt with the plugin of ``url`` (its ``cto`` and ``rto`` at ``plugin_timeout`` unless the
        URL sets them): ``(delivered, the plugin's error type or None)``; the Apprise lines the worker logs
        meanwhile are logged here. Ended only from outside (a deadline kills the worker)."""
        assert self.process is not None
        assert self.process.stdin is not None
        line = json.dumps({"send": [url, plugin_timeout, title, body]}) + "\n"
        try:
            self.process.stdin.write(line.encode())
            await self.process.stdin.drain()
        except ConnectionError:  # BrokenPipeError and ConnectionResetError among them
            raise WorkerFailed("the notification worker exited") from None
        while True:
            message = await self._receive()
            if "done" in message:
                delivered, error = message["done"]
                return bool(delivered), error

    async def _receive(self) -> dict[str, Any]:
        """The worker's next message but a log line (each logged here as it comes)."""
        assert self.process is not None
        assert self.process.stdout is not None
        while True:
            try:
                line = await self.process.stdout.readline()
            except ValueError:  # a line over LINE_LIMIT
                raise WorkerFailed("the notification worker sent a line too long") from None
            if not line:
                raise WorkerFailed("the notification worker exited")
            message = json.loads(line)
            if "log" not in message:
                return message
            level, name, text = message["log"]
            logging.getLogger(name).log(level, "%s", text)

    def kill(self) -> None:
        """SIGKILL, now: what it was doing ends with it. :meth:`end` reaps it."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    async def end(self, grace: float = 0) -> None:
        """Close its stdin (an idle worker exits on its own), wait ``grace`` seconds, kill it if it is
        still there, and reap it."""
        if self.process is None:
            self.reaped = True
            return
        if self.process.stdin is not None:
            self.process.stdin.close()
        if grace:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self.process.wait()
        self.kill()
        await self.process.wait()
        self.reaped = True


class Pool:
    """Up to ``size`` warm workers, shared by the targets: an attempt borrows an idle one, or starts
    one. A worker killed at a deadline is replaced at once, in the background."""

    def __init__(self, size: int, plugins: list[tuple[str, float]], imports: tuple[str, ...] = ()) -> None:
        """``plugins``: the ``(url, timeout)`` each worker makes ready before its first attempt."""
        self.size = size
        self._plugins = plugins
        self._imports = imports
        self._idle: list[Worker] = []
        self._busy: set[Worker] = set()
        self._spares: list[asyncio.Task[Worker]] = []
        self._free = asyncio.Semaphore(size)

    @property
    def workers(self) -> list[Worker]:
        """Every worker alive now: idle and busy (not those still starting)."""
        return [*self._idle, *self._busy]

    async def borrow(self) -> Worker:
        """An idle worker, one started to replace a killed one, or a new one."""
        await self._free.acquire()
        try:
            if self._idle:
                worker = self._idle.pop()
            elif self._spares:
                worker = await self._spares.pop(0)
            else:
                worker = await self._start()
        except BaseException:
            self._free.release()
            raise
        self._busy.add(worker)
        return worker

    def give_back(self, worker: Worker) -> None:
        self._busy.discard(worker)
        self._idle.append(worker)
        self._free.release()

    async def discard(self, worker: Worker, *, replace: bool = True) -> None:
        """Kill ``worker`` (it missed its deadline, or failed), reap it, and start its replacement."""
        self._busy.discard(worker)
        try:
            await worker.end()
        finally:
            self._free.release()
            if replace:
                self._spares.append(asyncio.get_running_loop().create_task(self._start()))

    async def _start(self) -> Worker:
        worker = Worker(self._imports, self._plugins, _apprise_level())
        began = time.perf_counter()
        await worker.start()
        logger.debug("notification worker %s ready in %.3f s", worker.pid, time.perf_counter() - began)
        return worker

    async def close(self) -> None:
        """End every worker: idle ones are told to exit, busy ones (which a stopping target left)
        killed, spares still starting cancelled; each reaped."""
        spares, self._spares = self._spares, []
        for spare in spares:
            spare.cancel()
        started = await asyncio.gather(*spares, return_exceptions=True)  # cancelled ones end themselves
        idle, busy = self._idle, list(self._busy)
        self._idle, self._busy = [], set()
        for worker in busy:
            worker.kill()
        await asyncio.gather(
            *(worker.end() for worker in started if isinstance(worker, Worker)),
            *(worker.end(CLOSE_GRACE) for worker in idle),
            *(worker.end() for worker in busy),
        )


def _apprise_level() -> int:
    """The level below which the gateway's logging drops Apprise's lines: a worker sends none below."""
    return logging.getLogger("apprise").getEffectiveLevel()
