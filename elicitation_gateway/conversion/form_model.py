"""A converted schema: the :class:`Form` type, the refusal of a schema (:class:`SchemaError`), and the
constants of forms (pure)."""

from typing import Any

from pydantic import BaseModel, ConfigDict

from elicitation_gateway.conversion.fields import Field
from elicitation_gateway.models import QuestionInfo

SOFT_QUESTION_LIMIT = 10
"""More questions than this still work, but are hard to answer well; the gateway logs a warning."""
CONFIRM_KEY = "confirm"
"""The key of a confirmation's only field: the content never holds it."""
CONFIRM_HEADER = "Confirm"
CONFIRM_TEXT = "Do you confirm?"
"""A confirmation's question when neither the message nor the schema has words for it."""


class SchemaError(ValueError):
    """A ``requestedSchema`` the gateway cannot ask; ``code`` goes on the wire."""

    def __init__(self, message: str, code: str = "invalid_schema") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class Form(BaseModel):
    """A converted schema: ``questions[i]`` shows ``fields[i]``."""

    model_config = ConfigDict(frozen=True)

    fields: tuple[Field, ...]
    questions: tuple[QuestionInfo, ...]
    texts: tuple[str, ...] = ()
    """Each question's own words (its title or description), without the message or the hints that
    ``questions[i].question`` adds for clients that show only the question: for forms that show them
    apart."""
    legacy: bool = False
    """A top-level enum or array of enum: the content is ``{"value": ...}``."""
    confirm: bool = False
    """A schema with no properties: one Yes/No question, the message. Yes accepts with ``{}`` as the
    content, No declines (:func:`.answers.answers_to_result`)."""


FORM_FIELDS = {"fields", "questions", "texts", "legacy", "confirm"}
"""A form's field names: shared by the forms built without validation."""


def json_type(value: Any) -> str:
    """A JSON value's type as a refusal names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"
