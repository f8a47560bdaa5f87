"""The events answerers see, and their Server-Sent Events frames.

An event is encoded once, when a stream first needs it, and the same bytes go to every subscriber.
"""

import json
from collections.abc import Callable
from typing import Any

from elicitation_gateway import ids
from elicitation_gateway.encoding import dumps, sse_frame

CONNECTED = "server.connected"
HEARTBEAT = "server.heartbeat"
ASKED = "question.asked"
REPLIED = "question.replied"
REJECTED = "question.rejected"


to_json = dumps
_TYPE_JSON = {kind: dumps(kind) for kind in (CONNECTED, HEARTBEAT, ASKED, REPLIED, REJECTED)}
"""Each type's JSON, encoded once for all its events' frames."""


class Event:
    """One event. ``replayable`` ones (``question.*`` from the history) carry an ``id:`` line."""

    __slots__ = ("_frames", "_id", "_properties", "_properties_json", "directory", "replayable", "type")

    def __init__(
        self,
        type: str,
        properties: dict[str, Any] | None,
        *,
        directory: str | None = None,
        replayable: bool = False,
        id: str | None = None,
        properties_json: str | None = None,
    ) -> None:
        self._id = id or (ids.event_id() if replayable else None)
        """Made when first needed for an event not replayed (a pending question's announcement, held
        while it is pending: most are never sent)."""
        self.type = type
        self._properties = properties
        self.directory = directory
        self.replayable = replayable
        self._properties_json = properties_json
        """``properties`` already encoded (a pending question's, encoded once): spliced into frames as
        is, and decoded only if someone asks for ``properties``."""
        self._frames: dict[str | None, bytes] | None = None  # made with the first frame

    @property
    def id(self) -> str:
        if self._id is None:
            self._id = ids.event_id()
        return self._id

    @property
    def properties(self) -> dict[str, Any]:
        if self._properties is None:
            self._properties = json.loads(self._properties_json or "{}")
        return self._properties

    def payload(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "properties": self.properties}

    def visible_in(self, directory: str | None) -> bool:
        """``?directory=`` keeps that directory's questions and those that name none."""
        return directory is None or self.directory is None or self.directory == directory

    def frame(self) -> bytes:
        """The frame for ``/event``."""
        return self._frame(None, self._payload_json)

    def global_frame(self, default_directory: str) -> bytes:
        """The frame for ``/global/event``: wrapped with the question's (or the default) directory."""

        def wrapped() -> str:
            if self.type.startswith("server."):
                return '{"payload":' + self._payload_json() + "}"
            directory = to_json(self.directory or default_directory)
            return '{"directory":' + directory + ',"payload":' + self._payload_json() + "}"

        return self._frame(default_directory, wrapped)

    def properties_json(self) -> str:
        """``properties`` encoded: as given when it was, so a pending question is never re-encoded."""
        if self._properties_json is None:
            self._properties_json = to_json(self._properties)
        return self._properties_json

    def _payload_json(self) -> str:
        head = '{"id":' + to_json(self.id) + ',"type":' + (_TYPE_JSON.get(self.type) or to_json(self.type))
        return head + ',"properties":' + self.properties_json() + "}"

    def _frame(self, key: str | None, data: Callable[[], str]) -> bytes:
        frames = self._frames
        if frames is None:
            frames = self._frames = {}
        frame = frames.get(key)
        if frame is None:
            frame = sse_frame(data(), self.id if self.replayable else None)
            frames[key] = frame
        return frame


def connected() -> Event:
    return Event(CONNECTED, {})


def heartbeat() -> Event:
    return Event(HEARTBEAT, {})


def asked(
    request: dict[str, Any] | None,
    directory: str | None,
    *,
    replayable: bool = True,
    request_json: str | None = None,
) -> Event:
    return Event(ASKED, request, directory=directory, replayable=replayable, properties_json=request_json)


def replied(
    session_id: str,
    request_id: str,
    answers: list[list[str]],
    directory: str | None,
    answered_by: str | None = None,
    to: list[str] | None = None,
) -> Event:
    """``answered_by``: the person who answered, on a gateway with people (``answeredBy``); ``to``:
    whom the question was for, when it was addressed."""
    properties: dict[str, Any] = {"sessionID": session_id, "requestID": request_id, "answers": answers}
    if answered_by is not None:
        properties["answeredBy"] = answered_by
    if to:
        properties["to"] = to
    return Event(REPLIED, properties, directory=directory, replayable=True)


def rejected(
    session_id: str,
    request_id: str,
    directory: str | None,
    answered_by: str | None = None,
    to: list[str] | None = None,
) -> Event:
    properties: dict[str, Any] = {"sessionID": session_id, "requestID": request_id}
    if answered_by is not None:
        properties["answeredBy"] = answered_by
    if to:
        properties["to"] = to
    return Event(REJECTED, properties, directory=directory, replayable=True)
