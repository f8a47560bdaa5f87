"""Every JSON body of the HTTP API as a model: the routes build (or validate) their bodies with these,
and ``GET /doc`` takes its schemas from the same models, so the document cannot list other keys.

Bodies the gateway sends leave out their None fields (``exclude_none``): an optional field is absent,
never null. OpenCode's ``QuestionRequest`` is in :mod:`elicitation_gateway.models`, MCP's params and
results come from the MCP SDK.
"""

from collections.abc import Mapping
from typing import Any, Literal

from mcp.types import ElicitRequestFormParams, ElicitResult
from mcp_types.jsonrpc import JSONRPCRequest, JSONRPCResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from elicitation_gateway.conversion.answers import Issue
from elicitation_gateway.conversion.fields import Field as ConversionField
from elicitation_gateway.conversion.fields import Kind, Option
from elicitation_gateway.conversion.schema import hints
from elicitation_gateway.encoding import JsonResponse
from elicitation_gateway.models import QuestionInfo
from elicitation_gateway.records import Status


class Body(BaseModel):
    """A body the gateway sends. ``extra="forbid"``: a key a route adds without its model fails."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def json_response(
    body: BaseModel, status_code: int = 200, headers: Mapping[str, str] | None = None
) -> JsonResponse:
    """``body`` on the wire, without its None fields.

    Encoded by the same ``json`` as Starlette's other bodies and the events (not ``model_dump_json``,
    which writes ``1e-05`` as ``1e-5``), so a number in a result or a form is the same bytes everywhere.
    """
    return JsonResponse(wire(body), status_code, headers)


def wire(body: BaseModel) -> dict[str, Any]:
    """``body`` as the JSON it is sent as: its aliases, without its None fields."""
    return body.model_dump(mode="json", by_alias=True, exclude_none=True)


# ---------------------------------------------------------------------------------------------------
# Errors


class ErrorBody(Body):
    """The gateway's own error body: the tool side's refusals, and any side's 401 or 429."""

    error: str = Field(description="A stable code, e.g. invalid_schema.")
    message: str = Field(description="A sentence naming what is wrong.")
    status: Status | None = Field(None, description="How the elicitation already finished (409).")


class BadRequestData(Body):
    message: str
    kind: Literal["Params", "Payload"] = Field(description="Params: the path; Payload: the body.")
    issues: list[Issue] | None = Field(
        None, description="Answers that do not fit their questions, one per question (a reply's 400)."
    )


class BadRequest(Body):
    """OpenCode's 400 on the answerer side."""

    name: Literal["BadRequest"] = "BadRequest"
    data: BadRequestData


class QuestionNotFoundError(Body):
    """OpenCode's 404 on the answerer side: an unknown or finished question request."""

    tag: Literal["QuestionNotFoundError"] = Field("QuestionNotFoundError", alias="_tag")
    requestID: str
    message: str


# ---------------------------------------------------------------------------------------------------
# The tool side


class EscalationStep(BaseModel):
    """One step of ``escalate``: if nobody has answered ``after`` seconds after the ask, the question
    also reaches ``to``."""

    model_config = ConfigDict(extra="forbid")

    after: float = Field(gt=0, description="Seconds after the ask.")
    to: list[str] = Field(
        min_length=1, description="People and group:NAMEs of GATEWAY_PEOPLE it then reaches."
    )


class AskParams(ElicitRequestFormParams):
    """MCP's ``ElicitRequestFormParams``, and the gateway's own keys beside them."""

    to: list[str] | None = Field(
        None,
        max_length=50,
        description="The people and groups of GATEWAY_PEOPLE the question is for; absent: everyone.",
    )
    escalate: list[EscalationStep] | None = Field(
        None,
        max_length=10,
        description="Whom the question also reaches, and is notified to, while nobody answers: steps "
        "ordered by after (needs GATEWAY_PEOPLE).",
    )


class JSONRPCElicitRequest(JSONRPCRequest):
    """``POST /elicit`` also takes the params inside a JSON-RPC ``elicitation/create`` request (read as
    the SDK's ``JSONRPCRequest``, then its params as ``AskParams``)."""

    method: Literal["elicitation/create"]
    params: AskParams  # type: ignore[assignment]  (narrower than a request's params)


class AnsweredResult(ElicitResult):
    """The MCP ``ElicitResult``, and on a gateway with people who answered or declined it."""

    answered_by: str | None = Field(
        None,
        description="The person who answered or declined (GATEWAY_PEOPLE, docs/teams.md); absent when "
        "nobody signed in as a person did.",
    )


