"""HTTP routes: thin layers that parse, call the gateway, and shape responses.

- :mod:`.table`: the route table, every route in one row (path, methods, role, owner in bridge mode,
  handler, operations), which the app, the access control, the bridge and the OpenAPI document all
  read; :mod:`.operations`: what the OpenAPI document says of each route;
- :mod:`.elicitations`: the tool side; :mod:`.questions`: the answerer side; :mod:`.streams`: the
  event streams; :mod:`.health`: operations; :mod:`.page`: the web page;
- :mod:`.parsing`: reading what clients send.
"""
