"""``GET /doc``: the OpenAPI 3.1 document of every route.

Every schema comes from a model the routes build or validate their bodies with (:mod:`.bodies`, the MCP
SDK's, OpenCode's ``QuestionRequest``), and every operation's ``security`` from the route table
(:mod:`.routes.table`), which the access control itself asks: the document cannot list keys the
bodies do not have, nor a door the middleware does not keep, and each row of the table has its
operation here (or the document fails to build). Written here is only what has no model: operation
ids (OpenCode's among them), parameters and descriptions.
"""

import mimetypes
import re
from collections.abc import Callable
from functools import cache
from typing import Any

from mcp.types import ElicitRequestFormParams, ElicitResult
from mcp_types.jsonrpc import JSONRPCError
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue, models_json_schema
from pydantic_core import CoreSchema, core_schema

from elicitation_gateway import __version__
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.server.bodies import (
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
from elicitation_gateway.server.routes.table import ROUTES, Row
from elicitation_gateway.server.security import Role
from elicitation_gateway.settings import Settings

REF = "#/components/schemas/{model}"

REQUEST_BODIES: tuple[type[BaseModel], ...] = (
    ElicitRequestFormParams,
    JSONRPCElicitRequest,
    QuestionReply,
    QuestionReject,
)
"""What the routes accept: described as validation takes it."""

RESPONSE_BODIES: tuple[type[BaseModel], ...] = (
    ElicitResult,
    JSONRPCElicitResponse,
    JSONRPCError,
    ElicitationStatus,
    ErrorBody,
    BadRequest,
    QuestionNotFoundError,
    QuestionRequest,
    QuestionForm,
    GlobalHealth,
    Healthz,
    Livez,
)
"""What the routes send: described as serialization writes it."""


class WireJsonSchema(GenerateJsonSchema):
    """Bodies as sent. The gateway leaves out None fields (``exclude_none``), so in serialization mode a
    field that defaults to None is optional and never null, and every other field is always there."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        if self.mode == "serialization" and field["type"] != "typed-dict-field":
            return not _defaults_to_none(field["schema"])
        return super().field_is_required(field, total)

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        if self.mode == "serialization" and _defaults_to_none(schema):
            inner = schema["schema"]
            return self.generate_inner(inner["schema"] if inner["type"] == "nullable" else inner)
        return super().default_schema(schema)

    def field_title_should_be_set(self, schema: Any) -> bool:
        """Field names are their own titles: ``"title": "Id"`` on every property says nothing."""
        return False


def _defaults_to_none(schema: CoreSchema) -> bool:
    return schema["type"] == "default" and "default" in schema and schema["default"] is None


Ref = Callable[[type[BaseModel]], dict[str, str]]


def component_schemas() -> tuple[Ref, dict[str, Any]]:
    """``(ref, schemas)``: ``ref(Model)`` is the reference to ``Model``'s schema among ``schemas``."""
    validation: JsonSchemaMode = "validation"
    serialization: JsonSchemaMode = "serialization"
    keys = [(model, validation) for model in REQUEST_BODIES]
    keys += [(model, serialization) for model in RESPONSE_BODIES]
    refs, schema = models_json_schema(keys, by_alias=True, ref_template=REF, schema_generator=WireJsonSchema)
    by_model = {model: reference for (model, _), reference in refs.items()}
    return by_model.__getitem__, schema.get("$defs", {})


_DEFAULT_USERNAME = Settings.model_fields["answerer_username"].default

SECURITY_SCHEMES: dict[str, Any] = {
    "toolToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "GATEWAY_TOOL_TOKEN: required on the tool side when it is set.",
    },
    "answererPassword": {
        "type": "http",
        "scheme": "basic",
        "description": f"OPENCODE_SERVER_USERNAME (default {_DEFAULT_USERNAME}) and OPENCODE_SERVER_PASSWORD:"
        " required on the answerer side when the password is set, as the OpenCode server does it.",
    },
    "answererAuthToken": {
        "type": "apiKey",
        "in": "query",
        "name": "auth_token",
        "description": "The same credentials as base64 of user:password, for browsers' EventSource, "
        "which cannot send headers.",
    },
}

ROLE_SECURITY: dict[Role, list[dict[str, list[str]]]] = {
    "tool": [{"toolToken": []}],
    "answerer": [{"answererPassword": []}, {"answererAuthToken": []}],
    "public": [],
}
"""Which schemes open an operation, by the role the route table gives its path."""

_UNAUTHORIZED = {
    "tool": "GATEWAY_TOOL_TOKEN is set and the request has not got it.",
    "answerer": "OPENCODE_SERVER_PASSWORD is set and the request has not got the credentials.",
}


_CROSS_ORIGIN = "A browser's request from a page on an origin that is not allowed (GATEWAY_CORS_ORIGINS)."
_NOT_JSON = "The body is not sent as JSON (Content-Type: application/json)."
_FOREIGN_HOST = "The Host header names a host the gateway does not serve (GATEWAY_ALLOWED_HOSTS)."