class JSONRPCElicitResponse(JSONRPCResponse):
    """The answer to a JSON-RPC ``elicitation/create`` request: its id and the ``ElicitResult``."""

    result: AnsweredResult  # type: ignore[assignment]  (narrower than a response's result)


class ElicitationStatus(Body):
    """An elicitation as ``/elicitations`` shows it; ``result`` once it has finished."""

    id: str
    status: Status
    result: AnsweredResult | None = Field(None, description="The MCP ElicitResult, once finished.")


# ---------------------------------------------------------------------------------------------------
# The answerer side


class QuestionReply(BaseModel):
    """OpenCode's reply body (extra keys are ignored, as OpenCode does)."""

    model_config = ConfigDict(strict=True)

    answers: list[list[str]] = Field(
        description="answers[i] answers questions[i]: labels or free text; [] is unanswered."
    )


class QuestionReject(BaseModel):
    """OpenCode's reject takes no body; the gateway also reads ``{"action": "decline"}``."""

    action: Literal["decline", "cancel"] = Field("cancel", description="cancel dismisses (the default).")


class FormField(Body):
    """One question of a pending request as a form field: a conversion ``Field`` (what the answer is
    checked against) and the words the person sees; camelCase on the wire, as ``Field`` is."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, validate_by_name=True)

    key: str
    kind: Kind
    required: bool
    options: tuple[Option, ...] | None = Field(
        None, description="choice and multi: the value the content carries, the label the person sees."
    )
    minimum: int | float | None = None
    maximum: int | float | None = None
    exclusive_minimum: int | float | None = None
    exclusive_maximum: int | float | None = None
    multiple_of: int | float | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None
    pattern: str | None = None
    min_items: int | None = None
    max_items: int | None = None
    warning: str | None = Field(
        None, description="A caution the person sees beside the question: it may ask for a secret."
    )
    default: Any = Field(None, description="The property's default, as the content would carry it.")
    header: str
    question: str = Field(
        description="The question as OpenCode clients show it: with the message (first question) and hints."
    )
    text: str = Field(description="The question's own words, without the message or the hints.")
    hints: list[str] = Field(
        description="What `question` adds in parentheses: kind, range, format, count, default."
    )

    @classmethod
    def of(cls, field: ConversionField, question: QuestionInfo, text: str) -> "FormField":
        """Every check of ``field``: one added to ``Field`` but not here fails at once (extra="forbid")."""
        return cls(
            **field.model_dump(exclude={"has_default", "default", "options"}),
            options=field.options or None,
            default=field.default if field.has_default else None,
            header=question.header,
            question=question.question,
            text=text,
            hints=hints(field),
        )


class QuestionForm(Body):
    """``GET /question/{requestID}/form``: a pending request with what each question accepts."""

    id: str
    sessionID: str
    message: str
    asker: str | None = Field(
        None,
        description="Who asks, as the tool says it (the proxy: server · tool): shown apart from the message.",
    )
    to: list[str] | None = Field(
        None, description="The people and groups the question is for (GATEWAY_PEOPLE); absent: everyone."
    )
    legacy: bool = Field(description='A top-level enum (or array of enum): the content is {"value": ...}.')
    confirm: bool = Field(
        False,
        description="A schema with no properties: one Yes/No question; Yes accepts with empty content, "
        "No declines.",
    )
    expiresAt: float = Field(description="When the question expires, in seconds since the epoch.")
    onTimeout: Literal["cancel", "default"] = Field(
        description="What the tool gets at expiry: cancel, or the schema's defaults accepted."
    )
    fields: list[FormField]


# ---------------------------------------------------------------------------------------------------
# Operations


class GlobalHealth(Body):
    """OpenCode's health shape."""

    healthy: bool
    version: str


class Healthz(Body):
    """For orchestrators (`/readyz`, `/healthz`): serving only with its store reachable and writable,
    and not shutting down."""

    status: Literal["ok", "unavailable"]
    store: Literal["ok", "unavailable"]
    upstream: Literal["ok", "unavailable"] | None = Field(
        None,
        description="The bridged OpenCode server's health; only in bridge mode (`GATEWAY_OPENCODE_URL`).",
    )
    reason: str | None = Field(
        None,
        description="Why it is not serving, for an operator (the store unreachable, its file deleted, its "
        "disk full; shutting down; the upstream unreachable); absent while serving.",
    )
    version: str


class Livez(Body):
    """For liveness probes: the process runs and its event loop answers. It checks neither the store nor
    the bridged OpenCode server, whose outage a restart would not mend."""

    status: Literal["ok"]
    version: str
