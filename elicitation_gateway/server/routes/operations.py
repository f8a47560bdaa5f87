"""What the OpenAPI document (``GET /doc``) says of each route: every row of the route table
(:mod:`.table`) names one of these, so no route is served without its operations.

Each is a function of ``ref``, which gives the reference to a body model's schema among the document's
components, and returns the row's operations by method (as OpenAPI writes it, lower-case). Written
here is only what has no model: operation ids (OpenCode's among them), summaries, parameters and the
responses' descriptions. What the route table decides is added by :mod:`..openapi`: ``security`` and
the ``401``, ``403``, ``415`` and ``421`` responses.
"""

import mimetypes
from collections.abc import Callable
from typing import Any

from mcp_types.jsonrpc import JSONRPCError
from pydantic import BaseModel

from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.server.bodies import (
    AnsweredResult,
    AskParams,
    BadRequest,
    ElicitationStatus,
    ErrorBody,
    GlobalHealth,
    Healthz,
    JSONRPCElicitRequest,
    JSONRPCElicitResponse,
    Livez,
    QuestionForm,
    QuestionNotFoundError,
    QuestionReject,
    QuestionReply,
)
from elicitation_gateway.server.routes.page import STATIC_DIRECTORY

Ref = Callable[[type[BaseModel]], dict[str, str]]
"""``ref(Model)``: the reference to ``Model``'s schema in the document's components."""

Operations = Callable[[Ref], dict[str, dict[str, Any]]]
"""A row's operations, by method."""


def json_body(schema: dict[str, Any], description: str) -> dict[str, Any]:
    """A response of JSON."""
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ASK_PARAMETERS = [
    {"name": "sessionID", "in": "query", "schema": {"type": "string"}, "description": "OpenCode session."},
    {"name": "directory", "in": "query", "schema": {"type": "string"}, "description": "Project directory."},
    {
        "name": "messageID",
        "in": "query",
        "schema": {"type": "string"},
        "description": "Becomes tool.messageID.",
    },
    {"name": "callID", "in": "query", "schema": {"type": "string"}, "description": "Becomes tool.callID."},
    {
        "name": "timeout",
        "in": "query",
        "schema": {"type": "number", "exclusiveMinimum": 0},
        "description": "Seconds to wait for an answer (capped by GATEWAY_MAX_TIMEOUT).",
    },
    {
        "name": "onTimeout",
        "in": "query",
        "schema": {"type": "string", "enum": ["cancel", "default"], "default": "cancel"},
        "description": "At expiry: cancel, or accept the schema's defaults (every required field needs one).",
    },
    {
        "name": "asker",
        "in": "query",
        "schema": {"type": "string", "maxLength": 256},
        "description": "Who asks (a proxy: server · tool): answerers show it apart from the message.",
    },
]
_DIRECTORY = [
    {"name": "directory", "in": "query", "schema": {"type": "string"}},
    {"name": "workspace", "in": "query", "schema": {"type": "string"}},
    {"name": "x-opencode-directory", "in": "header", "schema": {"type": "string"}},
]
_LAST_EVENT_ID = [
    {"name": "last_event_id", "in": "query", "schema": {"type": "string"}},
    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
]
_REQUEST_ID = {"name": "requestID", "in": "path", "required": True, "schema": {"type": "string"}}
_ELICITATION_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
_STREAM = {
    "description": "Server-Sent Events; every frame's data is an event {id, type, properties}.",
    "content": {"text/event-stream": {"schema": {"type": "string"}}},
}


# ---------------------------------------------------------------------------------------------------
# The tool side


def _tool_errors(ref: Ref) -> dict[str, Any]:
    return {
        "400": json_body(ref(ErrorBody), "Malformed request, params or schema; nothing was asked."),
        "413": json_body(ref(ErrorBody), "The body is larger than the limit."),
        "422": json_body(
            ref(ErrorBody), "The schema is over a limit (questions, options, text) or asks for a secret."
        ),
        "429": json_body(ref(ErrorBody), "Too many questions pending."),
        "503": json_body(ref(ErrorBody), "The gateway is shutting down or its store is unavailable."),
    }


