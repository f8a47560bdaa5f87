"""The Redis store's codec, without a Redis: stream ids <-> event ids, stream order, stream entries.

Every replica derives an event's id from its stream entry's id, so the mapping must be one-to-one
(a ``Last-Event-ID`` leads back to its entry), keep the stream's order (clients sort by id), and turn
ids that no stream made into None (so they get a fresh announcement, not a wrong replay). An entry
holds an event without its id; one that is not an event is skipped, never fatal to the read loop.
"""

import json
import logging
import random

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from elicitation_gateway import events, ids
from elicitation_gateway.stores.redis.codec import decode, encode, event_id_of, stream_id_of, stream_order

MILLIS = st.integers(0, 2**48 - 1)
"""Stream ids' milliseconds: 12 hex digits last until the year 10889."""
SEQ = st.integers(0, 2**64 - 1)
"""Redis sequence numbers are 64-bit."""
STREAM_IDS = st.builds("{}-{}".format, MILLIS, SEQ)


# ---------------------------------------------------------------------------------------------------
# Stream ids <-> event ids


@given(STREAM_IDS)
@example("0-0")
@example(f"{2**48 - 1}-{2**64 - 1}")
def test_a_stream_id_survives_the_round_trip(stream_id: str):
    event_id = event_id_of(stream_id)
    assert ids.ID_PATTERN.match(event_id), event_id
    assert event_id.startswith("evt_")
    assert stream_id_of(event_id) == stream_id


def test_known_ids_map_as_documented():
    """``evt_`` + the milliseconds in 12 hex digits + the sequence in 14 base62 digits."""
    assert event_id_of("0-0") == "evt_" + "0" * 12 + "0" * 14
    assert event_id_of("1700000000000-0") == "evt_018bcfe56800" + "0" * 14
    assert event_id_of("1700000000000-61") == "evt_018bcfe56800" + "0" * 13 + "z"
    assert event_id_of("1700000000000-62") == "evt_018bcfe56800" + "0" * 12 + "10"
    assert stream_id_of("evt_018bcfe56800" + "0" * 12 + "10") == "1700000000000-62"


@given(st.text(alphabet="evt_0123456789abcdefABCDEFxyz-", max_size=30) | st.text(max_size=30))
@example("evt_" + "0" * 26)
def test_any_string_maps_to_none_or_back_to_itself(text: str):
    """stream_id_of accepts exactly the ids event_id_of makes: nothing else is read as a stream id."""
    stream_id = stream_id_of(text)
    if stream_id is not None:
        assert event_id_of(stream_id) == text


@given(st.from_regex(r"\Aevt_[0-9a-f]{12}[0-9A-Za-z]{14}\Z"))
def test_every_id_of_the_event_shape_maps_unless_its_sequence_is_beyond_64_bits(event_id: str):
    seq = 0
    for char in event_id[16:]:
        seq = seq * 62 + ids.BASE62.index(char)
    stream_id = stream_id_of(event_id)
    assert (stream_id is None) == (seq >= 2**64)
    if stream_id is not None:
        assert stream_id == f"{int(event_id[4:16], 16)}-{seq}"


SMALL = "0193a1c2b3d4" + "0" * 13 + "1"
"""Milliseconds and a small sequence: only the shape around it can make such an id unusable."""


@pytest.mark.parametrize(
    "event_id",
    [
        "",
        "evt_",
        "evt_1",
        "evt_" + SMALL[:-1],  # one character short
        "evt_" + SMALL + "0",  # one too many
        "que_" + SMALL,  # a question id
        "ses_" + SMALL,  # a session id
        "EVT_" + SMALL,
        "evt_" + SMALL[:12].upper() + SMALL[12:],  # upper-case hex
        "evt_" + SMALL[:-2] + "-1",  # not base62
        "evt_0193a1c2b3d4zzzzzzzzzzzzzz",  # a sequence beyond 64 bits
        "evt_" + SMALL + "\n",  # a final newline
        " evt_" + SMALL,
        "1700000000000-1",  # a stream id, not an event id
    ],
)
def test_ids_no_stream_could_have_made_map_to_none(event_id: str):
    assert stream_id_of(event_id) is None


