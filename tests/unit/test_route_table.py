"""The route table: every route the app serves is a row and every row a route, and the rules the
access control, the bridge and the OpenAPI document read off it (roles, JSON bodies, origins, owners,
operations)."""

import re
from typing import Any

import pytest
from starlette.routing import BaseRoute, Mount, Route

from elicitation_gateway.server import openapi
from elicitation_gateway.server.app import create_app
from elicitation_gateway.server.bridge import merged, owner
from elicitation_gateway.server.routes import operations
from elicitation_gateway.server.routes.table import ROUTES, Owner, RouteTable, Row
from elicitation_gateway.settings import Settings


def served(route: BaseRoute) -> tuple[str, frozenset[str] | None, Any]:
    """What a Starlette route serves: its path, its methods (None: every one) and its handler."""
    if isinstance(route, Mount):
        return route.path, None, route.app
    assert isinstance(route, Route), route
    return route.path, None if route.methods is None else frozenset(route.methods), route.endpoint


def listed(row: Row, handler: Any = None) -> tuple[str, frozenset[str] | None, Any]:
    """What the row says is served; Starlette answers HEAD wherever it answers GET."""
    methods = None
    if row.methods is not None:
        methods = frozenset(row.methods) | ({"HEAD"} if "GET" in row.methods else set())
    return row.path, methods, handler or row.handler


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "que_1", path)


def test_every_route_the_app_serves_is_a_row_and_every_row_a_route():
    app = create_app(Settings())
    assert [served(route) for route in app.routes] == [listed(row) for row in ROUTES.rows]


def test_in_bridge_mode_the_bridge_serves_the_merged_rows_and_the_rest_is_as_without_it():
    app = create_app(Settings(opencode_url="http://127.0.0.1:4096"))
    expected = [listed(row, merged.handlers[row.path] if row.merged else None) for row in ROUTES.rows]
    assert [served(route) for route in app.routes] == expected
    assert {row.path for row in ROUTES.rows if row.merged} == set(merged.handlers)


def test_every_row_is_documented_and_every_operation_is_a_row():
    """A row with methods documents exactly those; one that answers every method documents some."""
    document = openapi.openapi_document(Settings())
    documented = {(path, method) for path, methods in document["paths"].items() for method in methods}
    rows = set()
    for row in ROUTES.rows:
        path = openapi.documented_path(row)
        if row.methods is None:
            assert any(where == path for where, _ in documented), row.path
            rows |= {(where, method) for where, method in documented if where == path}
        else:
            rows |= {(path, method.lower()) for method in row.methods}
    assert rows == documented


def test_the_document_lists_the_paths_in_the_tables_order_with_each_rows_own_operations():
    document = openapi.openapi_document(Settings())
    paths = list(dict.fromkeys(openapi.documented_path(row) for row in ROUTES.rows))
    assert list(document["paths"]) == paths
    for row in ROUTES.rows:
        own = row.operations(lambda model: {"$ref": model.__name__})
        for method, operation in own.items():
            served = document["paths"][openapi.documented_path(row)][method]
            assert served["operationId"] == operation["operationId"], (method, row.path)


def test_operation_ids_are_unique():
    document = openapi.openapi_document(Settings())
    ids = [
        operation["operationId"] for methods in document["paths"].values() for operation in methods.values()
    ]
    assert len(ids) == len(set(ids)) == len(ROUTES.rows)


def test_a_row_cannot_be_made_without_its_operations():
    with pytest.raises(TypeError, match="operations"):
        Row("/undocumented", ("GET",), "public", Owner.GATEWAY, lambda request: None)  # type: ignore[call-arg]


def _nothing(request: Any) -> None:
    return None


@pytest.mark.parametrize(
    "rows",
    [
        [*ROUTES.rows, Row("/livez", ("DELETE",), "public", Owner.GATEWAY, _nothing, operations.livez)],
        [*ROUTES.rows, Row("/extra", ("GET", "POST"), "public", Owner.GATEWAY, _nothing, operations.livez)],
        [*ROUTES.rows, Row("/extra", None, "public", Owner.GATEWAY, _nothing, lambda ref: {})],
        [*ROUTES.rows, Row("/livez", ("GET",), "public", Owner.GATEWAY, _nothing, operations.livez)],
    ],
    ids=["method-without-operation", "operation-of-another-method", "no-operation", "documented-twice"],
)
def test_the_document_does_not_build_when_a_row_and_its_operations_differ(monkeypatch, rows):
    monkeypatch.setattr(openapi, "ROUTES", RouteTable(rows))
    openapi._document.cache_clear()
    try:
        with pytest.raises(LookupError):
            openapi.openapi_document(Settings(tool_token="differs"))
    finally:
        openapi._document.cache_clear()


