"""``GET /doc``: the OpenAPI 3.1 document of every route.

Its paths are the route table's rows (:mod:`.routes.table`), each with the operations it names
(:mod:`.routes.operations`), so a route cannot be served without its documentation. Every schema comes
from a model the routes build or validate their bodies with (:mod:`.bodies`, the MCP SDK's, OpenCode's
``QuestionRequest``), and every operation's ``security`` from the role the table gives its path, which
the access control itself asks: the document cannot list keys the bodies do not have, nor a door the
middleware does not keep. Written here is the frame: info, components and security schemes.
"""

import re
from functools import cache
from typing import Any

from mcp_types.jsonrpc import JSONRPCError
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue, models_json_schema
from pydantic_core import CoreSchema, core_schema

from elicitation_gateway import __version__
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
from elicitation_gateway.server.routes.operations import Ref, json_body
from elicitation_gateway.server.routes.table import ROUTES, Row
from elicitation_gateway.server.security import Role
from elicitation_gateway.settings import Settings

REF = "#/components/schemas/{model}"

REQUEST_BODIES: tuple[type[BaseModel], ...] = (
    AskParams,
    JSONRPCElicitRequest,
    QuestionReply,
    QuestionReject,
)
"""What the routes accept: described as validation takes it."""

RESPONSE_BODIES: tuple[type[BaseModel], ...] = (
    AnsweredResult,
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
    required = {"tool": tool_token, "answerer": password, "public": False}
    for path, operations in paths.items():
        concrete = re.sub(r"\{[^}]*\}", "x", path)  # as a request for the path would have it
        role = ROUTES.role_of(concrete)
        for method, operation in operations.items():
            security = ROLE_SECURITY[role]
            operation["security"] = [*security] if required[role] or not security else [*security, {}]
            responses = operation["responses"]
            if role != "public":
                responses["401"] = json_body(ref(ErrorBody), _UNAUTHORIZED[role])
            if ROUTES.origin_checked(method.upper(), concrete):
                responses["403"] = json_body(ref(ErrorBody), _CROSS_ORIGIN)
            if ROUTES.body_rule(method.upper(), concrete) is not None:
                responses["415"] = json_body(ref(BadRequest if role == "answerer" else ErrorBody), _NOT_JSON)
            responses["421"] = json_body(ref(ErrorBody), _FOREIGN_HOST)
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


def _paths(ref: Ref) -> dict[str, Any]:
    """Every row's operations, in the table's order, on its documented path; ``security`` and the
    responses the table decides are added by role. A row documents exactly its methods (some method, if
    it answers every one)."""
    paths: dict[str, dict[str, Any]] = {}
    for row in ROUTES.rows:
        path = documented_path(row)
        operations = row.operations(ref)
        served = None if row.methods is None else {method.lower() for method in row.methods}
        if not operations or (served is not None and set(operations) != served):
            raise LookupError(f"the operations of {path} are {sorted(operations)}, its methods {row.methods}")
        documented = paths.setdefault(path, {})
        if documented.keys() & operations.keys():
            raise LookupError(f"two rows document {path}: {sorted(documented.keys() & operations.keys())}")
        documented.update(operations)
    return paths
