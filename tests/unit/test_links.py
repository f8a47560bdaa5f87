"""One-tap links (elicitation_gateway/links.py): tokens made and checked, every change refused, and
which questions get one link per choice."""

import base64
import json
import math
import time
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitation_gateway import links
from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.links import Link, LinkError
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.notify import compose
from elicitation_gateway.records import Record

SECRET = b"s" * 32
LINK = Link("que_0001", "alice", 1, 2_000_000_000)
NOW = 1_900_000_000.0


def record_of(schema: dict, message: str = "Roll back?", expires_at: float = 2_000_000_000.5) -> Record:
    form = build_form(schema, message)
    request = QuestionRequest.new("que_0001", "ses_1", list(form.questions), None, ["alice"])
    return Record.new(request, form, message, None, time.time(), expires_at, "cancel")


def boolean(**extra: object) -> dict:
    return {"type": "object", "properties": {"go": {"type": "boolean", "title": "Go", **extra}}}


# ---------------------------------------------------------------------------------------------------
# Tokens


def test_a_token_gives_back_what_it_signs():
    token = links.make(LINK, SECRET)
    assert links.check(token, SECRET, NOW) == LINK
    assert len(token) < 160  # short enough for a notification
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def test_another_secret_refuses_it():
    token = links.make(LINK, SECRET)
    with pytest.raises(LinkError) as refused:
        links.check(token, b"t" * 32, NOW)
    assert refused.value.problem == "forged"


def test_it_expires_at_its_expiry():
    token = links.make(LINK, SECRET)
    assert links.check(token, SECRET, LINK.expires - 0.001) == LINK
    for now in (LINK.expires, LINK.expires + 1):
        with pytest.raises(LinkError) as refused:
            links.check(token, SECRET, now)
        assert refused.value.problem == "expired"


def _resigned(payload: object, secret: bytes = SECRET) -> str:
    """A token of another payload signed with ``secret``, as an attacker who had it would make."""
    data = json.dumps(payload, separators=(",", ":")).encode()
    return f"{links._encode(data)}.{links._encode(links._sign(data, secret))}"


def test_the_payload_is_changed_only_with_a_new_signature():
    signature = links.make(LINK, SECRET).split(".")[1]
    for change in (
        Link("que_0002", "alice", 1, LINK.expires),  # another question
        Link("que_0001", "mallory", 1, LINK.expires),  # another person
        Link("que_0001", "alice", 0, LINK.expires),  # another choice
        Link("que_0001", "alice", 1, LINK.expires + 3600),  # a later expiry
    ):
        other_payload = links.make(change, SECRET).split(".")[0]
        with pytest.raises(LinkError) as refused:
            links.check(f"{other_payload}.{signature}", SECRET, NOW)
        assert refused.value.problem == "forged"


@pytest.mark.parametrize(
    "payload",
    [
        [2, "que_0001", "alice", 1, 2_000_000_000],  # another version
        ["que_0001", "alice", 1, 2_000_000_000],  # too short
        [1, "que_0001", "alice", -1, 2_000_000_000],  # no such choice
        [1, "que_0001", "alice", True, 2_000_000_000],  # a boolean is no number here
        [1, "que_0001", "alice", 1, 2e9],  # a float expiry
        [1, 7, "alice", 1, 2_000_000_000],
        {"question": "que_0001"},
    ],
)
def test_a_signed_payload_of_another_form_is_malformed(payload):
    with pytest.raises(LinkError) as refused:
        links.check(_resigned(payload), SECRET, NOW)
    assert refused.value.problem == "malformed"


def test_signed_bytes_that_are_not_json_are_malformed():
    data = b"\xff\xfe"
    token = f"{links._encode(data)}.{links._encode(links._sign(data, SECRET))}"
    with pytest.raises(LinkError) as refused:
        links.check(token, SECRET, NOW)
    assert refused.value.problem == "malformed"


@pytest.mark.parametrize(
    "token",
    ["", ".", "abc", "a.b.c", "a b.c", "YQ==.YQ", "YQ.YQ==", "é.a", "a" * 2000 + ".a", "+/.ab"],
)
def test_what_is_no_token_is_malformed(token):
    with pytest.raises(LinkError) as refused:
        links.check(token, SECRET, NOW)
    assert refused.value.problem == "malformed"