def elicit(ref: Ref) -> dict[str, Any]:
    return {
        "post": {
            "operationId": "elicit",
            "summary": "Ask and wait for the answer.",
            "parameters": _ASK_PARAMETERS,
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": {"oneOf": [ref(AskParams), ref(JSONRPCElicitRequest)]}}
                },
            },
            "responses": {
                "200": json_body(
                    {"oneOf": [ref(AnsweredResult), ref(JSONRPCElicitResponse), ref(JSONRPCError)]},
                    "The ElicitResult; for a JSON-RPC request, a JSON-RPC response (errors included).",
                ),
                **_tool_errors(ref),
            },
        }
    }


def elicitations_create(ref: Ref) -> dict[str, Any]:
    return {
        "post": {
            "operationId": "elicitations.create",
            "summary": "Ask without waiting.",
            "parameters": _ASK_PARAMETERS,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ref(AskParams)}},
            },
            "responses": {
                "201": {
                    **json_body(ref(ElicitationStatus), "Asked."),
                    "links": {
                        "Status": {
                            "operationId": "elicitations.get",
                            "parameters": {"id": "$response.body#/id"},
                        },
                        "Withdraw": {
                            "operationId": "elicitations.withdraw",
                            "parameters": {"id": "$response.body#/id"},
                        },
                    },
                },
                **_tool_errors(ref),
            },
        }
    }


def elicitations_get(ref: Ref) -> dict[str, Any]:
    errors = _tool_errors(ref)
    return {
        "get": {
            "operationId": "elicitations.get",
            "summary": "Status and result; long-polls with wait.",
            "parameters": [
                _ELICITATION_ID,
                {"name": "wait", "in": "query", "schema": {"type": "number", "exclusiveMinimum": 0}},
            ],
            "responses": {
                "200": json_body(ref(ElicitationStatus), "The elicitation."),
                "400": errors["400"],
                "404": json_body(ref(ErrorBody), "Unknown, or finished too long ago."),
                "503": errors["503"],
            },
        }
    }


def elicitations_withdraw(ref: Ref) -> dict[str, Any]:
    return {
        "delete": {
            "operationId": "elicitations.withdraw",
            "summary": "Withdraw a pending question.",
            "parameters": [_ELICITATION_ID],
            "responses": {
                "200": json_body(ref(ElicitationStatus), "Withdrawn: cancelled."),
                "404": json_body(ref(ErrorBody), "Unknown."),
                "409": json_body(ref(ErrorBody), "Already finished; status says how."),
                "503": _tool_errors(ref)["503"],
            },
        }
    }


# ---------------------------------------------------------------------------------------------------
# The answerer side


def _answerer_errors(ref: Ref) -> dict[str, Any]:
    return {
        "400": json_body(ref(BadRequest), "Malformed id or body, or answers that do not fit (data.issues)."),
        "404": json_body(ref(QuestionNotFoundError), "Unknown or finished request."),
        "413": json_body(ref(BadRequest), "The body is larger than the limit."),
    }


def _question_list(operation_id: str) -> Operations:
    """``GET /question``, and the same with a trailing slash under an id of its own."""

    def question_list(ref: Ref) -> dict[str, Any]:
        return {
            "get": {
                "operationId": operation_id,
                "summary": "Pending question requests, oldest first.",
                "parameters": _DIRECTORY,
                "responses": {
                    "200": json_body({"type": "array", "items": ref(QuestionRequest)}, "Pending requests.")
                },
            }
        }

    return question_list


question_list = _question_list("question.list")
question_list_slash = _question_list("question.list.slash")


def question_reply(ref: Ref) -> dict[str, Any]:
    return {
        "post": {
            "operationId": "question.reply",
            "summary": "Answer a question request.",
            "parameters": [_REQUEST_ID, *_DIRECTORY],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ref(QuestionReply)}},
            },
            "responses": {"200": json_body({"type": "boolean"}, "Answered."), **_answerer_errors(ref)},
        }
    }


