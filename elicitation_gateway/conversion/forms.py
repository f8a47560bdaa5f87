"""Forms of the schemas tools ask again and again: converted once, kept within a byte budget.

A form is cached without its message (the schema's own form); each ask derives its form from it with
:func:`.schema.with_message`, which makes only the first question anew, so the pending records of one
schema share every other part. The cache holds at most ``max_bytes`` of forms by their
:func:`footprint`, and no form larger than an eighth of that: a big schema asked once would only push
out many small ones. It may be used from a worker thread and the event loop at once.
"""

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from sys import getsizeof
from typing import Any

from elicitation_gateway.conversion.schema import Form, build_form, with_message
from elicitation_gateway.models import QuestionInfo
from elicitation_gateway.sizes import held

FORM_BYTES = 400
"""A form's own objects besides its questions: the model, its dict and its two tuples."""
QUESTION_BYTES = 264
"""A question as shown: the model and its dict (its options' list is counted by its size)."""
ENCODED_BYTES = 88
"""What keeping a question's encoding adds to its dict, besides the encoding."""
OPTION_BYTES = 264
"""An option as checked (value, label, description), or as shown (label, description): the model and
its dict, made with a shared set of names."""
SLOT = 8
"""A reference in a tuple or list."""
_SHARED = "_shared_bytes"
"""Where a form keeps :func:`shared_footprint` once counted (not a field: never stored or compared)."""


def footprint(form: Form) -> int:
    """The bytes ``form`` holds, all of it: what the form cache counts it, and what a question whose form
    is its own holds."""
    return FORM_BYTES + 2 * SLOT * len(form.questions) + first_question_bytes(form) + shared_footprint(form)


def first_question_bytes(form: Form) -> int:
    """What ``form``'s first question holds besides its options and header: an ask with a message makes
    it anew (:func:`.schema.with_message`), and shares the rest of its schema's form."""
    first = form.questions[0]
    encoded = first.__dict__.get("_wire_json")
    return QUESTION_BYTES + held(first.question) + (0 if encoded is None else ENCODED_BYTES + held(encoded))


def shared_footprint(form: Form) -> int:
    """What ``form`` holds that the forms of every ask of its schema share (all but its own objects and
    its first question's text): counted once a form, by strings' real sizes."""
    size = form.__dict__.get(_SHARED)
    if size is None:
        size = form.__dict__[_SHARED] = _shared_bytes(form)
    return size


def _shared_bytes(form: Form) -> int:
    size = 0
    parts = zip(form.fields, form.questions, form.texts, strict=True)
    for index, (field, question, text) in enumerate(parts):
        # a field is validated: its dict and its own set of the names set (by its kind: 200 to 700 bytes)
        size += getsizeof(field) + getsizeof(field.__dict__) + getsizeof(field.__pydantic_fields_set__)
        size += getsizeof(field.options) + getsizeof(question.options) + SLOT  # and a slot in texts
        size += held(field.key) + held(question.header) + (0 if text is question.question else held(text))
        if field.pattern is not None:
            size += held(field.pattern)
        if index:  # the first question's own parts are each ask's (first_question_bytes)
            size += QUESTION_BYTES + held(question.question)
            if (encoded := question.__dict__.get("_wire_json")) is not None:
                size += ENCODED_BYTES + held(encoded)
        size += OPTION_BYTES * (len(field.options) + len(question.options))
        for option in field.options:
            size += held(option.value)
            if option.label is not option.value:
                size += held(option.label)
            if option.description:
                size += held(option.description)
    return size


def questions_footprint(questions: list[QuestionInfo]) -> int:
    """What questions of their own hold (a request read back from a store, not sharing its form's)."""
    size = SLOT * len(questions)
    for question in questions:
        size += QUESTION_BYTES + held(question.question) + held(question.header) + getsizeof(question.options)
        size += OPTION_BYTES * len(question.options)
        for option in question.options:
            size += held(option.label) + (held(option.description) if option.description else 0)
    return size


def inherit_footprint(derived: Form, plain: Form) -> Form:
    """``derived`` (of ``plain`` and a message) shares what ``plain`` holds: it is counted once."""
    if derived is not plain:
        derived.__dict__[_SHARED] = shared_footprint(plain)
    return derived


@dataclass(frozen=True)
class Limits:
    """The limits :func:`.schema.build_form` checks (the gateway's settings)."""

    header_length: int = 12
    max_questions: int = 50
    max_options: int | None = None
    max_text_length: int | None = None
    allow_sensitive: bool = False


class FormCache:
    def __init__(self, limits: Limits, max_bytes: int) -> None:
        self.limits = limits
        self.max_bytes = max_bytes
        self.size = 0
        self._forms: OrderedDict[str, tuple[Form, int]] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()

    @staticmethod
    def key(schema: Any) -> str | None:
        """What the cache knows ``schema`` by: its JSON in its own order (property order is question
        order); None for what JSON cannot write."""
        try:
            return json.dumps(schema, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            return None

    def form(self, schema: Any, message: str, key: str | None = None) -> Form:
        """The form that asks ``schema`` with ``message``; raises :class:`.SchemaError` for one the
        gateway cannot (or may not) ask. ``key``: :meth:`key` of ``schema``, when already known."""
        if key is None and (key := self.key(schema)) is None:
            return self.convert(schema, message)
        with self._lock:
            cached = self._forms.get(key)
            if cached is not None:
                self._forms.move_to_end(key)
        if cached is None:
            plain = self.convert(schema, "")
            if plain.legacy:  # its only question is worded from the message: nothing to share
                return self.convert(schema, message)
            self._keep(key, plain)
        else:
            plain = cached[0]
        return inherit_footprint(with_message(plain, message, self.limits.max_text_length), plain)

    def convert(self, schema: Any, message: str) -> Form:
        limits = self.limits
        return build_form(
            schema,
            message,
            header_length=limits.header_length,
            max_questions=limits.max_questions,
            max_options=limits.max_options,
            max_text_length=limits.max_text_length,
            allow_sensitive=limits.allow_sensitive,
        )

    def _keep(self, key: str, form: Form) -> None:
        for question in form.questions:  # shared by every request that asks this schema
            question.shared()
        size = footprint(form) + held(key)
        if size > self.max_bytes // 8:
            return
        with self._lock:
            if key in self._forms:
                return
            self._forms[key] = (form, size)
            self.size += size
            while self.size > self.max_bytes:
                _, (_, dropped) = self._forms.popitem(last=False)
                self.size -= dropped

    def clear(self) -> None:
        with self._lock:
            self._forms.clear()
            self.size = 0

    def __len__(self) -> int:
        return len(self._forms)
