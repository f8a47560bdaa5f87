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


# ---------------------------------------------------------------------------------------------------
# Disguised words read as a person reads them

DISGUISED_PASSWORDS = [
    "Pass\u200bword",  # a zero-width space
    "Pass\u00adword",  # a soft hyphen
    "Pass\u2060word",  # a word joiner
    "Pass\ufeffword",  # a byte-order mark
    "Pass\U000e0020word",  # a tag character
    "Раssword",  # Cyrillic Р and а
    "Passwоrd",  # Cyrillic о
    "Ρassword",  # Greek Ρ
    "Ｐａｓｓｗｏｒｄ",  # fullwidth letters
    "Pa\u200css\u200dword",  # zero-width (non-)joiners
]


@pytest.mark.parametrize("key", DISGUISED_PASSWORDS)
def test_a_disguised_password_key_is_refused(key: str) -> None:
    assert judge(key, {}).refusal == "a password"


@pytest.mark.parametrize("title", DISGUISED_PASSWORDS)
def test_a_disguised_password_title_is_refused(title: str) -> None:
    assert judge("x", {"title": title}).refusal == "a password"


def test_disguised_words_of_other_secrets_are_refused() -> None:
    assert judge("x", {"title": "АРI kеy"}).refusal == "an API key or secret"  # Cyrillic А, Р, е
    assert judge("x", {"title": "ｓｅｃｒｅｔ"}).refusal == "an API key or secret"
    assert judge("x", {"title": "Access\u200b token"}).refusal == "an access token"


def test_invisible_padding_does_not_push_the_secret_past_the_scan() -> None:
    assert judge("x", {"title": "\u200b" * (SCAN_LENGTH * 3) + "Password"}).refusal == "a password"


def test_a_disguised_secret_in_a_description_warns() -> None:
    judgement = judge("x", {"description": "Your раss\u200bword"})
    assert judgement.refusal is None
    assert judgement.warning is not None


_INVISIBLES = st.sampled_from(["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u2063"])
_LOOKALIKES = {"a": "а", "o": "о", "e": "е", "p": "р", "s": "ѕ", "P": "Р", "c": "с"}


@given(st.data(), st.sampled_from(["password", "Password", "passphrase", "secret", "apiKey", "card_number"]))
def test_any_disguise_of_a_secret_name_is_still_refused(data: st.DataObject, name: str) -> None:
    """Invisible characters anywhere, look-alike letters for any Latin ones, or fullwidth letters:
    the name reads the same, and is judged the same."""
    expected = judge(name, {}).refusal
    assert expected is not None
    disguised = []
    for char in name:
        how = data.draw(st.sampled_from(["same", "lookalike", "fullwidth"]))
        if how == "lookalike" and char in _LOOKALIKES:
            char = _LOOKALIKES[char]
        elif how == "fullwidth" and char.isascii() and char.isalnum():
            char = chr(ord(char) + 0xFEE0)
        disguised.append(char + "".join(data.draw(st.lists(_INVISIBLES, max_size=2))))
    assert judge("".join(disguised), {}).refusal == expected