def test_a_second_spelling_of_the_same_bytes_is_refused():
    """Base64's unused bits: ``YR`` decodes as ``YQ`` does; the token must be as the gateway wrote it."""
    encoded, signature = links.make(LINK, SECRET).split(".")
    last = signature[-1]
    # The signature is 32 bytes: 43 characters, the last holding 4 bits, the other 2 unused.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = alphabet[alphabet.index(last) ^ 1]
    assert base64.urlsafe_b64decode(signature[:-1] + twin + "=") == base64.urlsafe_b64decode(signature + "=")
    with pytest.raises(LinkError):
        links.check(f"{encoded}.{signature[:-1]}{twin}", SECRET, NOW)


@given(position=st.integers(min_value=0), replacement=st.characters())
def test_any_character_changed_is_refused(position, replacement):
    token = links.make(LINK, SECRET)
    position %= len(token)
    if token[position] == replacement:
        return
    tampered = token[:position] + replacement + token[position + 1 :]
    with pytest.raises(LinkError):
        links.check(tampered, SECRET, NOW)


@given(position=st.integers(min_value=0), inserted=st.text(min_size=1, max_size=4))
def test_any_text_inserted_is_refused(position, inserted):
    token = links.make(LINK, SECRET)
    position %= len(token) + 1
    with pytest.raises(LinkError):
        links.check(token[:position] + inserted + token[position:], SECRET, NOW)


@given(start=st.integers(min_value=0), length=st.integers(min_value=1, max_value=10))
def test_any_text_removed_is_refused(start, length):
    token = links.make(LINK, SECRET)
    start %= len(token)
    with pytest.raises(LinkError):
        links.check(token[:start] + token[start + length :], SECRET, NOW)


@given(text=st.text(max_size=300))
def test_any_text_is_refused_without_an_error_of_another_kind(text):
    with pytest.raises(LinkError):
        links.check(text, SECRET, NOW)


@given(
    question=st.text(min_size=1, max_size=60),
    person=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", fullmatch=True),
    choice=st.integers(min_value=0, max_value=199),
    expires=st.integers(min_value=0, max_value=2**40),
    secret=st.binary(min_size=1, max_size=64),
)
def test_every_link_survives_its_token(question, person, choice, expires, secret):
    link = Link(question, person, choice, expires)
    assert links.check(links.make(link, secret), secret, expires - 1) == link


def test_the_key_is_derived_for_links_alone():
    assert links.key_of(SECRET) != SECRET
    assert len(links.key_of(SECRET)) == 32


def test_the_secret_is_the_setting_or_this_process_own():
    assert links.secret_of("x" * 32) == b"x" * 32
    assert links.secret_of(None) == links.secret_of(None)
    assert len(links.secret_of(None)) == 32


# ---------------------------------------------------------------------------------------------------
# Which questions, and the links of a notification


def test_a_boolean_gets_yes_and_no():
    assert links.choices(record_of(boolean())) == ["Yes", "No"]


def test_a_confirmation_gets_yes_and_no():
    assert links.choices(record_of({"type": "object", "properties": {}})) == ["Yes", "No"]


def test_a_single_choice_gets_its_labels():
    schema = {
        "type": "object",
        "properties": {"env": {"type": "string", "oneOf": [{"const": "p", "title": "Prod"}, {"const": "s"}]}},
    }
    assert links.choices(record_of(schema)) == ["Prod", "s"]


@pytest.mark.parametrize(
    "properties",
    [
        {"go": {"type": "boolean"}, "why": {"type": "string"}},  # two properties
        {"why": {"type": "string"}},
        {"n": {"type": "integer"}},
        {"tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}},  # several choices
    ],
)
def test_other_questions_get_none(properties):
    assert links.choices(record_of({"type": "object", "properties": properties})) is None


def test_choices_for_signs_one_link_a_choice_for_that_person():
    record = record_of(boolean(), expires_at=1_999_999_999.2)
    made = links.choices_for(record, "alice", "https://gw.example/base", SECRET)
    assert [label for label, _ in made] == ["Yes", "No"]
    for index, (_, url) in enumerate(made):
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc) == ("https", "gw.example")
        assert parts.path.startswith("/base/link/")
        link = links.check(parts.path.removeprefix("/base/link/"), SECRET, NOW)
        assert link == Link("que_0001", "alice", index, math.ceil(record.expires_at))


