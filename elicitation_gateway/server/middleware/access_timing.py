"""When the app receives each request, for ``duration_ms`` on JSON access lines."""

from starlette.types import ASGIApp, Receive, Scope, Send

from elicitation_gateway.server.logs import note_request_start


class AccessTiming:
    """Notes when the app receives each request, for ``duration_ms`` on JSON access lines: the time
    until the response's status line, which is when uvicorn logs it.

    A layer around the app only while JSON access lines are written (``timing_wanted``); the default
    text log and every level above ``info`` go without it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            note_request_start()
        await self.app(scope, receive, send)
