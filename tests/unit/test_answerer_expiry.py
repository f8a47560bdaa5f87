"""The terminal answerer's words for the time a request has left, from the form's ``expiresAt``."""

import time

import pytest

from elicitation_gateway.answerer.draft import RequestForm

NOW = 1_800_000_000.0


def request(expires_in: float | None, on_timeout: str = "cancel") -> RequestForm:
    described = {"id": "que_1", "message": "", "fields": [], "onTimeout": on_timeout}
    if expires_in is not None:
        described["expiresAt"] = NOW + expires_in
    return RequestForm.from_form(described)


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (-5, "expires in under a minute"),
        (0, "expires in under a minute"),
        (60, "expires in under a minute"),
        (61, "expires in 1 min"),
        (299, "expires in 5 min"),
        (89 * 60, "expires in 89 min"),
    ],
)
def test_minutes_left(seconds, words):
    assert request(seconds).expiry(NOW) == words


def test_far_deadlines_are_a_clock_time():
    deadline = time.strftime("%H:%M", time.localtime(NOW + 2 * 3600))
    assert request(2 * 3600).expiry(NOW) == f"expires at {deadline}"


def test_defaults_at_expiry_are_said():
    assert request(240, "default").expiry(NOW) == "defaults sent in 4 min"
    assert request(240, "anything else").on_timeout == "cancel"


def test_no_deadline_no_words():
    assert request(None).expiry(NOW) == ""
    assert RequestForm.from_form({"id": "que_1", "expiresAt": "soon"}).expiry(NOW) == ""
