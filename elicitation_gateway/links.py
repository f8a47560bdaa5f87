"""One-tap links: a signed token that answers one question with one choice, as one person (pure).

A token binds a question's id, a person, the index of a choice and an expiry (the question's own), and
is signed with HMAC-SHA256 under a key derived from ``GATEWAY_LINK_SECRET``. It is the only credential
its link needs, so it is checked before anything of it is read: any change to its text (a character
flipped, added or removed, another question's id, another person, another choice, a later expiry) is
refused, and the comparison takes the same time however close a forgery comes. A link works once and
ends with its question: it answers only while the question is pending.

Only questions with a single boolean or single-choice property get one link per choice (a
confirmation is such a question: Yes or No); any other question's notification links to the page,
which asks for the person's login.

Every replica must sign with the same secret, or a link made on one is refused by another: without
``GATEWAY_LINK_SECRET`` each process signs with a random secret of its own, and its links stop working
when it restarts.
"""

import base64
import binascii
import hashlib
import hmac
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import SecretStr

from elicitation_gateway.display import clip, safe
from elicitation_gateway.records import Record

VERSION = 1
MAX_TOKEN_LENGTH = 1024
"""Longer is refused before anything is decoded (a real token is about 150 characters)."""
MAX_LINKS = 10
"""Choices a notification gives one link each; a question with more gets the page's link only."""
LABEL_LENGTH = 60
"""Characters of a choice's label a notification shows."""
_KEY_LABEL = b"elicitation-gateway one-tap link v1"
_PART = re.compile(r"[A-Za-z0-9_-]+")
_PROCESS_SECRET = os.urandom(32)
"""This process's own secret, for a gateway without ``GATEWAY_LINK_SECRET``."""

Problem = Literal["malformed", "forged", "expired"]


class LinkError(ValueError):
    """A token that opens nothing: ``problem`` says why (``malformed``, ``forged``, ``expired``)."""

    def __init__(self, problem: Problem, message: str) -> None:
        super().__init__(message)
        self.problem: Problem = problem
        self.message = message


@dataclass(frozen=True, slots=True)
class Link:
    """What a token says: answer ``question`` with its choice number ``choice`` (from 0), as ``person``,
    until ``expires`` (seconds since the epoch, the question's own expiry rounded up)."""

    question: str
    person: str
    choice: int
    expires: int


def key_of(secret: bytes) -> bytes:
    """The signing key, derived from the secret for links alone: the same secret used elsewhere signs
    nothing that could pass for a link."""
    return hmac.new(secret, _KEY_LABEL, hashlib.sha256).digest()


def secret_of(configured: SecretStr | str | None) -> bytes:
    """The secret links are signed with: ``GATEWAY_LINK_SECRET``'s UTF-8, or this process's own."""
    if isinstance(configured, SecretStr):
        configured = configured.get_secret_value()
    return configured.encode("utf-8") if configured else _PROCESS_SECRET


def _encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _decode(text: str) -> bytes:
    """The bytes of unpadded base64url written as :func:`_encode` writes them, and only so: a second
    spelling of the same bytes (other unused bits) is refused, so no two tokens say one thing."""
    if not _PART.fullmatch(text):
        raise ValueError("not base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not base64url") from None
    if _encode(data) != text:
        raise ValueError("not as written")
    return data


def _sign(payload: bytes, secret: bytes) -> bytes:
    return hmac.new(key_of(secret), payload, hashlib.sha256).digest()


def make(link: Link, secret: bytes) -> str:
    """The token of ``link``: its payload and its signature, each in base64url, joined by ``.``."""
    payload = json.dumps(
        [VERSION, link.question, link.person, link.choice, link.expires], separators=(",", ":")
    ).encode("utf-8")
    return f"{_encode(payload)}.{_encode(_sign(payload, secret))}"


def check(token: str, secret: bytes, now: float) -> Link:
    """The link ``token`` signs, or :class:`LinkError`. The signature is checked before the payload is
    read; then its expiry against ``now``."""
    if len(token) > MAX_TOKEN_LENGTH or token.count(".") != 1:
        raise LinkError("malformed", "this is not a link the gateway made")
    encoded, signature = token.split(".")
    try:
        payload, given = _decode(encoded), _decode(signature)
    except ValueError:
        raise LinkError("malformed", "this is not a link the gateway made") from None
    if not hmac.compare_digest(given, _sign(payload, secret)):
        raise LinkError("forged", "this link's signature does not match: it was changed, or made elsewhere")
    link = _parse(payload)
    if now >= link.expires:
        raise LinkError("expired", "this link has expired, with its question")
    return link


def _parse(payload: bytes) -> Link:
    """A signed payload, as :func:`make` writes it (one signed with another layout is refused)."""
    try:
        version, question, person, choice, expires = json.loads(payload)
    except (ValueError, TypeError):
        raise LinkError("malformed", "this link is of a form the gateway does not read") from None
    if not (
        version == VERSION
        and isinstance(question, str)
        and isinstance(person, str)
        and type(choice) is int
        and type(expires) is int
        and choice >= 0
    ):
        raise LinkError("malformed", "this link is of a form the gateway does not read")
    return Link(question, person, choice, expires)


def choices(record: Record) -> list[str] | None:
    """The labels a one-tap link may answer ``record`` with, one a choice, as its question shows them
    (Yes and No for a boolean); None unless it has a single boolean or single-choice property."""
    fields = record.form.fields
    if len(fields) != 1 or fields[0].kind not in ("boolean", "choice") or len(record.request.questions) != 1:
        return None
    labels = [option.label for option in record.request.questions[0].options]
    return labels or None


def link_url(public_url: str, token: str) -> str:
    return f"{public_url}/link/{token}"


def page_url(public_url: str, request_id: str) -> str:
    """The page, opened on the question: it asks for the person's login."""
    return f"{public_url}/?question={request_id}"


def choices_for(record: Record, person: str, public_url: str, secret: bytes) -> list[tuple[str, str]]:
    """One ``(label, url)`` for each choice of ``record``, signed for ``person``; none when the question
    has no one-tap choices, or more than :data:`MAX_LINKS`. Labels are made safe to show, on one line."""
    labels = choices(record)
    if labels is None or len(labels) > MAX_LINKS:
        return []
    expires = math.ceil(record.expires_at)
    return [
        (
            clip(safe(label, oneline=True), LABEL_LENGTH),
            link_url(public_url, make(Link(record.id, person, index, expires), secret)),
        )
        for index, label in enumerate(labels)
    ]
