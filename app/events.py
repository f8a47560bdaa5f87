"""The events answerers see, and their Server-Sent Events frames.

An event is encoded once, when a stream first needs it, and the same bytes go to every subscriber.
"""

import json
from typing import Any

from sse_starlette import ServerSentEvent

from app import ids

SEPARATOR = "\n"

CONNECTED = "server.connected"
HEARTBEAT = "server.heartbeat"
ASKED = "question.asked"
REPLIED = "question.replied"
REJECTED = "question.rejected"


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Event:
    """One event. ``replayable`` ones (``question.*`` from the history) carry an ``id:`` line."""

    __slots__ = ("_frames", "directory", "id", "properties", "replayable", "type")

    def __init__(
        self,
        type: str,
        properties: dict[str, Any],
        *,
        directory: str | None = None,
        replayable: bool = False,
        id: str | None = None,
    ) -> None:
        self.id = id or ids.event_id()
        self.type = type
        self.properties = properties
        self.directory = directory
        self.replayable = replayable
        self._frames: dict[str | None, bytes] = {}

    def payload(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "properties": self.properties}

    def visible_in(self, directory: str | None) -> bool:
        """``?directory=`` keeps that directory's questions and those that name none."""
        return directory is None or self.directory is None or self.directory == directory

    def frame(self) -> bytes:
        """The frame for ``/event``."""
        return self._frame(None, lambda: self.payload())

    def global_frame(self, default_directory: str) -> bytes:
        """The frame for ``/global/event``: wrapped with the question's (or the default) directory."""

        def wrapped() -> dict[str, Any]:
            if self.type.startswith("server."):
                return {"payload": self.payload()}
            return {"directory": self.directory or default_directory, "payload": self.payload()}

        return self._frame(default_directory, wrapped)

    def _frame(self, key: str | None, body: Any) -> bytes:
        frame = self._frames.get(key)
        if frame is None:
            frame = ServerSentEvent(
                data=to_json(body()), id=self.id if self.replayable else None, sep=SEPARATOR
            ).encode()
            self._frames[key] = frame
        return frame


def connected() -> Event:
    return Event(CONNECTED, {})


def heartbeat() -> Event:
    return Event(HEARTBEAT, {})


def asked(request: dict[str, Any], directory: str | None, *, replayable: bool = True) -> Event:
    return Event(ASKED, request, directory=directory, replayable=replayable)


def replied(session_id: str, request_id: str, answers: list[list[str]], directory: str | None) -> Event:
    properties = {"sessionID": session_id, "requestID": request_id, "answers": answers}
    return Event(REPLIED, properties, directory=directory, replayable=True)


def rejected(session_id: str, request_id: str, directory: str | None) -> Event:
    properties = {"sessionID": session_id, "requestID": request_id}
    return Event(REJECTED, properties, directory=directory, replayable=True)