def test_rows_of_one_path_must_agree_on_whose_it_is():
    with pytest.raises(AssertionError, match="/x"):
        RouteTable(
            [
                Row("/x", ("GET",), "public", Owner.GATEWAY, _nothing, operations.livez),
                Row("/x", ("POST",), "tool", Owner.GATEWAY, _nothing, operations.elicit),
            ]
        )


# ---------------------------------------------------------------------------------------------------
# The rules read off the table


@pytest.mark.parametrize(
    ("path", "role"),
    [
        ("/elicit", "tool"),
        ("/elicitations", "tool"),
        ("/elicitations/que_1", "tool"),
        ("/elicitations/", "tool"),  # below the tool side's paths, served or not
        ("/elicitations/que_1/more", "tool"),
        ("/mcp", "tool"),
        ("/mcp/", "tool"),
        ("/question", "answerer"),
        ("/question/que_1/reply", "answerer"),
        ("/event", "answerer"),
        ("/global/event", "answerer"),
        ("/", "answerer"),
        ("/static/app.js", "answerer"),
        ("/global/health", "public"),
        ("/healthz", "public"),
        ("/readyz", "public"),
        ("/livez", "public"),
        ("/metrics", "public"),
        ("/doc", "public"),
        ("/livez/", "answerer"),  # public is exactly these paths
        ("/nowhere", "answerer"),  # as on an OpenCode server, everything else is the answerer's
        ("/elicit/x", "answerer"),
    ],
)
def test_roles(path, role):
    assert ROUTES.role_of(path) == role


def test_every_row_has_its_role_and_owner_on_its_own_paths():
    for row in ROUTES.rows:
        path = concrete(row.path) + ("/app.js" if row.mount else "")
        assert ROUTES.role_of(path) == row.role, row.path
        for method in row.methods or ("GET", "POST"):
            assert owner(method, path) is row.owner, (method, row.path)


def test_the_routes_that_take_json():
    assert ROUTES.body_rule("POST", "/elicit") == "json"
    assert ROUTES.body_rule("POST", "/elicitations") == "json"
    assert ROUTES.body_rule("POST", "/question/que_1/reply") == "json"
    assert ROUTES.body_rule("POST", "/question/que_1/reject") == "json_or_empty"
    for method, path in [
        ("GET", "/elicit"),
        ("DELETE", "/elicitations/que_1"),
        ("POST", "/elicitations/que_1/more"),  # below /elicitations, but no route of its own
        ("GET", "/question"),
        ("POST", "/question//reply"),
        ("POST", "/question/que_1/reply/more"),
        ("POST", "/mcp"),  # the MCP SDK's own check
    ]:
        assert ROUTES.body_rule(method, path) is None, (method, path)


def test_the_requests_whose_origin_is_checked():
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert ROUTES.origin_checked(method, "/question/que_1/reply")
        assert ROUTES.origin_checked(method, "/nowhere")
    for method in ("GET", "HEAD", "OPTIONS"):
        assert not ROUTES.origin_checked(method, "/question")
        assert not ROUTES.origin_checked(method, "/nowhere")
        assert ROUTES.origin_checked(method, "/mcp")
        assert ROUTES.origin_checked(method, "/mcp/x")


def test_templated_paths_asked_in_turn_get_their_own_rows():
    """The table remembers the last templated path it matched: asking of another in between changes
    nothing."""
    table = RouteTable(ROUTES.rows)
    for _ in range(2):
        assert table.body_rule("POST", "/question/que_1/reply") == "json"
        assert table.body_rule("POST", "/question/que_1/reject") == "json_or_empty"
        assert table.role_of("/elicitations/que_1") == "tool"
        assert table.rows_for("/question/que_1/reply") == table.rows_for("/question/que_2/reply")
        assert table.rows_for("/question/que_1/nowhere") == []
