"""A round trip's two requests served straight from the innermost layer, past Starlette's routing."""

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

FIRST_PATHS = frozenset({"/elicit", "/question/{requestID}/reply"})
"""The routes of a round trip (``POST /elicit``, held until the reply, and the reply): the most
frequent requests, each crossing this layer instead of four more and the router's search."""


class FirstRoutes:
    """The innermost layer: a request for one of the routes of :data:`FIRST_PATHS`, with a method the
    route serves, goes to its endpoint here, as Starlette's router, route and request-response wrapper
    would take it there (the same scope keys set, the same exception handlers, looked up the same way,
    and a handled exception once the response started made the same ``RuntimeError``). Every other
    request goes on to the app (Starlette's exception middleware and router).

    ``exception_handlers``: the app's, as given to Starlette; those of ``Exception`` and 500 belong to
    the outermost layer (Starlette's server-error middleware), which this one lets exceptions reach."""

    def __init__(
        self,
        app: ASGIApp,
        routes: Iterable[BaseRoute],
        router: ASGIApp,
        exception_handlers: Mapping[Any, Any],
    ) -> None:
        self.app = app
        self.routes = [
            route
            for route in routes
            if isinstance(route, Route)
            and route.path in FIRST_PATHS
            and inspect.iscoroutinefunction(route.endpoint)  # a function of the request, as the rows'
        ]
        self.router = router
        self.handlers = {
            kind: handler
            for kind, handler in exception_handlers.items()
            if kind not in (Exception, 500) and not isinstance(kind, int)
        }
        self.status_handlers = {
            status: handler
            for status, handler in exception_handlers.items()
            if isinstance(status, int) and status != 500
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        # Only /elicit and paths ending /reply can be one: every other request skips the routes' patterns.
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and (path == "/elicit" or path[-6:] == "/reply")
        ):
            for route in self.routes:
                match, child_scope = route.matches(scope)
                if match is Match.FULL:
                    scope.setdefault("router", self.router)
                    scope["route"] = route
                    scope.update(child_scope)
                    await self._serve(route, scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _serve(self, route: Route, scope: Scope, receive: Receive, send: Send) -> None:
        scope["starlette.exception_handlers"] = (self.handlers, self.status_handlers)
        request = Request(scope, receive, send)
        try:
            response = await route.endpoint(request)
        except Exception as error:
            handler = self._handler(error)
            if handler is None:
                raise
            answer = await handler(request, error)  # the app's handlers are all coroutines
            if answer is not None:
                await answer(scope, receive, send)
            error.__traceback__ = None  # reused exception instances would pile up tracebacks
            return
        try:
            await response(scope, receive, send)
        except Exception as error:
            # Starlette's wrapper counts the response started once it sends its start: a handled
            # exception after that is its RuntimeError, for the server-error layer to log.
            if self._handler(error) is not None:
                raise RuntimeError("Caught handled exception, but response already started.") from error
            raise

    def _handler(self, error: Exception) -> Any:
        """Starlette's lookup: a status handler for an ``HTTPException``, else the nearest class's."""
        if isinstance(error, HTTPException) and (handler := self.status_handlers.get(error.status_code)):
            return handler
        for kind in type(error).__mro__:
            if kind in self.handlers:
                return self.handlers[kind]
        return None
