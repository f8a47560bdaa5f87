"""A loopback HTTP receiver the notification, escalation and webhook tests share: it stands in for an
Apprise ``json://`` target, a person's own notification URL or a webhook receiver, keeps every POST
it gets, and answers as it is told (at once, late, with a 500, or never)."""

import asyncio
import json
import time
from typing import Any

from aiohttp import web


def question_of(body: str) -> str:
    """The question a notification's body announces (its link's ``?question=``)."""
    message = json.loads(body)["message"]
    return message.rsplit("?question=", 1)[1].split()[0]


class Receiver:
    """An HTTP server on a free loopback port that keeps every POST it gets (path, body, headers, and
    when it came). It answers the first ``failures`` of them with a 500 and the others with a 200,
    each after ``delay`` seconds; when ``hang``, it never answers at all. ``url`` is for the path
    ``/hook``, ``url_for(path)`` for another, both with ``scheme`` (``json`` for Apprise, ``http``
    for webhooks)."""

    def __init__(
        self, *, scheme: str = "json", failures: int = 0, delay: float = 0, hang: bool = False
    ) -> None:
        self.scheme = scheme
        self.failures = failures
        self.delay = delay
        self.hang = hang
        self.posts: list[dict[str, Any]] = []
        self.received = asyncio.Event()
        """Set at the first POST (and left set)."""
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._never = asyncio.Event()

    async def _handle(self, request: web.Request) -> web.Response:
        self.posts.append(
            {
                "path": request.match_info["path"],
                "body": await request.text(),
                "headers": dict(request.headers),
                "at": time.monotonic(),
            }
        )
        self.received.set()
        if self.hang:
            await self._never.wait()  # a receiver that never answers: only the client ends this
        if self.delay:
            await asyncio.sleep(self.delay)  # a slow receiver: the delay is what is tested
        if len(self.posts) <= self.failures:
            return web.json_response({"ok": False}, status=500)
        return web.json_response({"ok": True})

    async def start(self) -> "Receiver":
        app = web.Application()
        app.router.add_post("/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> "Receiver":
        return await self.start()

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        return self.url_for("hook")

    def url_for(self, path: str) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/{path}"

    def bodies(self, path: str) -> list[dict[str, Any]]:
        """The JSON bodies posted to ``/{path}``, in order."""
        return [json.loads(post["body"]) for post in self.posts if post["path"] == path]

    def asked(self, path: str | None = None) -> list[str]:
        """The question each notification announced (to ``/{path}``, or to any path), in order."""
        return [question_of(post["body"]) for post in self.posts if path in (None, post["path"])]

    def about(self, path: str, request_id: str) -> int:
        """How many notifications to ``/{path}`` announced ``request_id``."""
        return sum(f"?question={request_id}" in body.get("message", "") for body in self.bodies(path))
