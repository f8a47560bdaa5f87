"""Ids in OpenCode's shape that sort in creation order (the TUI binary-searches them)."""

import re

import pytest

from elicitation_gateway import ids

SHAPE = re.compile(r"^(que|evt|ses)_[0-9a-f]{12}[0-9A-Za-z]{14}$")


@pytest.mark.parametrize("make", [ids.question_id, ids.event_id, ids.session_id])
def test_shape(make):
    made = make()
    assert SHAPE.match(made), made
    assert made[:3] in {"que", "evt", "ses"}


def test_hex_part_is_milliseconds_since_the_epoch(monkeypatch):
    monkeypatch.setattr(ids.time, "time", lambda: 1_764_680_000.123)
    made = ids.AscendingIds().new("que")
    assert int(made[4:16], 16) == 1_764_680_000_123


def test_ids_made_within_one_millisecond_ascend(monkeypatch):
    monkeypatch.setattr(ids.time, "time", lambda: 1_764_680_000.0)
    maker = ids.AscendingIds()
    made = [maker.new("que") for _ in range(5000)]
    assert made == sorted(made)
    assert len(set(made)) == len(made)


def test_ids_ascend_when_the_clock_goes_back(monkeypatch):
    clock = iter([1_764_680_001.0, 1_764_680_000.0, 1_764_679_999.0])
    monkeypatch.setattr(ids.time, "time", lambda: next(clock))
    maker = ids.AscendingIds()
    made = [maker.new("evt") for _ in range(3)]
    assert made == sorted(made)
    assert len(set(made)) == 3


def test_ids_of_the_module_ascend_across_kinds_and_time():
    made = [ids.question_id() for _ in range(2000)]
    assert made == sorted(made)


def test_random_digits_are_base62_and_unbiased():
    """Every digit equally likely: 62 does not divide 256, so bytes that would favour some are dropped."""
    digits = ids._random_digits(620_000)
    assert set(digits) == set(ids.BASE62)
    expected = len(digits) / 62
    # A byte taken modulo 62 without dropping would give the first eight digits 25 % more often.
    assert all(abs(digits.count(digit) - expected) < 0.05 * expected for digit in ids.BASE62)


def test_random_parts_of_ids_differ():
    maker = ids.AscendingIds()
    tails = [maker.new("que")[-10:] for _ in range(3000)]  # more than one draw of random digits
    assert len(set(tails)) == len(tails)
