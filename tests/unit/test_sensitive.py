"""The secret check judges a free-text property by the words of its key and title: plain names of secrets
are refused, weaker signs and descriptions warn, and nothing else is touched."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitation_gateway.conversion.sensitive import SCAN_LENGTH, judge, words

REFUSED = [
    ("password", {}, "a password"),
    ("newPassword", {}, "a password"),
    ("password2", {}, "a password"),
    ("user_passwd", {}, "a password"),
    ("x", {"title": "Passphrase"}, "a password"),
    ("x", {"title": "Pass phrase for the key"}, "a password"),
    ("apiKey", {}, "an API key or secret"),
    ("APIKey", {}, "an API key or secret"),
    ("api-key", {}, "an API key or secret"),
    ("OPENAI_API_KEY", {}, "an API key or secret"),
    ("client_secret", {}, "an API key or secret"),
    ("AWS_SECRET_ACCESS_KEY", {}, "an API key or secret"),
    ("x", {"title": "Access key"}, "an API key or secret"),
    ("ssh_private_key", {}, "a private key"),
    ("x", {"title": "Personal access token"}, "an access token"),
    ("refreshToken", {}, "an access token"),
    ("x", {"title": "Bearer token"}, "an access token"),
    ("card_number", {}, "payment card details"),
    ("creditCard", {}, "payment card details"),
    ("x", {"title": "CVV"}, "payment card details"),
    ("x", {"title": "Card security code"}, "payment card details"),
    ("x", {"format": "password"}, "a password"),
    ("x", {"writeOnly": True}, "a password"),
]

WARNED = [
    ("x", {"title": "GitHub token"}, "a token"),
    ("token", {}, "a token"),
    ("pin", {}, "a PIN"),
    ("x", {"title": "PIN code"}, "a PIN"),
    ("otp", {}, "a one-time code"),
    ("x", {"title": "Verification code"}, "a verification code"),
    ("credentials", {}, "credentials"),
    ("x", {"title": "Recovery phrase"}, "a recovery phrase"),
    ("x", {"description": "Paste your credit card here"}, "payment card details"),
    ("x", {"description": "The password of the staging database"}, "a password"),
    ("x", {"description": "Your favourite number (not your phone number, PIN or other detail)"}, "a PIN"),
]

HARMLESS = [
    ("name", {}),
    ("passport_country", {}),
    ("passwordless_email", {}),
    ("card_game", {"title": "Favourite card game"}),
    ("keyboard_layout", {}),
    ("pinned", {"title": "Pinned repository"}),
    ("spinach", {}),
    ("x", {"title": "Tokenizer name"}),
    ("secretary", {"title": "Secretary's name"}),
    ("x", {"description": "What should the release notes say?"}),
]


@pytest.mark.parametrize(("key", "prop", "what"), REFUSED)
def test_plain_names_of_secrets_are_refused(key, prop, what):
    judgement = judge(key, prop)
    assert judgement.refusal == what
    assert judgement.warning is not None
    assert what in judgement.warning


@pytest.mark.parametrize(("key", "prop", "what"), WARNED)
def test_weaker_signs_warn_without_refusing(key, prop, what):
    judgement = judge(key, prop)
    assert judgement.refusal is None
    assert judgement.warning is not None
    assert f"may ask for {what}" in judgement.warning


@pytest.mark.parametrize(("key", "prop"), HARMLESS)
def test_other_words_are_left_alone(key, prop):
    judgement = judge(key, prop)
    assert (judgement.refusal, judgement.warning) == (None, None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("apiKey", ["api", "key"]),
        ("APIKey", ["api", "key"]),
        ("OPENAI_API_KEY", ["openai", "api", "key"]),
        ("card-number2", ["card", "number", "2"]),
        ("GitHub token", ["git", "hub", "token"]),
        ("", []),
    ],
)
def test_words_of_keys_and_prose(text, expected):
    assert words(text) == expected


def test_only_the_start_of_long_text_is_read():
    """Asking costs the same whatever a tool writes: a secret named past the scanned length is not seen."""
    far = "x" * SCAN_LENGTH + " password"
    assert judge("note", {"description": far}).warning is None
    assert judge("note", {"title": far}).refusal is None
    assert judge("note", {"title": far[-SCAN_LENGTH:]}).refusal == "a password"


def test_properties_that_are_not_objects_are_not_judged():
    assert judge("password", "not a property").refusal is None


@given(key=st.text(), title=st.one_of(st.none(), st.text(), st.integers()), description=st.text())
def test_any_text_is_judged_without_error(key, title, description):
    judgement = judge(key, {"title": title, "description": description})
    if judgement.refusal is not None:
        assert judgement.warning is not None
