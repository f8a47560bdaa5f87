"""``GET /doc``: the OpenAPI 3.1 document of every route, its schemas taken from the models in use."""

from functools import cache
from typing import Any

from mcp.types import ElicitRequestFormParams, ElicitResult
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from app import __version__
from app.models import QuestionRequest

REF = "#/components/schemas/{model}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _models() -> dict[str, Any]:
    models: list[tuple[type[BaseModel], Any]] = [
        (ElicitRequestFormParams, "validation"),
        (ElicitResult, "serialization"),
        (QuestionRequest, "serialization"),
    ]
    _, schema = models_json_schema(models, by_alias=True, ref_template=REF)
    return schema.get("$defs", {})


_HAND_WRITTEN: dict[str, Any] = {
    "ToolError": {
        "type": "object",
        "required": ["error", "message"],
        "properties": {
            "error": {"type": "string", "description": "A stable code, e.g. invalid_schema."},
            "message": {"type": "string", "description": "A sentence naming what is wrong."},
            "status": {"type": "string", "description": "The status of a finished elicitation (409)."},
        },
    },
    "BadRequest": {
        "type": "object",
        "required": ["name", "data"],
        "properties": {
            "name": {"const": "BadRequest"},
            "data": {
                "type": "object",
                "required": ["message", "kind"],
                "properties": {
                    "message": {"type": "string"},
                    "kind": {"enum": ["Params", "Payload"]},
                    "issues": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["index", "header", "message"],
                            "properties": {
                                "index": {"type": "integer"},
                                "header": {"type": "string"},
                                "message": {"type": "string"},
                            },
                        },
                    },
                },
            },
        },
    },
    "QuestionNotFoundError": {
        "type": "object",
        "required": ["_tag", "requestID", "message"],
        "properties": {
            "_tag": {"const": "QuestionNotFoundError"},
            "requestID": {"type": "string"},
            "message": {"type": "string"},
        },
    },
    "JSONRPCElicitRequest": {
        "type": "object",
        "required": ["jsonrpc", "id", "method", "params"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["integer", "string"]},
            "method": {"const": "elicitation/create"},
            "params": _ref("ElicitRequestFormParams"),
        },
    },
    "JSONRPCReply": {
        "type": "object",
        "required": ["jsonrpc"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["integer", "string", "null"]},
            "result": _ref("ElicitResult"),
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
            },
        },
    },
    "ElicitationStatus": {
        "type": "object",
        "required": ["id", "status"],
        "properties": {
            "id": {"type": "string"},
            "status": {"enum": ["pending", "answered", "declined", "cancelled", "expired"]},
            "result": _ref("ElicitResult"),
        },
    },
    "QuestionReply": {
        "type": "object",
        "required": ["answers"],
        "properties": {
            "answers": {
                "type": "array",
                "description": "answers[i] answers questions[i]: labels or free text; [] is unanswered.",
                "items": {"type": "array", "items": {"type": "string"}},
            }
        },
    },
    "QuestionReject": {
        "type": "object",
        "properties": {"action": {"enum": ["decline", "cancel"]}},
    },
    "QuestionForm": {
        "type": "object",
        "required": ["id", "sessionID", "message", "legacy", "expiresAt", "fields"],
        "properties": {
            "id": {"type": "string"},
            "sessionID": {"type": "string"},
            "message": {"type": "string"},
            "legacy": {"type": "boolean"},
            "expiresAt": {"type": "number"},
            "fields": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["key", "kind", "required", "header", "question", "text", "hints"],
                    "properties": {
                        "key": {"type": "string"},
                        "kind": {
                            "enum": ["choice", "multi", "boolean", "integer", "number", "string", "text"]
                        },
                        "required": {"type": "boolean"},
                        "header": {"type": "string"},
                        "question": {
                            "type": "string",
                            "description": "The question as OpenCode clients show it: with the "
                            "message (first question) and the hints",
                        },
                        "text": {
                            "type": "string",
                            "description": "The question's own words, without the message or hints",
                        },
                        "hints": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "What `question` adds in parentheses: kind, range, format, "
                            "count, default",
                        },
                        "options": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["value", "label", "description"],
                                "properties": {
                                    "value": {"type": "string"},
                                    "label": {"type": "string"},
                                    "description": {"type": "string"},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
    "GlobalHealth": {
        "type": "object",
        "required": ["healthy", "version"],
        "properties": {"healthy": {"type": "boolean"}, "version": {"type": "string"}},
    },
    "Healthz": {
        "type": "object",
        "required": ["status", "store", "version"],
        "properties": {
            "status": {"enum": ["ok", "unavailable"]},
            "store": {"enum": ["ok", "unavailable"]},
            "version": {"type": "string"},
        },
    },
}

_TOOL_ERRORS = {
    "400": _json(_ref("ToolError"), "Malformed request, params or schema; nothing was asked."),
    "401": _json(_ref("ToolError"), "The tool token is required."),
    "413": _json(_ref("ToolError"), "The body is larger than the limit."),
    "422": _json(
        _ref("ToolError"), "The schema is over a limit (questions, options, text) or asks for a secret."
    ),
    "429": _json(_ref("ToolError"), "Too many questions pending."),
    "503": _json(_ref("ToolError"), "The gateway is shutting down or its store is unavailable."),
}

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
]

_DIRECTORY = [
    {"name": "directory", "in": "query", "schema": {"type": "string"}},
    {"name": "workspace", "in": "query", "schema": {"type": "string"}},
    {"name": "x-opencode-directory", "in": "header", "schema": {"type": "string"}},
]
_REQUEST_ID = {"name": "requestID", "in": "path", "required": True, "schema": {"type": "string"}}
_ELICITATION_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
_ANSWERER_401 = {"401": _json(_ref("ToolError"), "The answerer's HTTP Basic credentials are required.")}
_STREAM = {
    "description": "Server-Sent Events; every frame's data is an event {id, type, properties}.",
    "content": {"text/event-stream": {"schema": {"type": "string"}}},
}
_ASK_BODY = {
    "required": True,
    "content": {"application/json": {"schema": _ref("ElicitRequestFormParams")}},
}


def _paths() -> dict[str, Any]:
    question_list = {
        "get": {
            "operationId": "question.list",
            "summary": "Pending question requests, oldest first.",
            "parameters": _DIRECTORY,
            "responses": {
                "200": _json({"type": "array", "items": _ref("QuestionRequest")}, "Pending requests."),
                **_ANSWERER_401,
            },
        }
    }
    answerer_errors = {
        "400": _json(_ref("BadRequest"), "Malformed id or body, or answers that do not fit (data.issues)."),
        **_ANSWERER_401,
        "404": _json(_ref("QuestionNotFoundError"), "Unknown or finished request."),
        "413": _json(_ref("BadRequest"), "The body is larger than the limit."),
    }
    return {
        "/elicit": {
            "post": {
                "operationId": "elicit",
                "summary": "Ask and wait for the answer.",
                "parameters": _ASK_PARAMETERS,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "oneOf": [_ref("ElicitRequestFormParams"), _ref("JSONRPCElicitRequest")]
                            }
                        }
                    },
                },
                "responses": {
                    "200": _json(
                        {"oneOf": [_ref("ElicitResult"), _ref("JSONRPCReply")]},
                        "The ElicitResult (or a JSON-RPC response for a JSON-RPC request).",
                    ),
                    **_TOOL_ERRORS,
                },
            }
        },
        "/elicitations": {
            "post": {
                "operationId": "elicitations.create",
                "summary": "Ask without waiting.",
                "parameters": _ASK_PARAMETERS,
                "requestBody": _ASK_BODY,
                "responses": {
                    "201": {
                        **_json(_ref("ElicitationStatus"), "Asked."),
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
                    **_TOOL_ERRORS,
                },
            }
        },
        "/elicitations/{id}": {
            "get": {
                "operationId": "elicitations.get",
                "summary": "Status and result; long-polls with wait.",
                "parameters": [
                    _ELICITATION_ID,
                    {"name": "wait", "in": "query", "schema": {"type": "number", "exclusiveMinimum": 0}},
                ],
                "responses": {
                    "200": _json(_ref("ElicitationStatus"), "The elicitation."),
                    "400": _TOOL_ERRORS["400"],
                    "401": _TOOL_ERRORS["401"],
                    "404": _json(_ref("ToolError"), "Unknown, or finished too long ago."),
                    "503": _TOOL_ERRORS["503"],
                },
            },
            "delete": {
                "operationId": "elicitations.withdraw",
                "summary": "Withdraw a pending question.",
                "parameters": [_ELICITATION_ID],
                "responses": {
                    "200": _json(_ref("ElicitationStatus"), "Withdrawn: cancelled."),
                    "401": _TOOL_ERRORS["401"],
                    "404": _json(_ref("ToolError"), "Unknown."),
                    "409": _json(_ref("ToolError"), "Already finished; status says how."),
                    "503": _TOOL_ERRORS["503"],
                },
            },
        },
        "/question": question_list,
        "/question/": {"get": {**question_list["get"], "operationId": "question.list.slash"}},
        "/question/{requestID}/reply": {
            "post": {
                "operationId": "question.reply",
                "summary": "Answer a question request.",
                "parameters": [_REQUEST_ID, *_DIRECTORY],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("QuestionReply")}},
                },
                "responses": {"200": _json({"type": "boolean"}, "Answered."), **answerer_errors},
            }
        },
        "/question/{requestID}/reject": {
            "post": {
                "operationId": "question.reject",
                "summary": "Dismiss (cancel) or decline a question request.",
                "parameters": [_REQUEST_ID, *_DIRECTORY],
                "requestBody": {"content": {"application/json": {"schema": _ref("QuestionReject")}}},
                "responses": {"200": _json({"type": "boolean"}, "Rejected."), **answerer_errors},
            }
        },
        "/question/{requestID}/form": {
            "get": {
                "operationId": "question.form",
                "summary": "What each question of a pending request accepts.",
                "parameters": [_REQUEST_ID],
                "responses": {
                    "200": _json(_ref("QuestionForm"), "The request's questions, as form fields."),
                    "400": answerer_errors["400"],
                    **_ANSWERER_401,
                    "404": answerer_errors["404"],
                },
            }
        },
        "/event": {
            "get": {
                "operationId": "event.subscribe",
                "summary": "The event stream; ?directory= keeps that directory's questions.",
                "parameters": [
                    *_DIRECTORY,
                    {"name": "last_event_id", "in": "query", "schema": {"type": "string"}},
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
                ],
                "responses": {"200": _STREAM, **_ANSWERER_401, "429": _TOOL_ERRORS["429"]},
            }
        },
        "/global/event": {
            "get": {
                "operationId": "global.event",
                "summary": "The event stream, each frame wrapped as {directory, payload}.",
                "parameters": [
                    {"name": "last_event_id", "in": "query", "schema": {"type": "string"}},
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
                ],
                "responses": {"200": _STREAM, **_ANSWERER_401, "429": _TOOL_ERRORS["429"]},
            }
        },
        "/": {
            "get": {
                "operationId": "page",
                "summary": "The web page for answering questions.",
                "responses": {
                    "200": {"description": "HTML.", "content": {"text/html": {"schema": {"type": "string"}}}},
                    **_ANSWERER_401,
                },
            }
        },
        "/mcp": {
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
                    "401": _TOOL_ERRORS["401"],
                },
            }
        },
        "/global/health": {
            "get": {
                "operationId": "global.health",
                "responses": {
                    "200": _json(_ref("GlobalHealth"), "Healthy."),
                    "503": _json(_ref("GlobalHealth"), "Not healthy."),
                },
            }
        },
        "/healthz": {
            "get": {
                "operationId": "healthz",
                "responses": {
                    "200": _json(_ref("Healthz"), "Serving."),
                    "503": _json(_ref("Healthz"), "Not serving: store unavailable or shutting down."),
                },
            }
        },
        "/metrics": {
            "get": {
                "operationId": "metrics",
                "responses": {
                    "200": {
                        "description": "Prometheus text exposition.",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/doc": {
            "get": {
                "operationId": "doc",
                "responses": {"200": _json({"type": "object"}, "This document.")},
            }
        },
    }


@cache
def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Elicitation Gateway",
            "version": __version__,
            "description": "MCP elicitations asked as OpenCode questions over Server-Sent Events.",
        },
        "paths": _paths(),
        "components": {
            "schemas": {**_models(), **_HAND_WRITTEN},
            "securitySchemes": {
                "tool": {"type": "http", "scheme": "bearer", "description": "GATEWAY_TOOL_TOKEN"},
                "answerer": {"type": "http", "scheme": "basic", "description": "OPENCODE_SERVER_PASSWORD"},
            },
        },
    }
