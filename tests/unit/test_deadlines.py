"""Many deadlines on one timer: each key is due once, at its time, unless discarded or moved."""

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elicitation_gateway import deadlines
from elicitation_gateway.deadlines import Deadlines


class FakeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when the test moves it."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0

    def time(self) -> float:
        return self.now


def run(coroutine_function):
    loop = FakeLoop()
    try:
        return loop.run_until_complete(coroutine_function(loop))
    finally:
        loop.close()


async def advance(loop: FakeLoop, seconds: float) -> None:
    """Move the clock and let every timer that is due fire."""
    loop.now += seconds
    for _ in range(3):
        await asyncio.sleep(0)


def test_each_key_is_due_once_at_its_time():
    async def scenario(loop: FakeLoop) -> list[str]:
        fired: list[str] = []
        due = Deadlines(fired.append)
        due.set("b", 2)
        due.set("a", 1)
        due.set("c", 3)
        await advance(loop, 0.5)
        assert fired == []
        await advance(loop, 0.5)
        assert fired == ["a"]
        await advance(loop, 5)
        assert "a" not in due
        assert len(due) == 0
        return fired

    assert run(scenario) == ["a", "b", "c"]


def test_a_discarded_key_is_never_due_and_a_key_set_again_is_due_at_its_new_time():
    async def scenario(loop: FakeLoop) -> list[str]:
        fired: list[str] = []
        due = Deadlines(fired.append)
        due.set("gone", 1)
        due.set("moved", 1)
        due.set("kept", 2)
        due.discard("gone")
        due.discard("never set")
        due.set("moved", 3)
        await advance(loop, 2)
        assert fired == ["kept"]
        assert "moved" in due
        assert "gone" not in due
        await advance(loop, 1)
        return fired

    assert run(scenario) == ["kept", "moved"]


def test_a_delay_that_passed_is_due_on_the_next_turn():
    async def scenario(loop: FakeLoop) -> list[str]:
        fired: list[str] = []
        due = Deadlines(fired.append)
        due.set("late", -5)
        await advance(loop, 0)
        return fired

    assert run(scenario) == ["late"]


def test_clear_cancels_everything():
    async def scenario(loop: FakeLoop) -> list[str]:
        fired: list[str] = []
        due = Deadlines(fired.append)
        due.set("a", 1)
        due.clear()
        await advance(loop, 5)
        return fired

    assert run(scenario) == []


def test_a_failing_callback_does_not_keep_the_others_from_their_time(caplog):
    async def scenario(loop: FakeLoop) -> list[str]:
        fired: list[str] = []

        def on_due(key: str) -> None:
            fired.append(key)
            if key == "bad":
                raise RuntimeError("boom")

        due = Deadlines(on_due)
        due.set("bad", 1)
        due.set("good", 1)
        due.set("later", 2)
        await advance(loop, 1)
        await advance(loop, 1)
        return fired

    assert sorted(run(scenario)) == ["bad", "good", "later"]
    assert "callback failed for bad" in caplog.text


def test_discarded_entries_do_not_pile_up():
    """Most questions are answered long before they time out: the heap follows the live keys."""

    async def scenario(loop: FakeLoop) -> None:
        due = Deadlines(lambda key: None)
        for n in range(10_000):
            due.set(f"k{n}", 600)
            due.discard(f"k{n}")
        assert len(due._heap) <= deadlines.COMPACT_ABOVE + 1
        for n in range(1_000):
            due.set(f"live{n}", 600)
        for n in range(10_000):
            due.set(f"k{n}", 600)
            due.discard(f"k{n}")
        assert len(due._heap) <= 2 * len(due) + 1

    run(scenario)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["set", "discard", "advance"]),
            st.integers(0, 5),  # key
            st.integers(-2, 10),  # delay, or time to advance
        ),
        max_size=60,
    )
)
def test_due_keys_match_a_plain_model(operations):
    """Against a dict of key -> due time: every key fires exactly when the model says, once."""

    async def scenario(loop: FakeLoop) -> None:
        fired: list[tuple[float, str]] = []
        due = Deadlines(lambda key: fired.append((loop.now, key)))
        model: dict[str, float] = {}
        expected: list[tuple[float, str]] = []
        for operation, key_number, amount in operations:
            key = f"k{key_number}"
            if operation == "set":
                due.set(key, amount)
                model[key] = loop.now + max(amount, 0)
            elif operation == "discard":
                due.discard(key)
                model.pop(key, None)
            else:
                # Step a second at a time, so each key fires at the step where its time is reached.
                for _ in range(max(amount, 0)):
                    await advance(loop, 1)
                    for name, when in sorted(model.items(), key=lambda item: (item[1], item[0])):
                        if when <= loop.now:
                            expected.append((loop.now, name))
                            del model[name]
            assert set(model) == {k for k in (f"k{n}" for n in range(6)) if k in due}
        await advance(loop, 0)
        for name, when in list(model.items()):
            if when <= loop.now:
                expected.append((loop.now, name))
                del model[name]
        assert sorted(fired) == sorted(expected)

    run(scenario)


@pytest.mark.parametrize("early", [0.0005, deadlines.EARLY])
def test_a_timer_that_fires_a_little_early_still_counts(early):
    async def scenario(loop: FakeLoop) -> list[str]:
        fired: list[str] = []
        due = Deadlines(fired.append)
        due.set("a", 1)
        loop.now += 1 - early
        due._fire()
        return fired

    assert run(scenario) == ["a"]
