"""The replay history is bounded by bytes as well as by count (in memory and in a SQLite file): big
questions cannot keep hundreds of megabytes of events after they are finished."""

from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record


def big_record(request_id: str) -> Record:
    """A question whose JSON is about 100 KB."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "enum": [f"{i:0>90}" for i in range(1000)]}},
    }
    form = build_form(schema)
    request = QuestionRequest.new(request_id, "ses_1", list(form.questions), None)
    return Record.new(request, form, "", None, 0, 10**10, "cancel")


async def test_the_oldest_events_go_once_they_hold_more_than_the_budget(make_process_store):
    store = await make_process_store(history_size=1000, history_bytes=1_000_000)
    for number in range(20):
        await store.add(big_record(f"que_{number:03}"))
        await store.finish(f"que_{number:03}", "cancelled", {"action": "cancel"})
    assert 0 < len(store._index._history) < 40
    assert store._index._history_held <= 1_000_000
    assert store._index._history_held == sum(size for _, size in store._index._history)  # as kept
    kept = [event.id for event, _ in store._index._history]

    # A client that last saw a kept event replays from there; one that saw a dropped event is told of
    # the pending questions again (none here), as after any gap.
    replay = await store.subscribe(kept[0])
    assert [event.id for event in replay.backlog] == kept[1:]
    replay.close()
    await store.add(big_record("que_new"))
    fresh = await store.subscribe("evt_dropped_long_ago")
    assert [event.properties["id"] for event in fresh.backlog] == ["que_new"]
    fresh.close()


async def test_small_events_are_bounded_by_count_as_before(make_process_store):
    store = await make_process_store(history_size=5)
    for number in range(10):
        await store.add(big_record(f"que_{number}"))
    assert len(store._index._history) == 5
