"""Apprise plugins of the tests' own, registered on import: the notifier's worker processes import this
module (``Notifier(worker_imports=...)``), and so does the test, whose process checks the URLs.

They run in a worker process, so what they do is kept in files of the directory named by
``GATEWAY_TEST_PLUGINS`` (set before the workers start: a spawned worker inherits the environment):

- ``gwrecord://`` appends ``{"title", "body", "pid"}`` to ``recorded.jsonl``; while ``failures`` holds a
  number above 0, it takes one off and raises instead.
- ``gwstuck://`` appends its pid to ``stuck.pids`` and sleeps for an hour: only a kill ends it.
- ``gwgate://`` waits until the file ``open`` exists, then records as ``gwrecord://`` does.
- ``gwonce://`` hangs as ``gwstuck://`` on its first call (writing ``once.pid``), records on every later.
- ``gwlate://`` takes 1.5 s, then records as ``gwrecord://`` does: past a shorter deadline, too late.
- ``gwsocket://`` reads, with no timeout, from the loopback port in ``listener``: only a kill ends it.
- ``gwquiet://`` logs a WARNING and a DEBUG line through Apprise's logger, and reports no delivery.
"""

import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from apprise.decorators import notify as apprise_plugin

HOUR = 3600


def state() -> Path:
    return Path(os.environ["GATEWAY_TEST_PLUGINS"])


def _append(name: str, line: str) -> None:
    with (state() / name).open("a") as file:
        file.write(line + "\n")


def _record(title: str, body: str) -> bool:
    failures = state() / "failures"
    left = int(failures.read_text()) if failures.exists() else 0
    if left:
        failures.write_text(str(left - 1))
        raise RuntimeError("a plugin's own bug")
    _append("recorded.jsonl", json.dumps({"title": title, "body": body, "pid": os.getpid()}))
    return True


@apprise_plugin(on="gwrecord")
def record(body: str, title: str, *args: Any, **kwargs: Any) -> bool:
    return _record(title, body)


@apprise_plugin(on="gwstuck")
def stuck(*args: Any, **kwargs: Any) -> bool:
    _append("stuck.pids", str(os.getpid()))
    time.sleep(HOUR)
    return True


@apprise_plugin(on="gwgate")
def gate(body: str, title: str, *args: Any, **kwargs: Any) -> bool:
    while not (state() / "open").exists():
        time.sleep(0.01)
    return _record(title, body)


@apprise_plugin(on="gwonce")
def once(body: str, title: str, *args: Any, **kwargs: Any) -> bool:
    marker = state() / "once.pid"
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        time.sleep(HOUR)
    return _record(title, body)


@apprise_plugin(on="gwlate")
def late(body: str, title: str, *args: Any, **kwargs: Any) -> bool:
    _append("late.pids", str(os.getpid()))
    time.sleep(1.5)
    return _record(title, body)


@apprise_plugin(on="gwsocket")
def silent(*args: Any, **kwargs: Any) -> bool:
    port = int((state() / "listener").read_text())
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.settimeout(None)  # no timeout of its own: only the end of the process ends this read
        return connection.recv(1) != b""


@apprise_plugin(on="gwquiet")
def quiet(*args: Any, **kwargs: Any) -> bool:
    logging.getLogger("apprise.custom").warning("gwquiet refused it: quota reached")
    logging.getLogger("apprise.custom").debug("gwquiet debug detail")
    return False
