"""The route table: every route the gateway serves, one row each, with who may call it, the body it
takes, who answers it in bridge mode, and its operations in the OpenAPI document.

The app's routes are made from these rows, and the access control, the URL check, the bridge's
dispatch and the OpenAPI document all read them, so a route is served, guarded, dispatched and
documented alike, and none can be left out of one of them. A path no row serves needs the answerer's
credentials (as everything on an OpenCode server does) and, in bridge mode, goes to the upstream.
"""

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from starlette.routing import BaseRoute, Mount, Route, compile_path

from elicitation_gateway.server.mcp_endpoint import McpRoute
from elicitation_gateway.server.routes import (
    audit,
    elicitations,
    health,
    operations,
    page,
    questions,
    streams,
)
from elicitation_gateway.server.routes import links as one_tap
from elicitation_gateway.server.routes.operations import Operations
from elicitation_gateway.server.security import STATE_CHANGING, BodyRule, Role


class Owner(Enum):
    """Who answers a request in bridge mode (``GATEWAY_OPENCODE_URL``)."""

    GATEWAY = "gateway"  # the gateway's route (tool side, merged routes, its extensions)
    PREFIXED = "prefixed"  # under /gateway/: the gateway's own route, prefix removed
    BY_ID = "by_id"  # a reply or reject: the gateway's if it asked that question
    UPSTREAM = "upstream"  # everything else


Handler = Callable[..., Any]
"""A Starlette endpoint (a function of the request), or an ASGI app."""


@dataclass(frozen=True)
class Row:
    path: str
    """Starlette's path template; a mount's prefix."""
    methods: tuple[str, ...] | None
    """None: every method, the handler answers each (MCP's transport)."""
    role: Role
    """Whose credentials open it (:class:`~.security.AccessControl`)."""
    owner: Owner
    """Who answers it in bridge mode; ``UPSTREAM``: OpenCode's, the gateway's own is under ``/gateway/``."""
    handler: Handler
    operations: Operations
    """What the OpenAPI document says of it (:mod:`.operations`): its operations by method, the row's
    own methods (one of them for a row that answers every method)."""
    body: BodyRule | None = None
    """A JSON body only (any other type is ``415``): a form or ``text/plain`` post, which a page may send
    anywhere without asking, never reaches the route."""
    merged: bool = False
    """In bridge mode the bridge's handler serves it, both sides' answers merged (:mod:`.bridge.merged`)."""
    and_below: bool = False
    """Its role and owner hold for every path below it too, served or not: a guess under the tool
    side's paths is the tool side's 401."""
    origin_always: bool = False
    """A browser's request must come from an allowed origin whatever its method, not only when it changes
    something (MCP's Streamable HTTP wants ``Origin`` checked on every connection)."""
    mount: bool = False
    """``handler`` is an ASGI app serving every path below ``path`` (the page's files)."""

    def route(self, handler: Handler | None = None) -> BaseRoute:
        """The Starlette route of this row, with ``handler`` instead of its own (bridge mode's)."""
        if self.mount:
            return Mount(self.path, app=handler or self.handler, name=self.path.strip("/"))
        methods = list(self.methods) if self.methods is not None else None
        return Route(self.path, handler or self.handler, methods=methods)


class RouteTable:
    """The rows, and what each check asks of them; rows of one path share its role, owner and origin
    rule."""

    def __init__(self, rows: Iterable[Row]) -> None:
        self.rows = tuple(rows)
        self._exact: dict[str, list[Row]] = {}
        self._templated: list[tuple[re.Pattern[str], Row]] = []
        self._below: list[tuple[str, Row]] = []
        self._last_templated: tuple[str | None, list[Row]] = (None, [])
        for row in self.rows:
            if row.mount:
                self._below.append((row.path + "/", row))
            elif "{" in row.path:
                self._templated.append((compile_path(row.path)[0], row))
            else:
                self._exact.setdefault(row.path, []).append(row)
            if row.and_below:
                self._below.append((row.path + "/", row))
        for path in {row.path for row in self.rows}:
            shared = {(r.role, r.owner, r.and_below, r.origin_always) for r in self.rows if r.path == path}
            assert len(shared) == 1, f"the rows of {path} disagree on its role, owner or origin rule"

    def rows_for(self, path: str) -> list[Row]:
        """The rows serving ``path`` itself (one a method)."""
        rows = self._exact.get(path)
        if rows is not None:
            return rows
        last_path, last_rows = self._last_templated
        if path == last_path:  # the checks of one request ask of its path in turn
            return last_rows
        rows = [row for pattern, row in self._templated if pattern.match(path)]
        self._last_templated = (path, rows)
        return rows

    def row_for(self, path: str) -> Row | None:
        """The row whose role and owner ``path`` has: one that serves it, or one it is below."""
        rows = self.rows_for(path)
        if rows:
            return rows[0]
        for prefix, row in self._below:
            if path.startswith(prefix):
                return row
        return None

    def role_of(self, path: str) -> Role:
        row = self.row_for(path)
        return "answerer" if row is None else row.role

    def owner(self, method: str, path: str) -> Owner:
        """In bridge mode, without the ``/gateway/`` prefix (:func:`.bridge.owner`). An answer goes to
        whichever side asked; any other method on its path is the gateway's (a CORS preflight, a 405)."""
        row = self.row_for(path)
        if row is None:
            return Owner.UPSTREAM
        if row.owner is Owner.BY_ID and method not in (row.methods or ()):
            return Owner.GATEWAY
        return row.owner

    def body_rule(self, method: str, path: str) -> BodyRule | None:
        for row in self.rows_for(path):
            if row.methods is not None and method in row.methods:
                return row.body
        return None

    def origin_checked(self, method: str, path: str) -> bool:
        """Whether a browser's request must come from an allowed origin: any that changes something, and
        every request to a route that wants it on every method."""
        if method in STATE_CHANGING:
            return True
        row = self.row_for(path)
        return row is not None and row.origin_always

    def routes(self, handlers: Mapping[str, Handler] | None = None) -> list[BaseRoute]:
        """Every row's route; ``handlers`` (bridge mode's, by path) serve the merged rows instead."""
        handlers = handlers or {}
        merged = {row.path for row in self.rows if row.merged}
        assert not handlers or set(handlers) == merged, (
            f"merged: {sorted(merged)}; handlers: {sorted(handlers)}"
        )
        return [row.route(handlers.get(row.path)) for row in self.rows]


