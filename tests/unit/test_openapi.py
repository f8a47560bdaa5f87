"""``GET /doc`` is read off the code: its schemas are the models' own, its ``security`` is what the
access control does, and the ``/form`` model holds every key the route sends."""

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any, get_args

import httpx
import pytest
from pydantic import BaseModel, TypeAdapter
from starlette.types import Receive, Scope, Send

from elicitation_gateway.gateway import Gateway
from elicitation_gateway.server.app import create_app
from elicitation_gateway.server.bodies import FormField, QuestionForm
from elicitation_gateway.server.middleware.access_control import AccessControl
from elicitation_gateway.server.openapi import (
    REF,
    REQUEST_BODIES,
    RESPONSE_BODIES,
    ROLE_SECURITY,
    WireJsonSchema,
    openapi_document,
)
from elicitation_gateway.server.routes.table import ROUTES
from elicitation_gateway.server.security import Role
from tests.conftest import settings_for_tests
from tests.helpers import form

TOKEN, PASSWORD = "tool-secret", "answerer-secret"

EVERY_CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 1, "maximum": 9, "multipleOf": 3, "default": 3},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "code": {"type": "string", "minLength": 2, "maxLength": 8, "pattern": "^[a-z]+$"},
        "email": {"type": "string", "format": "email"},
        "tags": {
            "type": "array",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "minItems": 1,
            "maxItems": 2,
        },
        "color": {"type": "string", "enum": ["red", "green"]},
        "otp": {"type": "string", "title": "One-time code"},
    },
    "required": ["count"],
}
"""Between them, the properties use every check a form field can carry."""


def document(**settings: Any) -> dict[str, Any]:
    return openapi_document(settings_for_tests(**settings))


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, methods in doc["paths"].items():
        for method, operation in methods.items():
            yield path, method, operation


def concrete(path: str) -> str:
    """A request's path for a documented one: ``/question/{requestID}/form`` -> ``/question/que_1/form``."""
    return re.sub(r"\{[^}]*\}", "que_1", path)


def wire_keys(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


# ---------------------------------------------------------------------------------------------------
# Schemas


def model_schemas() -> dict[str, Any]:
    """Each body model's schema, generated on its own, with the schemas it refers to."""
    schemas: dict[str, Any] = {}
    for models, mode in ((REQUEST_BODIES, "validation"), (RESPONSE_BODIES, "serialization")):
        for model in models:
            schema = TypeAdapter(model).json_schema(
                by_alias=True, ref_template=REF, schema_generator=WireJsonSchema, mode=mode
            )
            schemas.update(schema.pop("$defs", {}))
            schemas[model.__name__] = schema
    return schemas


def test_every_component_schema_is_a_models_own():
    assert document()["components"]["schemas"] == model_schemas()


def test_the_form_schema_is_the_question_form_model():
    components = document()["components"]["schemas"]
    schema = QuestionForm.model_json_schema(
        by_alias=True, ref_template=REF, schema_generator=WireJsonSchema, mode="serialization"
    )
    defs = schema.pop("$defs")
    assert components["QuestionForm"] == schema
    assert components["FormField"] == defs["FormField"]
    assert set(components["FormField"]["properties"]) == wire_keys(FormField)


def test_paths_write_no_schema_of_their_own_and_every_reference_resolves():
    doc = document()
    components = doc["components"]["schemas"]
    for node in walk(doc["paths"]):
        assert "properties" not in node, f"an object schema written beside the models: {node}"
        if "$ref" in node:
            assert node["$ref"].removeprefix("#/components/schemas/") in components, node["$ref"]


def test_optional_fields_of_sent_bodies_are_absent_never_null():
    """Bodies are sent with exclude_none: what can be None is optional and, when there, not null."""
    components = document()["components"]["schemas"]
    info = components["QuestionInfo"]
    assert info["required"] == ["question", "header", "options"]
    assert info["properties"]["multiple"] == {"const": True, "type": "boolean"}
    status = components["ElicitationStatus"]
    assert status["required"] == ["id", "status"]
    assert status["properties"]["result"]["$ref"].endswith("/AnsweredResult")
    assert components["AnsweredResult"]["properties"]["answeredBy"]["type"] == "string"
    assert "anyOf" not in status["properties"]["result"]
    # JSON-RPC's id is sent as null when the request's is unknown
    assert {"type": "null"} in components["JSONRPCError"]["properties"]["id"]["anyOf"]
    assert "id" in components["JSONRPCError"]["required"]


# ---------------------------------------------------------------------------------------------------
# Security


def test_every_role_has_its_security():
    assert set(ROLE_SECURITY) == set(get_args(Role))


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"tool_token": TOKEN},
        {"answerer_password": PASSWORD},
        {"tool_token": TOKEN, "answerer_password": PASSWORD},
    ],
    ids=["open", "tool-token", "password", "both"],
)
def test_every_operation_declares_the_security_of_its_role(settings):
    doc = document(**settings)
    schemes = doc["components"]["securitySchemes"]
    secret_set = {"tool": "tool_token" in settings, "answerer": "answerer_password" in settings}
    for path, method, operation in operations(doc):
        role = ROUTES.role_of(concrete(path))
        security = operation["security"]
        where = f"{method.upper()} {path} ({role})"
        if role == "public":
            assert security == [], where
            assert "401" not in operation["responses"], where
            continue
        assert [r for r in security if r] == ROLE_SECURITY[role], where
        assert ({} in security) == (not secret_set[role]), f"{where}: open only without its secret"
        assert "401" in operation["responses"], where
        for requirement in security:
            assert set(requirement) <= set(schemes), where


