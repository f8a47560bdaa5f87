"""The app's edge: every check of a request at the edge in one ASGI layer, its head read once.

:class:`Edge` applies, in this order, what were layers of their own (each check is a function of its
module in :mod:`.middleware`, with the same refusals):

1. the hosts served (``421``) and the origins a browser's change may come from (``403``)
   (:mod:`.middleware.browser_guard`; in bridge mode a layer of its own, outside the dispatch);
2. CORS: a preflight answered, and the CORS headers and ``Vary: Origin`` added to every response
   after this point (:mod:`.middleware.cors`);
3. the tool token, the answerer's credentials, JSON bodies only (``401``, ``415``)
   (:mod:`.middleware.access_control`);
4. a path or query that is not UTF-8 once percent-decoded (``400``) (:mod:`.middleware.url_text`);

then the app (its innermost layer, :mod:`.middleware.first_routes`, serves a round trip's requests).
"""

from starlette.types import ASGIApp, Receive, Scope, Send

from elicitation_gateway.people import PeopleFile
from elicitation_gateway.server.middleware.access_control import AccessRules
from elicitation_gateway.server.middleware.browser_guard import guard_refused
from elicitation_gateway.server.middleware.cors import allowing, answered_preflight, varying
from elicitation_gateway.server.middleware.url_text import url_refused
from elicitation_gateway.server.origins import OriginPolicy
from elicitation_gateway.server.security import RouteRules
from elicitation_gateway.settings import Settings


class RequestHead:
    """What the edge's checks read of a request's headers, in one pass: the first ``Host``,
    ``Authorization`` and ``Content-Type`` (as ``Headers.get`` reads them), and whether it has an
    ``Origin`` or a ``Sec-Fetch-Site``. A browser's request (either of those) is read again whole by
    the checks that judge it."""

    __slots__ = ("authorization", "browser", "content_type", "host", "origin")

    def __init__(self, scope: Scope) -> None:
        host = authorization = content_type = None
        origin = browser = False
        for name, value in scope["headers"]:
            if name == b"host":
                if host is None:
                    host = value.decode("latin-1")
            elif name == b"authorization":
                if authorization is None:
                    authorization = value.decode("latin-1")
            elif name == b"content-type":
                if content_type is None:
                    content_type = value.decode("latin-1")
            elif name == b"origin":
                origin = browser = True
            elif name == b"sec-fetch-site":
                browser = True
        self.host: str | None = host
        self.authorization: str = authorization or ""
        self.content_type: str = content_type or ""
        self.origin: bool = origin
        self.browser: bool = browser


class Edge:
    """Every check of a request at the edge, in one pass (see the module). ``guarded``: the route rules
    the host and origin guard reads; ``None`` where the guard is a layer of its own (bridge mode's
    :class:`~.middleware.browser_guard.BrowserGuard`)."""

    def __init__(
        self,
        app: ASGIApp,
        policy: OriginPolicy,
        settings: Settings,
        routes: RouteRules,
        people: PeopleFile | None = None,
        guarded: RouteRules | None = None,
    ) -> None:
        self.app = app
        self.policy = policy
        self.routes = routes
        self.guarded = guarded
        self.access = AccessRules(settings, routes, people)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = RequestHead(scope)
        policy = self.policy
        if self.guarded is not None and await guard_refused(
            policy, self.guarded, scope, send, head.host, head.browser
        ):
            return
        if not head.origin:
            send = varying(send)
        elif await answered_preflight(policy, scope, receive, send):
            return
        else:
            send = allowing(policy, scope, send)
        admitted = await self.access.admitted(scope, receive, send, head.authorization, head.content_type)
        if admitted is None or await url_refused(self.routes, scope, admitted, send):
            return
        await self.app(scope, admitted, send)