def question_reject(ref: Ref) -> dict[str, Any]:
    return {
        "post": {
            "operationId": "question.reject",
            "summary": "Dismiss (cancel) or decline a question request.",
            "parameters": [_REQUEST_ID, *_DIRECTORY],
            "requestBody": {"content": {"application/json": {"schema": ref(QuestionReject)}}},
            "responses": {"200": json_body({"type": "boolean"}, "Rejected."), **_answerer_errors(ref)},
        }
    }


def question_form(ref: Ref) -> dict[str, Any]:
    errors = _answerer_errors(ref)
    return {
        "get": {
            "operationId": "question.form",
            "summary": "What each question of a pending request accepts.",
            "parameters": [_REQUEST_ID],
            "responses": {
                "200": json_body(ref(QuestionForm), "The request's questions, as form fields."),
                "400": errors["400"],
                "404": errors["404"],
            },
        }
    }


def _too_many_streams(ref: Ref) -> dict[str, Any]:
    return {"429": json_body(ref(ErrorBody), "Too many event streams open.")}


def event(ref: Ref) -> dict[str, Any]:
    return {
        "get": {
            "operationId": "event.subscribe",
            "summary": "The event stream; ?directory= keeps that directory's questions.",
            "parameters": [*_DIRECTORY, *_LAST_EVENT_ID],
            "responses": {"200": _STREAM, **_too_many_streams(ref)},
        }
    }


def global_event(ref: Ref) -> dict[str, Any]:
    return {
        "get": {
            "operationId": "global.event",
            "summary": "The event stream, each frame wrapped as {directory, payload}.",
            "parameters": _LAST_EVENT_ID,
            "responses": {"200": _STREAM, **_too_many_streams(ref)},
        }
    }


# ---------------------------------------------------------------------------------------------------
# The web page and MCP


def page(ref: Ref) -> dict[str, Any]:
    return {
        "get": {
            "operationId": "page",
            "summary": "The web page for answering questions.",
            "responses": {
                "200": {"description": "HTML.", "content": {"text/html": {"schema": {"type": "string"}}}}
            },
        }
    }


_TOKEN = {"name": "token", "in": "path", "required": True, "schema": {"type": "string"}}
_LINK_REFUSALS = {
    "400": {
        "description": "Not a link the gateway made.",
        "content": {"text/html": {"schema": {"type": "string"}}},
    },
    "403": {
        "description": "A signature that does not match, or a person no longer listed.",
        "content": {"text/html": {"schema": {"type": "string"}}},
    },
    "404": {"description": "No such question.", "content": {"text/html": {"schema": {"type": "string"}}}},
    "410": {
        "description": "The link expired, or its question is over (answered, declined, withdrawn, expired).",
        "content": {"text/html": {"schema": {"type": "string"}}},
    },
}


def link_show(ref: Ref) -> dict[str, Any]:
    return {
        "get": {
            "operationId": "link.show",
            "summary": "A one-tap link's page: the question and one button. Changes nothing.",
            "parameters": [_TOKEN],
            "responses": {
                "200": {"description": "HTML.", "content": {"text/html": {"schema": {"type": "string"}}}},
                **_LINK_REFUSALS,
            },
        }
    }


def link_answer(ref: Ref) -> dict[str, Any]:
    return {
        "post": {
            "operationId": "link.answer",
            "summary": "Answer the link's question with its choice, as its person (the page's button).",
            "parameters": [_TOKEN],
            "responses": {
                "200": {
                    "description": "Answered (HTML).",
                    "content": {"text/html": {"schema": {"type": "string"}}},
                },
                **_LINK_REFUSALS,
            },
        }
    }


def static_files() -> dict[str, str]:
    """What ``/static`` serves: each file with the media type Starlette gives it (by ``mimetypes``)."""
    files = (path for path in STATIC_DIRECTORY.iterdir() if path.is_file())
    return {path.name: mimetypes.guess_type(path.name)[0] or "application/octet-stream" for path in files}


