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

from elicitation_gateway.conversion.fields import Option
from elicitation_gateway.conversion.form_model import FORM_FIELDS, Form
from elicitation_gateway.conversion.options import OPTION_FIELDS
from elicitation_gateway.conversion.questions import Questions, form_from_questions
from elicitation_gateway.conversion.schema import build_form, with_message
from elicitation_gateway.conversion.wording import BOOLEAN_OPTIONS, QUESTION_FIELDS, QUESTION_OPTION_FIELDS
from elicitation_gateway.models import QuestionInfo
from elicitation_gateway.sizes import held, names_held

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
    size = FORM_BYTES + names_held(form, FORM_FIELDS) + 2 * SLOT * len(form.questions)
    return size + first_question_bytes(form) + shared_footprint(form)


def first_question_bytes(form: Form) -> int:
    """What ``form``'s first question holds besides its options and header: an ask with a message makes
    it anew (:func:`.schema.with_message`), and shares the rest of its schema's form."""
    return _question_bytes(form.questions[0])


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
        size += getsizeof(field.options) + SLOT + held(field.key)  # and its slot in ``texts``
        size += 0 if text is question.question else held(text)
        if field.pattern is not None:
            size += held(field.pattern)
        if index:  # the first question itself is each ask's own (first_question_bytes)
            size += _question_bytes(question)
        size += _options_bytes(question, field.options)
        if field.options:
            size += len(field.options) * (OPTION_BYTES + names_held(field.options[0], OPTION_FIELDS))
        for option in field.options:
            size += held(option.value)
            if option.label is not option.value:
                size += held(option.label)
            if option.description:
                size += held(option.description)
    return size


def _question_bytes(question: QuestionInfo) -> int:
    """A question's model and text, and its encoding when kept (not its header and options)."""
    size = QUESTION_BYTES + names_held(question, QUESTION_FIELDS) + held(question.question)
    if (encoded := question.__dict__.get("_wire_json")) is not None:
        size += ENCODED_BYTES + held(encoded)
    return size


def _options_bytes(question: QuestionInfo, checked: tuple[Option, ...] = ()) -> int:
    """A question's header and options as shown: their models and what text is not ``checked``'s."""
    shown = question.options
    size = held(question.header) + getsizeof(shown)
    if not shown or shown[0] is BOOLEAN_OPTIONS[0]:  # Yes and No: the same two for every question
        return size
    size += len(shown) * (OPTION_BYTES + names_held(shown[0], QUESTION_OPTION_FIELDS))
    for index, option in enumerate(shown):
        same = checked[index] if index < len(checked) else None
        if same is None or option.label is not same.label:
            size += held(option.label)
        if option.description and (same is None or option.description is not same.description):
            size += held(option.description)
    return size


def questions_footprint(questions: list[QuestionInfo]) -> int:
    """What questions of their own hold (a request read back from a store, not sharing its form's)."""
    return getsizeof(questions) + sum(_question_bytes(q) + _options_bytes(q) for q in questions)


def inherit_footprint(derived: Form, plain: Form) -> Form:
    """``derived`` (of ``plain`` and a message) shares what ``plain`` holds: it is counted once."""
    if derived is not plain:
        derived.__dict__[_SHARED] = shared_footprint(plain)
    return derived


@dataclass(frozen=True)
class Limits:
    """The limits :func:`.schema.build_form` and :func:`.questions.form_from_questions` check (the
    gateway's settings)."""

    header_length: int = 12
    max_questions: int = 50
    max_options: int | None = None
    max_text_length: int | None = None
    allow_sensitive: bool = False


_KEY = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
"""Made once: ``json.dumps`` with options makes an encoder for every call, here for every ask."""


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
        order); None for what JSON cannot write. ``schema`` may also be :class:`.Questions`."""
        if isinstance(schema, Questions):
            return schema.key()
        try:
            return _KEY.encode(schema)
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
        """The form that asks ``schema`` (a ``requestedSchema``, or :class:`.Questions`) with
        ``message``, made anew."""
        limits = vars(self.limits)  # its fields are the keyword arguments of both
        if isinstance(schema, Questions):
            return form_from_questions(schema.items, message, **limits)
        return build_form(schema, message, **limits)

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
