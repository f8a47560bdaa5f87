"""The memory budget of pending questions: bytes, not counts.

A count limit alone lets one tool fill memory with a few huge questions (a form with thousands of
options holds megabytes). Each pending question is charged what it holds in this process
(:func:`charge`), against ``GATEWAY_MAX_PENDING_BYTES`` in all and
``GATEWAY_MAX_PENDING_BYTES_PER_SESSION`` in one session.

What is charged is what is held, by the real size of each string (:mod:`.sizes`: 1, 2 or 4 bytes a
character by its widest one) and each frame (UTF-8): the record and the objects made for it, its
message, its first question's text, the request's JSON, the two frames of its announcement
(``/event`` and ``/global/event``, made once an answerer connects) and the store's entries for it.
Its form's other parts are shared by every ask of the same schema (:mod:`.conversion.forms`): they
are charged once while any question using them is pending, in all and to each session that has one.

Questions in the gateway's default session (those whose tool names no session) are charged to the
budget in all only: they come from any number of tools, and one session's budget would make them
crowd each other out.

With a shared store each replica keeps its own tally, from its own asks and the events it reads:
every replica holds every pending question it lists.
"""

from collections import Counter
from dataclasses import dataclass

from elicitation_gateway.conversion.form_model import FORM_FIELDS
from elicitation_gateway.conversion.forms import (
    FORM_BYTES,
    SLOT,
    first_question_bytes,
    questions_footprint,
    shared_footprint,
)
from elicitation_gateway.models import _REQUEST_FIELDS
from elicitation_gateway.records import _NEW_RECORD_FIELDS, Record
from elicitation_gateway.sizes import BYTES_HEAD, held, names_held, utf8_length

RECORD_BYTES = 1600
"""What a pending question holds besides its texts, its JSON and its form, measured with tracemalloc:
the record, its request and form (the models and their dicts), its id, its announcement (the event,
its id and its frames' dict), its deadline, the entries of the store's and the budget's indexes, and
its escalation steps (empty or not, one more field of the record's dict)."""
FRAME_BYTES = 180
"""What the announcement's two frames hold besides the request's JSON: their ``bytes`` headers, the
``data:`` lines, the event's id and type, and ``/global/event``'s wrapping."""


@dataclass(frozen=True, slots=True)
class Charge:
    """What a pending question holds: ``own`` alone, and ``shared`` with every pending question that
    shares ``parts`` (its form's fields: what every ask of its schema shares)."""

    own: int
    parts: object
    shared: int

    @property
    def whole(self) -> int:
        """What it holds when nothing is shared."""
        return self.own + self.shared


def charge(record: Record) -> Charge:
    """What ``record`` holds while pending (cheap: a few ``getsizeof`` and one UTF-8 count of its JSON;
    its form's shared parts are counted once a form)."""
    form, request = record.form, record.request
    wire = request.wire_json
    frames = 2 * (BYTES_HEAD + FRAME_BYTES + utf8_length(wire))
    own = RECORD_BYTES + FORM_BYTES + 3 * SLOT * len(form.questions) + held(record.message) + held(wire)
    own += frames + names_held(record, _NEW_RECORD_FIELDS) + names_held(request, _REQUEST_FIELDS)
    own += names_held(form, FORM_FIELDS)
    if form.questions:
        own += first_question_bytes(form)
    if record.directory is not None:
        own += held(record.directory) + 2 * utf8_length(record.directory)
    if request.questions and form.questions and request.questions[-1] is not form.questions[-1]:
        own += questions_footprint(request.questions)  # read back from a store: a copy of their own
    return Charge(own, form.fields, shared_footprint(form) if form.questions else 0)


def record_bytes(record: Record) -> int:
    """What ``record`` holds while pending, nothing shared."""
    return charge(record).whole


class PendingBytes:
    """The bytes charged to each pending question, in all and per session; shared parts once in all
    and once per session. Adding or removing a question twice changes nothing: an ask and the event
    announcing it may both report one."""

    def __init__(self) -> None:
        self.total = 0
        self._charges: dict[str, tuple[str | None, int, object]] = {}  # id -> session, own bytes, parts
        self._sessions: Counter[str] = Counter()
        # id of shared parts -> how many pending questions use them, their bytes, the parts (held, so
        # that their id is theirs while counted here)
        self._shared: dict[int, tuple[int, int, object]] = {}
        self._shared_in: Counter[tuple[str, int]] = Counter()  # (session, parts' id) -> questions

    def cost(self, charge: Charge, session_id: str | None) -> tuple[int, int]:
        """What adding a question of ``charge`` would add: in all, and to ``session_id``'s tally."""
        key = id(charge.parts)
        found = self._shared.get(key)
        shared = charge.shared if found is None else found[1]
        in_all = charge.own + (0 if found is not None else shared)
        if session_id is None:
            return in_all, 0
        return in_all, charge.own + (0 if (session_id, key) in self._shared_in else shared)

    def add(self, request_id: str, session_id: str | None, charge: Charge) -> None:
        """Charge ``request_id``; ``session_id`` None: to the budget in all only."""
        if request_id in self._charges:
            return
        in_all, in_session = self.cost(charge, session_id)
        key = id(charge.parts)
        self._charges[request_id] = (session_id, charge.own, charge.parts)
        self.total += in_all
        users, shared, parts = self._shared.get(key, (0, charge.shared, charge.parts))
        self._shared[key] = (users + 1, shared, parts)
        if session_id is not None:
            self._sessions[session_id] += in_session
            self._shared_in[(session_id, key)] += 1

    def remove(self, request_id: str) -> None:
        found = self._charges.pop(request_id, None)
        if found is None:
            return
        session_id, own, parts = found
        key = id(parts)
        users, shared, _ = self._shared[key]
        if users == 1:
            del self._shared[key]
            self.total -= own + shared
        else:
            self._shared[key] = (users - 1, shared, parts)
            self.total -= own
        if session_id is None:
            return
        pair = (session_id, key)
        self._shared_in[pair] -= 1
        freed = own
        if not self._shared_in[pair]:
            del self._shared_in[pair]
            freed += shared
        self._sessions[session_id] -= freed
        if not self._sessions[session_id]:
            del self._sessions[session_id]

    def session(self, session_id: str) -> int:
        return self._sessions.get(session_id, 0)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._charges

    def __len__(self) -> int:
        return len(self._charges)
