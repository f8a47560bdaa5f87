"""The audit trail: who asked, was asked, answered, declined or withdrew, when and through what.

Entries are JSON Lines, each chained to the one before by a SHA-256 hash over its own content and the
previous entry's hash, so that ``elicitation-gateway audit verify`` finds a line removed, edited,
inserted or moved: any change breaks the chain at that line (unless every later line is rewritten
too, which is why the last hash is worth keeping elsewhere). The first line of an export names the
hash it follows, so a trail cut by retention still verifies from where it starts. Pure: no I/O.
"""

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

EVENTS = ("asked", "escalated", "notified", "replied", "rejected", "expired", "withdrawn")
VIAS = ("tool", "page", "terminal", "opencode", "api", "link", "webhook", "gateway")
"""Through what: the tool's ask, an answerer (the page, the terminal answerer, OpenCode, a script on the
REST API, a one-tap link), a webhook, or the gateway itself (an expiry, an escalation)."""
GENESIS = "0" * 64
"""The hash the first entry of a trail follows."""
FIELDS = ("seq", "at", "event", "question", "who", "via", "answers", "prev", "hash")
_HASHED = tuple(name for name in FIELDS if name != "hash")
"""What an entry's hash covers: every field but the hash itself (encoded with sorted keys)."""
_CANONICAL = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
"""The hash's encoding, made once (``json.dumps`` with options makes an encoder every call)."""
_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""A line's encoding, made once too: the in-memory trail writes one for every entry."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    seq: int
    at: str
    """RFC 3339, UTC, milliseconds."""
    event: str
    question: str
    who: str | None
    via: str
    answers: list[list[str]] | None
    prev: str
    hash: str

    def as_dict(self) -> dict[str, Any]:
        """Its fields in :data:`FIELDS` order, written out: every entry kept in memory is encoded."""
        return {
            "seq": self.seq,
            "at": self.at,
            "event": self.event,
            "question": self.question,
            "who": self.who,
            "via": self.via,
            "answers": self.answers,
            "prev": self.prev,
            "hash": self.hash,
        }

    def line(self) -> bytes:
        """The entry as one line of JSON Lines."""
        return _LINE.encode(self.as_dict()).encode() + b"\n"


def parse_line(raw: bytes | str) -> AuditEntry:
    """An entry from its line (as :meth:`AuditEntry.line` writes it); raises ValueError if it is none."""
    fields = json.loads(raw)
    if not isinstance(fields, dict) or set(fields) != set(FIELDS):
        raise ValueError("not an audit entry")
    return AuditEntry(**fields)


def parse_since(text: str) -> str:
    """``since`` as an RFC 3339 moment (``2026-12-06T05:00:00Z``, an offset, or a date alone: its
    midnight UTC), written as entries write ``at``, so that the two compare as strings; raises
    ValueError saying what it expects."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text[:80]!r} is not an RFC 3339 time such as 2026-12-06T05:00:00Z") from None
    if moment.tzinfo is None:
        if "T" in text or " " in text.strip():
            raise ValueError(f"{text[:80]!r} has no time zone: add Z or an offset such as +01:00")
        moment = moment.replace(tzinfo=UTC)
    return rfc3339(moment)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _digest(fields: dict[str, Any]) -> str:
    """The hash of an entry: its fields but ``hash``, in a canonical encoding, after ``prev``."""
    canonical = _CANONICAL.encode({name: fields[name] for name in _HASHED})
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def next_entry(
    previous: AuditEntry | None,
    *,
    event: str,
    question: str,
    via: str,
    who: str | None = None,
    answers: list[list[str]] | None = None,
    at: datetime | None = None,
) -> AuditEntry:
    """The entry that follows ``previous`` (or starts the trail)."""
    if event not in EVENTS:
        raise ValueError(f"{event!r} is not an audit event ({', '.join(EVENTS)})")
    if via not in VIAS:
        raise ValueError(f"{via!r} is not a way to answer ({', '.join(VIAS)})")
    fields: dict[str, Any] = {
        "seq": 1 if previous is None else previous.seq + 1,
        "at": rfc3339(at or datetime.now(UTC)),
        "event": event,
        "question": question,
        "who": who,
        "via": via,
        "answers": answers,
        "prev": GENESIS if previous is None else previous.hash,
    }
    return AuditEntry(**fields, hash=_digest(fields))


@dataclass(frozen=True, slots=True)
class Verdict:
    entries: int
    problem: str | None = None
    """The first break, naming its line; ``None``: the chain holds."""
    last_hash: str = GENESIS

    @property
    def ok(self) -> bool:
        return self.problem is None


def verify(lines: Iterable[bytes | str]) -> Verdict:
    """Checks a trail's lines in order: each well formed, its hash right, following the line before."""
    previous: dict[str, Any] | None = None
    count = 0
    for number, raw in enumerate(lines, start=1):
        text = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
        if not text.strip():
            continue
        try:
            fields = json.loads(text)
        except ValueError:
            return Verdict(count, f"line {number} is not JSON", _last(previous))
        if not isinstance(fields, dict) or set(fields) != set(FIELDS):
            return Verdict(
                count, f"line {number} is not an audit entry (its keys are not {', '.join(FIELDS)})"
            )
        if fields["hash"] != _digest(fields):
            return Verdict(
                count, f"line {number} (entry {fields['seq']}) was changed: its hash does not match it"
            )
        if previous is not None and fields["prev"] != previous["hash"]:
            return Verdict(
                count,
                f"line {number} (entry {fields['seq']}) does not follow entry {previous['seq']}: "
                "a line was removed, inserted or moved before it",
                _last(previous),
            )
        if previous is not None and fields["seq"] != previous["seq"] + 1:
            return Verdict(count, f"line {number}: entry {fields['seq']} after entry {previous['seq']}")
        previous = fields
        count += 1
    return Verdict(count, None, _last(previous))


def _last(previous: dict[str, Any] | None) -> str:
    return GENESIS if previous is None else str(previous["hash"])
