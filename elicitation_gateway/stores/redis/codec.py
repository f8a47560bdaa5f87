"""What a stream entry holds, and the event ids derived from entry ids.

An entry's ``e`` is its event as JSON, without the id: that comes from the entry's own id
(:func:`event_id_of`), so every replica sends the same ids, in the same order, and a
``Last-Event-ID`` from any replica leads back to the same place in the stream.
"""

import json
import logging

from elicitation_gateway import events, ids

logger = logging.getLogger(__name__)

_SEQ_DIGITS = 14
_SEQ_LIMIT = 2**64


def event_id_of(stream_id: str) -> str:
    """``<ms>-<seq>`` as an OpenCode event id: ``evt_`` + 12 hex digits of ms + 14 base62 of seq.

    The mapping is one-to-one and keeps the order, so ids sort as the stream does.
    """
    millis, _, seq_text = stream_id.partition("-")
    seq, digits = int(seq_text), ""
    while seq:  # a few digits at most: the sequence counts entries within one millisecond
        seq, digit = divmod(seq, 62)
        digits = ids.BASE62[digit] + digits
    return f"evt_{int(millis):012x}{digits.rjust(_SEQ_DIGITS, ids.BASE62[0])}"


def stream_id_of(event_id: str) -> str | None:
    """The stream id an event id was derived from; None when it cannot have come from a stream."""
    if not event_id.startswith("evt_") or not ids.ID_PATTERN.match(event_id):
        return None
    seq = 0
    for char in event_id[16:]:
        seq = seq * 62 + ids.BASE62.index(char)
    if seq >= _SEQ_LIMIT:
        return None
    return f"{int(event_id[4:16], 16)}-{seq}"


StreamOrder = tuple[int, int]


def stream_order(stream_id: str) -> StreamOrder:
    millis, seq = stream_id.split("-")
    return int(millis), int(seq)


def encode(event: events.Event) -> str:
    """What the stream keeps of an event: its id comes from the entry."""
    return entry(event.type, event.properties_json(), event.directory)


def entry(event_type: str, properties_json: str, directory: str | None) -> str:
    return f'{{"type":{events.to_json(event_type)},"properties":{properties_json}{_entry_tail(directory)}'


def _entry_tail(directory: str | None) -> str:
    return ',"directory":' + ("null" if directory is None else events.to_json(directory)) + "}"


def decode(stream_id: str, fields: dict[str, str]) -> events.Event | None:
    """The event an entry holds; None (and a warning) for an entry that is not one.

    An entry :func:`encode` made holds the properties' JSON as the event's frames splice it: taken
    as it is, so that no replica encodes it again."""
    try:
        entry = fields["e"]
        body = json.loads(entry)
        event_type, properties, directory = body["type"], body["properties"], body.get("directory")
        head = f'{{"type":{events.to_json(event_type)},"properties":'
        tail = _entry_tail(directory)
    except (KeyError, TypeError, ValueError):
        properties = None
    if not isinstance(properties, dict):
        logger.warning("skipping stream entry %s: not an event", stream_id)
        return None
    ours = len(body) == 3 and entry.startswith(head) and entry.endswith(tail)
    return events.Event(
        event_type,
        properties,
        directory=directory,
        replayable=True,
        id=event_id_of(stream_id),
        properties_json=entry[len(head) : -len(tail)] if ours else None,
    )
