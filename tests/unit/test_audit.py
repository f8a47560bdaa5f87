"""The audit trail's hash chain: a trail verifies as written, and any line removed, edited, inserted or
moved is found, named by its line."""

import asyncio
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitation_gateway.audit import (
    EVENTS,
    FIELDS,
    GENESIS,
    VIAS,
    _digest,
    next_entry,
    parse_line,
    parse_since,
    rfc3339,
    verify,
)
from elicitation_gateway.gateway.auditing import BATCH, Auditing, event_of
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores.audit_trail import MemoryAuditTrail
from elicitation_gateway.stores.base import StoreUnavailable
from elicitation_gateway.stores.memory import MemoryStore

MOMENT = datetime(2026, 12, 6, 9, 30, 15, 123456, tzinfo=UTC)

entries = st.lists(
    st.tuples(
        st.sampled_from(EVENTS),
        st.sampled_from(VIAS),
        st.one_of(st.none(), st.text(max_size=10)),
        st.one_of(st.none(), st.lists(st.lists(st.text(max_size=10), max_size=3), max_size=3)),
    ),
    min_size=3,
    max_size=12,
)


def trail(specs: list[tuple[str, str, str | None, list[list[str]] | None]]) -> list[bytes]:
    lines, previous = [], None
    for n, (event, via, who, answers) in enumerate(specs):
        previous = next_entry(
            previous, event=event, question=f"que_{n}", via=via, who=who, answers=answers, at=MOMENT
        )
        lines.append(previous.line())
    return lines


def test_an_entry_as_a_dict_has_every_field_in_order():
    entry = next_entry(None, event="asked", question="que_1", via="tool", at=MOMENT)
    assert list(entry.as_dict().items()) == [(name, getattr(entry, name)) for name in FIELDS]


def test_an_entry_says_when_what_who_and_through_what():
    entry = next_entry(
        None, event="replied", question="que_1", via="page", who="alice", answers=[["Yes"]], at=MOMENT
    )
    fields = json.loads(entry.line())
    assert fields == {
        "seq": 1,
        "at": "2026-12-06T09:30:15.123Z",
        "event": "replied",
        "question": "que_1",
        "who": "alice",
        "via": "page",
        "answers": [["Yes"]],
        "prev": GENESIS,
        "hash": entry.hash,
    }
    assert entry.line().endswith(b"\n")
    assert entry.line().count(b"\n") == 1


@pytest.mark.parametrize(("event", "via"), [("answered", "page"), ("replied", "email")])
def test_an_unknown_event_or_way_is_refused(event, via):
    with pytest.raises(ValueError, match="is not"):
        next_entry(None, event=event, question="que_1", via=via)


@given(entries)
def test_a_trail_verifies_as_written(specs):
    lines = trail(specs)
    verdict = verify(lines)
    assert verdict.ok, verdict.problem
    assert verdict.entries == len(lines)
    assert verdict.last_hash == json.loads(lines[-1])["hash"]


@given(entries, st.data())
def test_a_removed_line_is_found_unless_it_is_the_first_or_last(specs, data):
    lines = trail(specs)
    at = data.draw(st.integers(1, len(lines) - 2))
    verdict = verify(lines[:at] + lines[at + 1 :])
    assert not verdict.ok
    assert f"line {at + 1}" in verdict.problem
    assert "removed" in verdict.problem


@given(entries, st.data())
def test_an_edited_line_is_found(specs, data):
    lines = trail(specs)
    at = data.draw(st.integers(0, len(lines) - 1))
    fields = json.loads(lines[at])
    field = data.draw(st.sampled_from(["at", "event", "question", "who", "via", "answers", "seq"]))
    fields[field] = {"at": "2026-12-06T09:30:16.000Z", "seq": fields["seq"] + 7}.get(field, "forged")
    lines[at] = json.dumps(fields).encode() + b"\n"
    verdict = verify(lines)
    assert not verdict.ok
    assert f"line {at + 1}" in verdict.problem


@given(entries, st.data())
def test_swapped_lines_are_found(specs, data):
    lines = trail(specs)
    at = data.draw(st.integers(0, len(lines) - 2))
    lines[at], lines[at + 1] = lines[at + 1], lines[at]
    assert not verify(lines).ok


def test_a_line_rehashed_after_an_edit_still_breaks_the_chain_after_it():
    lines = trail(
        [("asked", "tool", None, None), ("replied", "page", "alice", [["No"]]), ("asked", "tool", None, None)]
    )
    forged = next_entry(
        None, event="replied", question="que_1", via="page", who="mallory", answers=[["Yes"]], at=MOMENT
    )
    fields = {**forged.as_dict(), "seq": 2, "prev": json.loads(lines[0])["hash"]}
    fields["hash"] = _digest(fields)
    lines[1] = json.dumps(fields).encode()
    verdict = verify(lines)
    assert "line 3" in verdict.problem


@pytest.mark.parametrize(
    ("line", "says"),
    [(b"not json", "is not JSON"), (b'{"seq": 1}', "is not an audit entry"), (b"[1]", "is not an")],
)
def test_a_line_that_is_no_entry_is_named(line, says):
    lines = trail([("asked", "tool", None, None)])
    verdict = verify([*lines, line])
    assert says in verdict.problem
    assert "line 2" in verdict.problem


def test_a_trail_cut_by_retention_verifies_from_where_it_starts():
    lines = trail([("asked", "tool", None, None)] * 5)
    assert verify(lines[2:]).ok
    assert verify([]).ok