_GATEWAY, _UPSTREAM, _BY_ID = Owner.GATEWAY, Owner.UPSTREAM, Owner.BY_ID

ROUTES = RouteTable(
    [
        # The tool side: OpenCode has none of these.
        Row("/elicit", ("POST",), "tool", _GATEWAY, elicitations.elicit, operations.elicit, body="json"),
        Row(
            "/elicitations",
            ("POST",),
            "tool",
            _GATEWAY,
            elicitations.create,
            operations.elicitations_create,
            body="json",
            and_below=True,
        ),
        Row("/elicitations/{id}", ("GET",), "tool", _GATEWAY, elicitations.read, operations.elicitations_get),
        Row(
            "/elicitations/{id}",
            ("DELETE",),
            "tool",
            _GATEWAY,
            elicitations.withdraw,
            operations.elicitations_withdraw,
        ),
        # The answerer side, in OpenCode's shapes.
        Row(
            "/question",
            ("GET",),
            "answerer",
            _GATEWAY,
            questions.list_questions,
            operations.question_list,
            merged=True,
        ),
        Row(
            "/question/",
            ("GET",),
            "answerer",
            _GATEWAY,
            questions.list_questions,
            operations.question_list_slash,
            merged=True,
        ),
        Row(
            "/question/{requestID}/reply",
            ("POST",),
            "answerer",
            _BY_ID,
            questions.reply,
            operations.question_reply,
            body="json",
        ),
        # OpenCode's SDK (and the terminal answerer) dismiss with no body and no Content-Type.
        Row(
            "/question/{requestID}/reject",
            ("POST",),
            "answerer",
            _BY_ID,
            questions.reject,
            operations.question_reject,
            body="json_or_empty",
        ),
        Row(
            "/question/{requestID}/form",
            ("GET",),
            "answerer",
            _GATEWAY,
            questions.question_form,
            operations.question_form,
        ),
        Row("/event", ("GET",), "answerer", _GATEWAY, streams.event, operations.event, merged=True),
        Row(
            "/global/event",
            ("GET",),
            "answerer",
            _GATEWAY,
            streams.global_event,
            operations.global_event,
            merged=True,
        ),
        # The web page.
        Row("/", ("GET",), "answerer", _UPSTREAM, page.index, operations.page),
        Row("/static", None, "answerer", _UPSTREAM, page.files, operations.page_files, mount=True),
        # One-tap links: the signed token is the credential; a browser's POST only from the gateway's own
        # page (BrowserGuard, as for every change).
        Row("/link/{token}", ("GET",), "public", _GATEWAY, one_tap.show, operations.link_show),
        Row("/link/{token}", ("POST",), "public", _GATEWAY, one_tap.answer, operations.link_answer),
        # MCP over Streamable HTTP: the SDK's transport answers every method, and refuses a POST that is
        # not application/json itself.
        Row(
            "/mcp",
            None,
            "tool",
            _UPSTREAM,
            McpRoute(),
            operations.mcp,
            and_below=True,
            origin_always=True,
        ),
        # Operations.
        Row("/global/health", ("GET",), "public", _UPSTREAM, health.global_health, operations.global_health),
        Row("/healthz", ("GET",), "public", _GATEWAY, health.readyz, operations.healthz),
        Row("/readyz", ("GET",), "public", _GATEWAY, health.readyz, operations.readyz),
        Row("/livez", ("GET",), "public", _GATEWAY, health.livez, operations.livez),
        Row("/metrics", ("GET",), "public", _GATEWAY, health.metrics, operations.metrics),
        Row("/doc", ("GET",), "public", _UPSTREAM, health.doc, operations.doc),
        # The audit trail: the tool token's, as the rest of the tool side.
        Row("/audit", ("GET",), "tool", _GATEWAY, audit.audit, operations.audit),
    ]
)
