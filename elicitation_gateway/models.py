"""Wire models in OpenCode's shapes (``QuestionRequest`` and friends), serialized without nulls."""

from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict

from elicitation_gateway.encoding import dumps


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

    def shared(self) -> "QuestionInfo":
        """Keep this question's encoding: it is shared by every request that asks its schema."""
        if "_wire_json" not in self.__dict__:
            self.__dict__["_wire_json"] = _compact(self.wire())
        return self

    def wire_json(self) -> str:
        return self.__dict__.get("_wire_json") or _compact(self.wire())


class QuestionTool(WireModel):
    messageID: str
    callID: str

    def wire_json(self) -> str:
        """``wire()`` as compact JSON, written here: both fields are strings, always present."""
        return '{"messageID":' + _compact(self.messageID) + ',"callID":' + _compact(self.callID) + "}"


class QuestionRequest(WireModel):
    id: str
    sessionID: str
    questions: list[QuestionInfo]
    tool: QuestionTool | None = None
    to: list[str] | None = None
    """The gateway's own: the people and groups it is for (``GATEWAY_PEOPLE``); absent: everyone's."""

    @classmethod
    def new(
        cls,
        id: str,
        sessionID: str,
        questions: list[QuestionInfo],
        tool: QuestionTool | None,
        to: list[str] | None = None,
    ) -> "QuestionRequest":
        """Of parts the gateway made and checked: not validated again, and one shared set of field
        names (pydantic's per-instance set costs more than the rest of the object)."""
        fields = {"id": id, "sessionID": sessionID, "questions": questions, "tool": tool, "to": to or None}
        return cls.model_construct(_REQUEST_FIELDS, **fields)

    @cached_property
    def wire_json(self) -> str:
        """The request as compact JSON, encoded once: listings and announcements splice it in. Made of
        its questions' own encodings, in ``wire()``'s key order."""
        head = f'{{"id":{_compact(self.id)},"sessionID":{_compact(self.sessionID)},"questions":['
        tool = "" if self.tool is None else ',"tool":' + self.tool.wire_json()
        to = "" if not self.to else ',"to":' + _compact(self.to)
        return head + ",".join(question.wire_json() for question in self.questions) + "]" + tool + to + "}"


_compact = dumps


_REQUEST_FIELDS = {"id", "sessionID", "questions", "tool", "to"}
"""Shared by every request ``QuestionRequest.new`` makes: pydantic copies it before any change."""