@given(st.datetimes(timezones=st.timezones()))
def test_since_is_written_as_entries_write_at(moment):
    written = parse_since(moment.isoformat())
    assert written == rfc3339(moment)
    entry = next_entry(None, event="asked", question="que_1", via="tool", at=moment)
    assert entry.at == written  # the same moment compares equal as text


@pytest.mark.parametrize(
    ("text", "says"),
    [("yesterday", "not an RFC 3339 time"), ("2026-12-06T05:00:00", "no time zone"), ("", "not an RFC")],
)
def test_a_since_that_is_no_time_says_what_it_expects(text, says):
    with pytest.raises(ValueError, match=says):
        parse_since(text)


def test_a_date_alone_is_its_midnight_utc():
    assert parse_since("2026-12-06") == "2026-12-06T00:00:00.000Z"


@given(st.lists(st.sampled_from(EVENTS), min_size=1, max_size=5))
def test_a_line_read_back_is_the_entry(kinds):
    previous = None
    for kind in kinds:
        previous = next_entry(previous, event=kind, question="que_1", via="page", who="ann", answers=[["ä"]])
        assert parse_line(previous.line()) == previous


def test_a_line_that_is_no_entry_is_refused():
    with pytest.raises(ValueError, match="not an audit entry"):
        parse_line(b'{"seq": 1}')


@pytest.mark.parametrize(
    ("reason", "event", "via"),
    [
        ("answered", "replied", "api"),
        ("answered no", "replied", "api"),
        ("rejected", "rejected", "api"),
        ("timed out", "expired", "gateway"),
        ("timed out, defaults", "expired", "gateway"),
        ("withdrawn", "withdrawn", "tool"),
        ("nobody came back for it", "withdrawn", "tool"),
        ("its tool's replica is gone", "withdrawn", "tool"),
        ("shutdown", "withdrawn", "gateway"),
        ("its ask failed", "withdrawn", "gateway"),
    ],
)
def test_each_finish_is_an_audit_event(reason, event, via):
    assert event_of(reason) == (event, via)


@pytest.mark.parametrize(
    ("value", "seconds"), [("30d", 30 * 86400), ("3600", 3600), (0, 0), ("1.5d", 129600)]
)
def test_the_retention_is_seconds_or_days(value, seconds):
    assert Settings(audit_retention=value).audit_retention == seconds


def test_a_retention_that_is_neither_is_refused():
    with pytest.raises(ValueError, match="audit_retention"):
        Settings(audit_retention="soon")


class CountingTrail(MemoryAuditTrail):
    """A trail whose first append waits until let go, and that counts its appends."""

    def __init__(self) -> None:
        super().__init__()
        self.appends: list[int] = []
        self.go = asyncio.Event()

    async def append_many(self, batch):
        self.appends.append(len(batch))
        await self.go.wait()
        return await super().append_many(batch)


class DownTrail(MemoryAuditTrail):
    async def append_many(self, batch):
        raise StoreUnavailable("the question store (Redis) is unreachable")


async def test_entries_made_while_the_trail_is_written_go_together_in_order():
    store = MemoryStore()
    trail = CountingTrail()
    store.audit_trail = trail  # type: ignore[misc]
    auditing = Auditing(store, Metrics(), retention=0)
    auditing.record("asked", "que_0", via="tool")
    await asyncio.sleep(0)  # the writer takes it, and waits on the trail
    for number in range(1, 300):
        auditing.record("asked", f"que_{number}", via="tool")
    trail.go.set()
    await auditing.flush()
    assert trail.appends == [1, 299]  # the first alone, the rest made meanwhile in one write
    kept = await trail.entries()
    assert [entry.question for entry in kept] == [f"que_{number}" for number in range(300)]
    assert verify([entry.line() for entry in kept]).ok


async def test_a_write_takes_at_most_a_batch_and_flush_waits_for_every_one():
    store = MemoryStore()
    trail = CountingTrail()
    trail.go.set()
    store.audit_trail = trail  # type: ignore[misc]
    auditing = Auditing(store, Metrics(), retention=0)
    for number in range(2 * BATCH + 1):  # all made before the writer first runs
        auditing.record("asked", f"que_{number}", via="tool")
    await auditing.flush()
    assert trail.appends == [BATCH, BATCH, 1]
    assert [entry.question for entry in await trail.entries()] == [f"que_{n}" for n in range(2 * BATCH + 1)]
    auditing.record("asked", "que_later", via="tool")  # the idle writer wakes for it
    await asyncio.wait_for(auditing.flush(), 10)
    assert trail.appends == [BATCH, BATCH, 1, 1]
    await auditing.stop()


async def test_entries_the_store_cannot_keep_are_each_logged_and_flush_returns(caplog):
    store = MemoryStore()
    store.audit_trail = DownTrail()  # type: ignore[misc]
    auditing = Auditing(store, Metrics(), retention=0)
    auditing.record("asked", "que_a", via="tool")
    auditing.record("replied", "que_a", via="page", who="alice", answers=[["yes"]])
    await asyncio.wait_for(auditing.flush(), 10)
    said = [r.getMessage() for r in caplog.records if r.name == "elicitation_gateway.gateway.auditing"]
    assert said == [
        "audit entry asked of que_a (via tool) not kept: the question store (Redis) is unreachable",
        "audit entry replied of que_a (via page) not kept: the question store (Redis) is unreachable",
    ]
