"""Wire models in OpenCode's shapes (``QuestionRequest`` and friends), serialized without nulls."""

import json
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def wire(self) -> dict:
        return self.model_dump(mode="json", exclude_none=True)


class QuestionOption(WireModel):
    label: str
    description: str = ""


class QuestionInfo(WireModel):
    question: str
    header: str
    options: list[QuestionOption]
    multiple: Literal[True] | None = None
    custom: Literal[False] | None = None


class QuestionTool(WireModel):
    messageID: str
    callID: str


class QuestionRequest(WireModel):
    id: str
    sessionID: str
    questions: list[QuestionInfo]
    tool: QuestionTool | None = None

    @classmethod
    def new(
        cls, id: str, sessionID: str, questions: list[QuestionInfo], tool: QuestionTool | None
    ) -> "QuestionRequest":
        """Of parts the gateway made and checked: not validated again, and one shared set of field
        names (pydantic's per-instance set costs more than the rest of the object)."""
        fields = {"id": id, "sessionID": sessionID, "questions": questions, "tool": tool}
        return cls.model_construct(_REQUEST_FIELDS, **fields)

    @cached_property
    def wire_json(self) -> str:
        """The request as compact JSON, encoded once: listings and announcements splice it in."""
        return json.dumps(self.wire(), ensure_ascii=False, separators=(",", ":"))


_REQUEST_FIELDS = {"id", "sessionID", "questions", "tool"}
"""Shared by every request ``QuestionRequest.new`` makes: pydantic copies it before any change."""
