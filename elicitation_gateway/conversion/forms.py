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
from typing import Any

from elicitation_gateway.conversion.schema import Form, build_form, with_message

BYTES_PER_QUESTION = 2600
BYTES_PER_OPTION = 550
"""What a question and an option hold in memory besides their text (the models, their fields, the
encodings kept with them), measured with tracemalloc on CPython 3.11 (see ``tests/unit/test_forms.py``)."""


def footprint(form: Form) -> int:
    """About how many bytes of memory ``form`` holds: a cost per question and per option, and its texts,
    counted twice (in the models, and in the JSON encoded from them)."""
    size = 0
    for field, question, text in zip(form.fields, form.questions, form.texts, strict=True):
        size += BYTES_PER_QUESTION + 2 * (len(question.question) + len(question.header) + len(text))
        for option in field.options:
            size += BYTES_PER_OPTION + 2 * (len(option.value) + len(option.label) + len(option.description))
    return size


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
        return with_message(plain, message, self.limits.max_text_length)

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
        size = footprint(form) + len(key)
        if size > self.max_bytes // 8:
            return
        for question in form.questions:  # shared by every request that asks this schema
            question.shared()
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
