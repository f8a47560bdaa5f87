"""Form questions that ask for secrets. MCP forbids form-mode elicitation of passwords, API keys,
access tokens and payment credentials; the gateway refuses them unless told otherwise."""

import re
from typing import Any

_SENSITIVE = re.compile(
    r"pass(word|wd|phrase|code)"
    r"|\bpin\b"
    r"|api[\s_-]?key|access[\s_-]?key|secret[\s_-]?key|private[\s_-]?key|client[\s_-]?secret"
    r"|\b((auth|access|api|bearer|refresh|session|personal[\s_-]?access)[\s_-]?)?token\b"
    r"|authtoken|accesstoken|apitoken|bearertoken|refreshtoken|sessiontoken"
    r"|credit[\s_-]?card|card[\s_-]?(number|num|no)\b|cardnumber|\bcvv\b|\bcvc\b|security[\s_-]?code",
    re.IGNORECASE,
)

_WHAT = (
    (re.compile(r"api|access[\s_-]?key|secret|private|client", re.I), "an API key or secret"),
    (re.compile(r"token", re.I), "an access token"),
    (re.compile(r"card|cvv|cvc|security", re.I), "payment card details"),
)


def sensitive_property(schema: Any) -> tuple[str, str] | None:
    """The first property that looks like it asks for a secret, as ``(key, what it asks for)``."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return None
    for key, prop in schema["properties"].items():
        if not isinstance(prop, dict):
            continue
        if prop.get("format") == "password" or prop.get("writeOnly") is True:
            return key, "a password"
        for text in (key, prop.get("title"), prop.get("description")):
            if isinstance(text, str) and (found := _SENSITIVE.search(text)):
                return key, _describe(found.group(0))
    return None


def _describe(matched: str) -> str:
    for pattern, what in _WHAT:
        if pattern.search(matched):
            return what
    return "a password"