def openapi_document(settings: Settings) -> dict[str, Any]:
    """The document for a gateway with ``settings``: a side without its secret is open (``{}``)."""
    return _document(
        tool_token=settings.tool_token is not None, password=settings.answerer_password is not None
    )


@cache
def _document(*, tool_token: bool, password: bool) -> dict[str, Any]:
    ref, schemas = component_schemas()
    paths = _paths(ref)
    _check_against_the_table(paths)
    required = {"tool": tool_token, "answerer": password, "public": False}
    for path, operations in paths.items():
        concrete = re.sub(r"\{[^}]*\}", "x", path)  # as a request for the path would have it
        role = ROUTES.role_of(concrete)
        for method, operation in operations.items():
            security = ROLE_SECURITY[role]
            operation["security"] = [*security] if required[role] or not security else [*security, {}]
            responses = operation["responses"]
            if role != "public":
                responses["401"] = _json(ref(ErrorBody), _UNAUTHORIZED[role])
            if ROUTES.origin_checked(method.upper(), concrete):
                responses["403"] = _json(ref(ErrorBody), _CROSS_ORIGIN)
            if ROUTES.body_rule(method.upper(), concrete) is not None:
                responses["415"] = _json(ref(BadRequest if role == "answerer" else ErrorBody), _NOT_JSON)
            responses["421"] = _json(ref(ErrorBody), _FOREIGN_HOST)
            operation["responses"] = dict(sorted(responses.items()))
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Elicitation Gateway",
            "version": __version__,
            "description": "MCP elicitations asked as OpenCode questions over Server-Sent Events.",
        },
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": SECURITY_SCHEMES},
    }


def documented_path(row: Row) -> str:
    """Where the document puts a row's operations: a mount's are on its files."""
    return f"{row.path}/{{file}}" if row.mount else row.path


def _check_against_the_table(paths: dict[str, Any]) -> None:
    """Every row of the route table has its operations here, and every operation its row."""
    served: set[tuple[str, str]] = set()
    for row in ROUTES.rows:
        path = documented_path(row)
        if path not in paths:
            raise LookupError(f"the route {path} has no operation in the OpenAPI document")
        methods = paths[path].keys() if row.methods is None else [method.lower() for method in row.methods]
        served.update((path, method) for method in methods)
    documented = {(path, method) for path, operations in paths.items() for method in operations}
    if documented != served:
        raise LookupError(f"operations and routes differ: {sorted(documented ^ served)}")


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
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


