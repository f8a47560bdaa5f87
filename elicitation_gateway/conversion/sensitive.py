"""Which form questions ask for secrets.

MCP forbids form-mode elicitation of passwords, API keys, access tokens and payment credentials. The
gateway judges each free-text property by the words of its key and title, not by a word found
anywhere:

- **refused**: the key or title plainly names a secret (a password, passphrase, API key, secret,
  private key, access token, card number or card security code), or the schema says so
  (``format: password``, ``writeOnly: true``);
- **asked with a warning** beside the question: weaker signs (a token, a PIN, a one-time or
  verification code, credentials), or a description that names a secret;
- **nothing**: numbers, booleans and choices, whatever their words say, and every other text.

Words are read as a person reads them (:func:`elicitation_gateway.display.skeleton`): ``Pass\u200bword``,
``Pass\u00adword``, ``Раssword`` with Cyrillic letters and fullwidth ``Ｐａｓｓｗｏｒｄ`` are all "password".
Only bounded text is read (``SCAN_LENGTH`` visible characters of each), word by word: asking costs
little whatever a tool writes in its descriptions.
"""

import re
from dataclasses import dataclass
from typing import Any

from elicitation_gateway.display import skeleton, visible

SCAN_LENGTH = 300
"""Characters of a key, title or description that are read; secrets are named at the start."""

# Phrases as sequences of lower-case words; a key like ``apiKey`` or ``api_key`` reads as "api key".
_STRONG: dict[tuple[str, ...], str] = {
    ("password",): "a password",
    ("passwd",): "a password",
    ("passphrase",): "a password",
    ("pass", "phrase"): "a password",
    ("passcode",): "a password",
    ("secret",): "an API key or secret",
    ("secrets",): "an API key or secret",
    ("api", "key"): "an API key or secret",
    ("apikey",): "an API key or secret",
    ("access", "key"): "an API key or secret",
    ("private", "key"): "a private key",
    ("privatekey",): "a private key",
    ("access", "token"): "an access token",
    ("accesstoken",): "an access token",
    ("auth", "token"): "an access token",
    ("authtoken",): "an access token",
    ("bearer", "token"): "an access token",
    ("refresh", "token"): "an access token",
    ("api", "token"): "an access token",
    ("apitoken",): "an access token",
    ("card", "number"): "payment card details",
    ("cardnumber",): "payment card details",
    ("credit", "card"): "payment card details",
    ("creditcard",): "payment card details",
    ("debit", "card"): "payment card details",
    ("cc", "number"): "payment card details",
    ("cvv",): "payment card details",
    ("cvv2",): "payment card details",
    ("cvc",): "payment card details",
    ("card", "security", "code"): "payment card details",
    ("card", "verification", "code"): "payment card details",
}

_WEAK: dict[tuple[str, ...], str] = {
    ("token",): "a token",
    ("tokens",): "a token",
    ("pin",): "a PIN",
    ("pwd",): "a password",
    ("otp",): "a one-time code",
    ("one", "time", "code"): "a one-time code",
    ("one", "time", "password"): "a one-time code",
    ("verification", "code"): "a verification code",
    ("security", "code"): "a security code",
    ("auth", "code"): "a verification code",
    ("credential",): "credentials",
    ("credentials",): "credentials",
    ("login",): "credentials",
    ("session", "cookie"): "a session cookie",
    ("cookie",): "a session cookie",
    ("seed", "phrase"): "a recovery phrase",
    ("recovery", "phrase"): "a recovery phrase",
    ("mnemonic",): "a recovery phrase",
    ("ssn",): "an identity number",
    ("social", "security", "number"): "an identity number",
}

_LONGEST = max(len(phrase) for phrase in (*_STRONG, *_WEAK))
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
"""Words of ``camelCase``, ``PascalCase``, ``snake_case``, ``kebab-case`` and prose: ``APIKey`` is
"api key", ``card_number2`` is "card number 2"."""


def words(text: str) -> list[str]:
    """The lower-case words of ``text``'s first ``SCAN_LENGTH`` visible characters, as they read."""
    return [word.lower() for word in _WORDS.findall(skeleton(visible(text)[:SCAN_LENGTH]))]


def _named(text: Any, phrases: dict[tuple[str, ...], str]) -> str | None:
    """What the first phrase of ``phrases`` found among ``text``'s words asks for."""
    if not isinstance(text, str):
        return None
    found = words(text)
    for start in range(len(found)):
        for length in range(min(_LONGEST, len(found) - start), 0, -1):
            if (what := phrases.get(tuple(found[start : start + length]))) is not None:
                return what
        if _is_password_word(found[start]):
            return "a password" if phrases is _STRONG else None
    return None


def _is_password_word(word: str) -> bool:
    """``newpassword`` or ``password2`` name a password; ``passwordless`` and ``passport`` do not."""
    return ("password" in word or "passwd" in word) and "passwordless" not in word


@dataclass(frozen=True)
class Judgement:
    refusal: str | None = None
    """What the property plainly asks for ("a password"): MCP forbids asking it in a form."""
    warning: str | None = None
    """A caution for the person, when a property may ask for a secret."""


NOTHING = Judgement()


def judge(key: str, prop: Any) -> Judgement:
    """Whether the free-text property ``key`` asks for a secret (choices, numbers and booleans never
    do: the caller asks this of free-text properties only)."""
    if not isinstance(prop, dict):
        return NOTHING
    if prop.get("format") == "password" or prop.get("writeOnly") is True:
        return _refused("a password")
    title = prop.get("title")
    for text in (key, title):
        if (what := _named(text, _STRONG)) is not None:
            return _refused(what)
    for text in (key, title):
        if (what := _named(text, _WEAK)) is not None:
            return Judgement(warning=_caution(what))
    description = prop.get("description")
    if (what := _named(description, _STRONG) or _named(description, _WEAK)) is not None:
        return Judgement(warning=_caution(what))
    return NOTHING


def _refused(what: str) -> Judgement:
    return Judgement(refusal=what, warning=_caution(what))


def _caution(what: str) -> str:
    return (
        f"This question may ask for {what}. Answer only if you trust the tool that asks: "
        "answers are seen by the tool and kept by the gateway."
    )
