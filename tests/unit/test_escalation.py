"""Escalation's pure part: ``escalate`` read and checked, and whom a question is for at a given time."""

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitation_gateway.escalation import (
    MAX_STEPS,
    Step,
    audience,
    current_to,
    due,
    names_of,
    next_at,
    parsed_escalate,
    request_now,
)
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.people import MAX_RECIPIENTS

ASKED = 1_000_000.0


def test_steps_are_read_and_ordered_by_their_time():
    steps = parsed_escalate([{"after": 600, "to": ["group:leads"]}, {"after": 60.5, "to": ["bob", "bob"]}])
    assert steps == (Step(after=60.5, to=("bob",)), Step(after=600.0, to=("group:leads",)))
    assert parsed_escalate(None) == ()
    assert parsed_escalate([]) == ()


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"after": 1, "to": ["a"]}, "must be a list of steps"),
        ([{"after": 0, "to": ["a"]}], '"escalate"[0].after must be a positive number'),
        ([{"after": -5, "to": ["a"]}], '"escalate"[0].after must be a positive number'),
        ([{"after": "600", "to": ["a"]}], '"escalate"[0].after must be a positive number'),
        ([{"after": True, "to": ["a"]}], '"escalate"[0].after must be a positive number'),
        ([{"after": math.inf, "to": ["a"]}], '"escalate"[0].after must be a positive number'),
        ([{"after": math.nan, "to": ["a"]}], '"escalate"[0].after must be a positive number'),
        ([{"after": 5, "to": []}], '"escalate"[0].to names nobody'),
        ([{"after": 5}], 'exactly "after" (seconds) and "to"'),
        ([{"after": 5, "to": ["a"], "extra": 1}], 'exactly "after" (seconds) and "to"'),
        (["a"], 'exactly "after" (seconds) and "to"'),
        ([{"after": 5, "to": "alice"}], '"escalate"[0]: "to" must be a list of names'),
        ([{"after": 5, "to": ["no one"]}], "which is no name of a person or group"),
        ([{"after": n + 1, "to": ["a"]} for n in range(MAX_STEPS + 1)], f"at most {MAX_STEPS}"),
    ],
)
def test_bad_steps_are_refused_saying_what_is_wrong(value, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        parsed_escalate(value)


STEPS = (Step(after=60, to=("bob", "group:leads")), Step(after=600, to=("carol", "alice")))


def test_the_audience_grows_as_steps_fall_due():
    assert audience(("alice",), STEPS, ASKED, ASKED) == ("alice",)
    assert audience(("alice",), STEPS, ASKED, ASKED + 59.9) == ("alice",)
    assert audience(("alice",), STEPS, ASKED, ASKED + 60) == ("alice", "bob", "group:leads")
    assert audience(("alice",), STEPS, ASKED, ASKED + 10_000) == ("alice", "bob", "group:leads", "carol")


def test_a_question_for_everyone_stays_everyones():
    assert audience((), STEPS, ASKED, ASKED + 10_000) == ()


def test_when_the_next_step_is_due():
    assert next_at(STEPS, ASKED, ASKED) == ASKED + 60
    assert next_at(STEPS, ASKED, ASKED + 60) == ASKED + 600
    assert next_at(STEPS, ASKED, ASKED + 600) is None
    assert due(STEPS, ASKED, ASKED + 599) == 1


class _Record:
    def __init__(self, to, escalate):
        self.request = QuestionRequest.new("que_1", "ses_1", [], None, to)
        self.escalate = escalate
        self.created_at = ASKED


def test_a_records_request_says_its_audience_as_it_is_now():
    record = _Record(["alice"], STEPS)
    assert request_now(record, ASKED) is record.request
    later = request_now(record, ASKED + 61)
    assert later.to == ["alice", "bob", "group:leads"]
    assert '"to":["alice","bob","group:leads"]' in later.wire_json
    assert record.request.wire_json.endswith('"to":["alice"]}')  # the record's own is unchanged
    assert list(current_to(_Record(["alice"], ()), ASKED + 10_000)) == ["alice"]


names = st.sampled_from(["alice", "bob", "carol", "group:leads", "group:oncall"])
steps = st.lists(
    st.fixed_dictionaries(
        {"after": st.floats(0.001, 1e6), "to": st.lists(names, min_size=1, max_size=MAX_RECIPIENTS)}
    ),
    max_size=MAX_STEPS,
)


@given(st.lists(names, min_size=1, max_size=MAX_RECIPIENTS), steps, st.floats(0, 2e6), st.floats(0, 2e6))
def test_the_audience_only_grows_holds_the_to_and_each_name_once(to, raw, earlier, later):
    parsed = parsed_escalate(raw)
    earlier, later = sorted((earlier, later))
    before = audience(to, parsed, ASKED, ASKED + earlier)
    after = audience(to, parsed, ASKED, ASKED + later)
    assert set(to) <= set(before) <= set(after)
    assert len(after) == len(set(after))
    assert set(after) <= set(to) | set(names_of(parsed))
    # The steps due are exactly those whose time has come, and the next one is after now.
    assert set(after) == set(to) | set(names_of(s for s in parsed if ASKED + s.after <= ASKED + later))
    upcoming = next_at(parsed, ASKED, ASKED + later)
    assert upcoming is None or upcoming > ASKED + later
