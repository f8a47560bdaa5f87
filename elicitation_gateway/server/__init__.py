"""The service's HTTP side: the ASGI app, its routes and middleware, and the process that runs it.

- :mod:`.app`: ``create_app(settings)``, the ASGI application;
- :mod:`.runner`: uvicorn with a shutdown that finishes every question first;
- :mod:`.command`: ``elicitation-gateway`` / ``python -m elicitation_gateway [serve]``;
- :mod:`.routes`: thin routes that parse, call the :class:`~elicitation_gateway.gateway.Gateway`,
  and shape responses.
"""