def test_choices_for_gives_none_for_other_questions_and_many_choices():
    assert (
        links.choices_for(
            record_of({"type": "object", "properties": {"n": {"type": "integer"}}}), "a", "h", SECRET
        )
        == []
    )
    many = {"type": "object", "properties": {"c": {"type": "string", "enum": [f"o{i}" for i in range(11)]}}}
    assert links.choices_for(record_of(many), "alice", "https://gw", SECRET) == []
    ten = {"type": "object", "properties": {"c": {"type": "string", "enum": [f"o{i}" for i in range(10)]}}}
    assert len(links.choices_for(record_of(ten), "alice", "https://gw", SECRET)) == 10


def test_labels_are_made_safe_and_short():
    schema = {
        "type": "object",
        "properties": {
            "c": {
                "type": "string",
                "oneOf": [{"const": "a", "title": "x" * 100}, {"const": "b", "title": "b\u202ec"}],
            }
        },
    }
    labels = [label for label, _ in links.choices_for(record_of(schema), "alice", "https://gw", SECRET)]
    assert len(labels[0]) == links.LABEL_LENGTH
    assert labels[0].endswith("…")
    assert "\u202e" not in labels[1]


# ---------------------------------------------------------------------------------------------------
# In a notification composed for one person


def _urls(body: str) -> list[str]:
    return [line.rsplit(": ", 1)[1] for line in body.splitlines() if ": https://" in line]


def test_a_person_notification_carries_one_link_a_choice_then_the_page():
    record = record_of(boolean())
    _, body = compose(record, "https://gw.example", person="alice", link_secret=SECRET)
    lines = body.splitlines()
    assert [line.split(": ")[0] for line in lines[-3:]] == ["Yes", "No", "Or open it"]
    yes, no, page = _urls(body)
    assert page == "https://gw.example/?question=que_0001"
    for index, url in enumerate((yes, no)):
        token = url.removeprefix("https://gw.example/link/")
        assert links.check(token, SECRET, NOW) == Link(
            "que_0001", "alice", index, math.ceil(record.expires_at)
        )


def test_other_questions_and_the_team_channel_keep_the_page_link_alone():
    other = record_of({"type": "object", "properties": {"why": {"type": "string"}}})
    _, body = compose(other, "https://gw.example", person="alice", link_secret=SECRET)
    assert _urls(body) == ["https://gw.example/?question=que_0001"]
    assert body.splitlines()[-1] == "Answer: https://gw.example/?question=que_0001"
    for person, secret in ((None, SECRET), ("alice", None)):
        _, body = compose(record_of(boolean()), "https://gw.example", person=person, link_secret=secret)
        assert _urls(body) == ["https://gw.example/?question=que_0001"]
    assert compose(record_of(boolean()), "https://gw.example") == compose(
        record_of(boolean()), "https://gw.example", person=None
    )


def test_without_a_public_url_there_is_no_link_at_all():
    _, body = compose(record_of(boolean()), None, person="alice", link_secret=SECRET)
    assert "link" not in body
    assert "http" not in body


def test_a_gateway_that_makes_links_without_a_secret_says_they_last_only_this_process(caplog, tmp_path):
    from elicitation_gateway.server.routes.links import link_secret
    from elicitation_gateway.settings import Settings

    people = tmp_path / "people.toml"
    with caplog.at_level("WARNING"):
        assert (
            link_secret(Settings(link_secret="k" * 32, people=people, public_url="https://gw")) == b"k" * 32
        )
        assert link_secret(Settings(people=people)) == links.secret_of(None)  # makes no links: no warning
        assert not caplog.records
        assert link_secret(Settings(people=people, public_url="https://gw")) == links.secret_of(None)
    assert "set GATEWAY_LINK_SECRET" in caplog.text


def test_a_short_secret_is_refused_at_start():
    from pydantic import ValidationError

    from elicitation_gateway.settings import Settings

    with pytest.raises(ValidationError, match="at least 32 characters"):
        Settings(link_secret="short")
    assert Settings(link_secret="").link_secret is None