def test_the_largest_sequence_maps_and_the_next_does_not():
    largest = event_id_of(f"5-{2**64 - 1}")
    assert stream_id_of(largest) == f"5-{2**64 - 1}"
    seq, digits = 2**64, []
    for _ in range(14):
        seq, digit = divmod(seq, 62)
        digits.append(ids.BASE62[digit])
    beyond = largest[:16] + "".join(reversed(digits))
    assert beyond > largest
    assert stream_id_of(beyond) is None


# ---------------------------------------------------------------------------------------------------
# Order


@given(STREAM_IDS, STREAM_IDS)
def test_event_ids_sort_as_the_stream_orders_its_entries(first: str, second: str):
    """Redis orders entries by milliseconds, then sequence, as numbers: so do the event ids, as strings."""
    first_order, second_order = stream_order(first), stream_order(second)
    assert first_order == tuple(int(part) for part in first.split("-"))
    assert (event_id_of(first) < event_id_of(second)) == (first_order < second_order)
    assert (event_id_of(first) == event_id_of(second)) == (first == second)


@given(st.lists(STREAM_IDS, min_size=2, max_size=20, unique=True), st.randoms())
def test_sorting_event_ids_sorts_their_entries(stream_ids: list[str], shuffle: random.Random):
    in_stream_order = sorted(stream_ids, key=stream_order)
    shuffled = list(stream_ids)
    shuffle.shuffle(shuffled)
    assert [stream_id_of(e) for e in sorted(map(event_id_of, shuffled))] == in_stream_order


@pytest.mark.parametrize(
    ("earlier", "later"),
    [("1-9", "1-10"), ("9-99", "10-0"), ("1700000000000-5", "1700000000001-0"), ("0-0", "0-1")],
)
def test_stream_order_compares_numbers_not_strings(earlier: str, later: str):
    assert stream_order(earlier) < stream_order(later)
    assert event_id_of(earlier) < event_id_of(later)


# ---------------------------------------------------------------------------------------------------
# Stream entries


EVENTS = [
    events.replied("ses_1", "que_1", [["Yes"], ["EU", "US"], []], "/srv/project"),
    events.rejected("ses_1", "que_2", None),
    events.asked({"id": "que_3", "sessionID": "ses_1", "questions": []}, "/répertoire/ünïcode ✓"),
    events.asked(None, None, request_json='{"id":"que_4","sessionID":"ses_2","questions":[]}'),
]


@pytest.mark.parametrize("event", EVENTS, ids=["replied", "rejected", "asked-unicode", "asked-pre-encoded"])
def test_an_entry_decodes_to_its_event_with_the_entry_id(event: events.Event):
    entry = encode(event)
    decoded = decode("1700000000000-7", {"e": entry})
    assert decoded is not None
    assert (decoded.type, decoded.properties, decoded.directory) == (
        event.type,
        event.properties,
        event.directory,
    )
    assert decoded.id == event_id_of("1700000000000-7")  # from the entry, not the event it was made from
    assert decoded.replayable is True


def test_an_entry_keeps_no_id_and_splices_encoded_properties_as_they_are():
    """The same event written by two replicas differs only by its entry's id; a pending question's
    request, encoded once, is written as is."""
    event = EVENTS[3]
    entry = json.loads(encode(event))
    assert set(entry) == {"type", "properties", "directory"}
    assert '"properties":{"id":"que_4","sessionID":"ses_2","questions":[]}' in encode(event)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"something": "else"},
        {"e": "not json"},
        {"e": "null"},
        {"e": "[]"},
        {"e": '"a string"'},
        {"e": '{"properties": {}}'},
        {"e": '{"type": "question.asked"}'},
    ],
    ids=["empty", "other-field", "not-json", "null", "list", "string", "no-type", "no-properties"],
)
def test_an_entry_that_is_not_an_event_decodes_to_none_with_a_warning(fields: dict, caplog):
    with caplog.at_level(logging.WARNING, logger="elicitation_gateway.stores.redis.codec"):
        assert decode("1700000000000-3", fields) is None
    assert "skipping stream entry 1700000000000-3: not an event" in caplog.text