def page_files(ref: Ref) -> dict[str, Any]:
    files = static_files()
    return {
        "get": {
            "operationId": "page.file",
            "summary": "The page's files: its script, style and icon.",
            "parameters": [
                {
                    "name": "file",
                    "in": "path",
                    "required": True,
                    "schema": {"enum": sorted(files)},
                }
            ],
            "responses": {
                "200": {
                    "description": "The file.",
                    "content": {
                        media_type: {"schema": {"type": "string"}}
                        for media_type in sorted(set(files.values()))
                    },
                },
                "404": json_body(ref(ErrorBody), "No such file."),
            },
        }
    }


def mcp(ref: Ref) -> dict[str, Any]:
    """The transport answers every method; the document names the one that carries calls."""
    return {
        "post": {
            "operationId": "mcp",
            "summary": "MCP over Streamable HTTP, with one tool: question.",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {}}}},
            "responses": {
                "200": {
                    "description": "A JSON-RPC response, as JSON or as a Server-Sent Events stream.",
                    "content": {"application/json": {"schema": {}}, "text/event-stream": {"schema": {}}},
                },
                "202": {"description": "A notification or response was accepted."},
            },
        }
    }


# ---------------------------------------------------------------------------------------------------
# Operations


def global_health(ref: Ref) -> dict[str, Any]:
    return {
        "get": {
            "operationId": "global.health",
            "responses": {
                "200": json_body(ref(GlobalHealth), "Healthy."),
                "503": json_body(ref(GlobalHealth), "Not healthy."),
            },
        }
    }


def _readiness(operation_id: str, summary: str) -> Operations:
    """``/readyz`` and its older name ``/healthz``: one operation, two ids."""

    def readiness(ref: Ref) -> dict[str, Any]:
        return {
            "get": {
                "operationId": operation_id,
                "summary": summary,
                "responses": {
                    "200": json_body(ref(Healthz), "Serving."),
                    "503": json_body(ref(Healthz), "Not serving: store unavailable or shutting down."),
                },
            }
        }

    return readiness


healthz = _readiness("healthz", "Readiness, as `/readyz` (kept for existing probes).")
readyz = _readiness("readyz", "Readiness: the store reached and writable, not stopping (`reason`: why not).")


def livez(ref: Ref) -> dict[str, Any]:
    return {
        "get": {
            "operationId": "livez",
            "summary": "Liveness: the process runs and its event loop answers (no store, no upstream).",
            "responses": {"200": json_body(ref(Livez), "Alive.")},
        }
    }


def metrics(ref: Ref) -> dict[str, Any]:
    return {
        "get": {
            "operationId": "metrics",
            "responses": {
                "200": {
                    "description": "Prometheus text exposition.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    }


def audit(ref: Ref) -> dict[str, Any]:
    return {
        "get": {
            "operationId": "audit",
            "summary": "The audit trail, hash-chained, as JSON Lines (docs/teams.md#the-audit-trail).",
            "parameters": [
                {
                    "name": "since",
                    "in": "query",
                    "description": "Entries at or after this RFC 3339 time (or date).",
                    "schema": {"type": "string"},
                },
                {
                    "name": "question",
                    "in": "query",
                    "description": "Entries of this question only.",
                    "schema": {"type": "string"},
                },
            ],
            "responses": {
                "200": {
                    "description": "One entry a line: seq, at, event, question, who, via, answers, prev, "
                    "hash.",
                    "content": {"application/jsonl": {"schema": {"type": "string"}}},
                },
                "400": json_body(ref(ErrorBody), "A since that is no RFC 3339 time."),
                "503": _tool_errors(ref)["503"],
            },
        }
    }


def doc(ref: Ref) -> dict[str, Any]:
    return {
        "get": {
            "operationId": "doc",
            "responses": {"200": json_body({"type": "object"}, "This document.")},
        }
    }