def test_the_schemes_are_the_ones_the_access_control_reads():
    schemes = document()["components"]["securitySchemes"]
    assert schemes["toolToken"] == schemes["toolToken"] | {"type": "http", "scheme": "bearer"}
    assert schemes["answererPassword"] == schemes["answererPassword"] | {"type": "http", "scheme": "basic"}
    token = schemes["answererAuthToken"]
    assert (token["type"], token["in"], token["name"]) == ("apiKey", "query", "auth_token")


async def test_the_access_control_refuses_exactly_the_secured_operations():
    """Asked without credentials on a gateway with both secrets, the middleware itself answers 401 for
    every operation the document secures, and lets every public one through."""
    doc = document(tool_token=TOKEN, answerer_password=PASSWORD)
    passed: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        passed.append(scope["path"])

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    control = AccessControl(app, settings_for_tests(tool_token=TOKEN, answerer_password=PASSWORD), ROUTES)
    for path, method, operation in operations(doc):
        sent.clear()
        passed.clear()
        scope = {"type": "http", "method": method.upper(), "path": concrete(path), "headers": []}
        await control(scope, receive, send)  # type: ignore[arg-type]
        refused = [m["status"] for m in sent if m["type"] == "http.response.start"] == [401]
        assert refused == (operation["security"] != []), f"{method.upper()} {path}"
        assert bool(passed) == (not refused), f"{method.upper()} {path}"


# ---------------------------------------------------------------------------------------------------
# The form


@pytest.fixture
async def http(tmp_path) -> AsyncIterator[httpx.AsyncClient]:
    """The real routes in process, on a started gateway (no server, no lifespan), with one person, so that
    a question may carry every key a form can have (its ``to`` too), signed in as that person."""
    people = tmp_path / "people.toml"
    people.write_text('[people.alice]\npassword = "a"\n')
    settings = settings_for_tests(people=people)
    gateway = Gateway(settings)
    await gateway.start()
    transport = httpx.ASGITransport(app=create_app(settings, gateway))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gateway.localhost", auth=("alice", "a")
    ) as client:
        yield client
    await gateway.shutdown()


async def test_the_form_route_sends_exactly_the_keys_of_its_model(http):
    """A key the route adds without the model, or one the model has that the route never sends, fails."""
    created = await http.post(
        "/elicitations",
        json={**form(EVERY_CHECK_SCHEMA, "Check everything"), "to": ["alice"]},
        params={"asker": "Ops · check"},
    )
    assert created.status_code == 201, created.text
    body = (await http.get(f"/question/{created.json()['id']}/form")).json()
    assert set(body) == wire_keys(QuestionForm)
    sent = {key for field in body["fields"] for key in field}
    assert sent == wire_keys(FormField)
    assert QuestionForm.model_validate(body).model_dump(mode="json", by_alias=True, exclude_none=True) == body
