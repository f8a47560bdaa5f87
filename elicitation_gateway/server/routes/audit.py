"""``GET /audit``: the audit trail as JSON Lines (``application/jsonl``), for the tool token."""

from starlette.requests import Request
from starlette.responses import Response

from elicitation_gateway.audit import parse_since
from elicitation_gateway.gateway import Gateway
from elicitation_gateway.server.errors import ToolError

MEDIA_TYPE = "application/jsonl"
"""JSON Lines: one entry a line, each ending with a newline, UTF-8."""


async def audit(request: Request) -> Response:
    gateway: Gateway = request.app.state.gateway
    since = request.query_params.get("since")
    question = request.query_params.get("question") or None
    if since is not None:
        try:
            since = parse_since(since)
        except ValueError as error:
            return ToolError(400, "invalid_since", f"since: {error}").response()
    entries = await gateway.auditing.entries(since, question)
    return Response(b"".join(entry.line() for entry in entries), media_type=MEDIA_TYPE)