def _paths(ref: Ref) -> dict[str, Any]:
    """Every route; ``security`` and the 401s are added by role."""
    tool_errors = {
        "400": _json(ref(ErrorBody), "Malformed request, params or schema; nothing was asked."),
        "413": _json(ref(ErrorBody), "The body is larger than the limit."),
        "422": _json(
            ref(ErrorBody), "The schema is over a limit (questions, options, text) or asks for a secret."
        ),
        "429": _json(ref(ErrorBody), "Too many questions pending."),
        "503": _json(ref(ErrorBody), "The gateway is shutting down or its store is unavailable."),
    }
    answerer_errors = {
        "400": _json(ref(BadRequest), "Malformed id or body, or answers that do not fit (data.issues)."),
        "404": _json(ref(QuestionNotFoundError), "Unknown or finished request."),
        "413": _json(ref(BadRequest), "The body is larger than the limit."),
    }
    ask_body = {"required": True, "content": {"application/json": {"schema": ref(ElicitRequestFormParams)}}}
    too_many_streams = {"429": _json(ref(ErrorBody), "Too many event streams open.")}
    static_files = _static_files()

    def question_list(operation_id: str) -> dict[str, Any]:
        return {
            "get": {
                "operationId": operation_id,
                "summary": "Pending question requests, oldest first.",
                "parameters": _DIRECTORY,
                "responses": {
                    "200": _json({"type": "array", "items": ref(QuestionRequest)}, "Pending requests.")
                },
            }
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
                            "schema": {"oneOf": [ref(ElicitRequestFormParams), ref(JSONRPCElicitRequest)]}
                        }
                    },
                },
                "responses": {
                    "200": _json(
                        {"oneOf": [ref(ElicitResult), ref(JSONRPCElicitResponse), ref(JSONRPCError)]},
                        "The ElicitResult; for a JSON-RPC request, a JSON-RPC response (errors included).",
                    ),
                    **tool_errors,
                },
            }
        },
        "/elicitations": {
            "post": {
                "operationId": "elicitations.create",
                "summary": "Ask without waiting.",
                "parameters": _ASK_PARAMETERS,
                "requestBody": ask_body,
                "responses": {
                    "201": {
                        **_json(ref(ElicitationStatus), "Asked."),
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
                    **tool_errors,
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
                    "200": _json(ref(ElicitationStatus), "The elicitation."),
                    "400": tool_errors["400"],
                    "404": _json(ref(ErrorBody), "Unknown, or finished too long ago."),
                    "503": tool_errors["503"],
                },
            },
            "delete": {
                "operationId": "elicitations.withdraw",
                "summary": "Withdraw a pending question.",
                "parameters": [_ELICITATION_ID],
                "responses": {
                    "200": _json(ref(ElicitationStatus), "Withdrawn: cancelled."),
                    "404": _json(ref(ErrorBody), "Unknown."),
                    "409": _json(ref(ErrorBody), "Already finished; status says how."),
                    "503": tool_errors["503"],
                },
            },
        },
        "/question": question_list("question.list"),
        "/question/": question_list("question.list.slash"),
        "/question/{requestID}/reply": {
            "post": {
                "operationId": "question.reply",
                "summary": "Answer a question request.",
                "parameters": [_REQUEST_ID, *_DIRECTORY],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": ref(QuestionReply)}},
                },
                "responses": {"200": _json({"type": "boolean"}, "Answered."), **answerer_errors},
            }
        },
        "/question/{requestID}/reject": {
            "post": {
                "operationId": "question.reject",
                "summary": "Dismiss (cancel) or decline a question request.",
                "parameters": [_REQUEST_ID, *_DIRECTORY],
                "requestBody": {"content": {"application/json": {"schema": ref(QuestionReject)}}},
                "responses": {"200": _json({"type": "boolean"}, "Rejected."), **answerer_errors},
            }
        },
        "/question/{requestID}/form": {
            "get": {
                "operationId": "question.form",
                "summary": "What each question of a pending request accepts.",
                "parameters": [_REQUEST_ID],
                "responses": {
                    "200": _json(ref(QuestionForm), "The request's questions, as form fields."),
                    "400": answerer_errors["400"],
                    "404": answerer_errors["404"],
                },
            }
        },
        "/event": {
            "get": {
                "operationId": "event.subscribe",
                "summary": "The event stream; ?directory= keeps that directory's questions.",
                "parameters": [*_DIRECTORY, *_LAST_EVENT_ID],
                "responses": {"200": _STREAM, **too_many_streams},
            }
        },
        "/global/event": {
            "get": {
                "operationId": "global.event",
                "summary": "The event stream, each frame wrapped as {directory, payload}.",
                "parameters": _LAST_EVENT_ID,
                "responses": {"200": _STREAM, **too_many_streams},
            }
        },
        "/": {
            "get": {
                "operationId": "page",
                "summary": "The web page for answering questions.",
                "responses": {
                    "200": {"description": "HTML.", "content": {"text/html": {"schema": {"type": "string"}}}}
                },
            }
        },
        "/static/{file}": {
            "get": {
                "operationId": "page.file",
                "summary": "The page's files: its script, style and icon.",
                "parameters": [
                    {
                        "name": "file",
                        "in": "path",
                        "required": True,
                        "schema": {"enum": sorted(static_files)},
                    }
                ],
                "responses": {
                    "200": {
                        "description": "The file.",
                        "content": {
                            media_type: {"schema": {"type": "string"}}
                            for media_type in sorted(set(static_files.values()))
                        },
                    },
                    "404": _json(ref(ErrorBody), "No such file."),
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
                },
            }
        },
        "/global/health": {
            "get": {
                "operationId": "global.health",
                "responses": {
                    "200": _json(ref(GlobalHealth), "Healthy."),
                    "503": _json(ref(GlobalHealth), "Not healthy."),
                },
            }
        },
        "/healthz": _readiness(
            "healthz", "Readiness, as `/readyz` (kept for existing probes).", ref(Healthz)
        ),
        "/readyz": _readiness(
            "readyz",
            "Readiness: the store reached and writable, not stopping (`reason`: why not).",
            ref(Healthz),
        ),
        "/livez": {
            "get": {
                "operationId": "livez",
                "summary": "Liveness: the process runs and its event loop answers (no store, no upstream).",
                "responses": {"200": _json(ref(Livez), "Alive.")},
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


def _static_files() -> dict[str, str]:
    """What ``/static`` serves: each file with the media type Starlette gives it (by ``mimetypes``)."""
    files = (path for path in STATIC_DIRECTORY.iterdir() if path.is_file())
    return {path.name: mimetypes.guess_type(path.name)[0] or "application/octet-stream" for path in files}


def _readiness(operation_id: str, summary: str, healthz: dict[str, Any]) -> dict[str, Any]:
    """``/readyz`` and its older name ``/healthz``: one operation, two ids."""
    return {
        "get": {
            "operationId": operation_id,
            "summary": summary,
            "responses": {
                "200": _json(healthz, "Serving."),
                "503": _json(healthz, "Not serving: store unavailable or shutting down."),
            },
        }
    }
