"""The checks of the app's edge, one a module, each a function that
:class:`~elicitation_gateway.server.edge.Edge` applies in its one pass (in this order), and a plain
ASGI layer of its own:

- :mod:`.browser_guard`: the hosts served (``421``) and the origins a browser's change may come from
  (``403``), before anything else (in bridge mode the outermost layer, so that requests forwarded to
  OpenCode are checked too);
- in bridge mode, :mod:`.dispatch`: the gateway's requests on into the edge, the rest to OpenCode;
- :mod:`.cors`: what pages on other origins may read, and ``Vary: Origin`` on every response;
- :mod:`.access_control`: the tool token, the answerer's password, JSON bodies only (``401``, ``415``);
- :mod:`.url_text`: a path or query that is not UTF-8 once percent-decoded (``400``).

Innermost, after the edge, :mod:`.first_routes`: a round trip's two requests (``POST /elicit``, its
reply) to their endpoints, past Starlette's exception middleware and router (their exception handlers
applied here). :mod:`.access_timing` wraps the whole app while JSON access lines are written
(``server/runner.py``).

All plain ASGI: Starlette's ``BaseHTTPMiddleware`` misbehaves with streams. Every refusal they write
comes from :mod:`elicitation_gateway.server.errors`; every origin they judge, from the one
:class:`~elicitation_gateway.server.origins.OriginPolicy`.
"""
