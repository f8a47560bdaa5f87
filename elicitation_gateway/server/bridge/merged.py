"""The routes both sides serve, merged: the event streams and the question list.

``GET /event`` and ``GET /global/event`` are the upstream's streams, frame by frame, with the
gateway's ``question.*`` frames put between them (never inside one). The upstream's
``server.connected`` leads and its ``server.heartbeat`` keeps the stream alive; the gateway adds
neither. After the upstream's first frame come the gateway's re-announcements (every pending question,
or what a ``Last-Event-ID`` missed), as on the gateway's own streams: the OpenCode TUI learns of
questions only this way. When the upstream's stream ends or fails, so does the client's, and the
client reconnects.

Requests under ``/gateway/`` (marked :data:`OWN` by the dispatcher) get the gateway's own routes.
"""

import asyncio
import logging
import math
from collections.abc import AsyncGenerator, AsyncIterator, Callable

import httpx
from starlette.requests import Request
from starlette.responses import Response

from elicitation_gateway import events
from elicitation_gateway.encoding import dumps
from elicitation_gateway.gateway import Gateway, normalize_directory
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.server.bridge.frames import FrameSplitter, FrameTooLarge
from elicitation_gateway.server.bridge.upstream import (
    Upstream,
    UpstreamError,
    forwarded_headers,
    returned_headers,
)
from elicitation_gateway.server.errors import tool_error
from elicitation_gateway.server.routes import questions, streams
from elicitation_gateway.server.routes.parsing import directory_of, viewer_of
from elicitation_gateway.server.routes.streams import addressed
from elicitation_gateway.server.sse import EventStreamResponse, backlog_chunks
from elicitation_gateway.stores.base import Subscription

logger = logging.getLogger(__name__)

OWN = "elicitation_gateway.own"
"""Scope key of requests that came in under ``/gateway/``: they get the gateway's own routes."""

UPSTREAM_SILENCE = 45.0
"""Seconds without a byte from the upstream's event stream (it beats every 10 s) before the merged
stream ends, so that a hung upstream does not leave the client waiting on a stream that says nothing."""

QUEUE_SIZE = 256
"""Frames waiting to be written to one client; a full queue holds the upstream's reads back."""

ERROR_BODY_LIMIT = 1024 * 1024
"""The most of an upstream's refusal (a 401, a 404) that is read to hand to the client."""
REFUSAL_READ_TIMEOUT = 10.0

_closing: set["asyncio.Task[None]"] = set()  # responses being closed after their stream was dropped


def own(request: Request) -> bool:
    return bool(request.scope.get(OWN))


def _upstream(request: Request) -> Upstream:
    return request.app.state.bridge.upstream


async def event(request: Request) -> Response:
    if own(request):
        return await streams.event(request)
    directory = normalize_directory(directory_of(request))
    frame_of = addressed(
        viewer_of(request),
        lambda e: e.frame() if e.visible_in(directory) else None,
        request.app.state.gateway.audience_of,
    )
    return await _merged_stream(request, frame_of)


async def global_event(request: Request) -> Response:
    if own(request):
        return await streams.global_event(request)
    gateway = request.app.state.gateway
    default = gateway.default_directory
    frame_of = addressed(viewer_of(request), lambda e: e.global_frame(default), gateway.audience_of)
    return await _merged_stream(request, frame_of)


async def list_questions(request: Request) -> Response:
    """Both sides' pending questions: the gateway's, oldest first, then the upstream's, oldest first
    (the two sides' ids do not sort against each other).

    The upstream unreachable or failing: the gateway's alone, so that its questions can still be
    answered. The upstream refusing the client (401, 403): its answer, as it is.
    """
    if own(request):
        return await questions.list_questions(request)
    gateway: Gateway = request.app.state.gateway
    mine = await gateway.pending_listing(directory_of(request), viewer_of(request))
    upstream = _upstream(request)
    try:
        response = await _forward(upstream, request)
    except UpstreamError as error:
        logger.warning("GET /question lists the gateway's questions only: %s", error.message)
        return questions.listing(mine)
    if response.status_code in (401, 403):  # the client must learn that it needs credentials
        return _as_response(response, response.content, decoded=True)
    try:
        theirs = response.json() if response.status_code == 200 else None
    except ValueError:
        theirs = None
    if not isinstance(theirs, list):
        logger.warning(
            "GET /question lists the gateway's questions only: the OpenCode server answered %d, not a list",
            response.status_code,
        )
        return questions.listing(mine)
    # The gateway's items spliced as they were encoded when asked; only the upstream's are encoded here.
    return questions.listing([*mine, *map(dumps, theirs)])


handlers = {
    "/event": event,
    "/global/event": global_event,
    "/question": list_questions,
    "/question/": list_questions,
}
"""The bridge's handlers of the route table's merged rows, by path."""


async def _forward(upstream: Upstream, request: Request) -> httpx.Response:
    """This request to the upstream, read whole (a small JSON answer)."""
    scope = request.scope
    url = upstream.url_for(scope.get("raw_path") or scope["path"].encode(), scope.get("query_string", b""))
    built = upstream.build(request.method, url, forwarded_headers(scope["headers"], drop=[b"last-event-id"]))
    return await upstream.fetch(built, within=upstream.timeout)


def _as_response(response: httpx.Response, body: bytes, *, decoded: bool = False) -> Response:
    """The upstream's answer handed on as it is (a refusal, an error)."""
    dropped = (b"content-length", b"content-encoding") if decoded else (b"content-length",)
    headers = [(name, value) for name, value in returned_headers(response.headers) if name not in dropped]
    handed_on = Response(body, status_code=response.status_code)
    handed_on.raw_headers = [*headers, (b"content-length", str(len(body)).encode())]
    return handed_on


async def _merged_stream(request: Request, frame_of: Callable[[events.Event], bytes | None]) -> Response:
    gateway: Gateway = request.app.state.gateway
    upstream = _upstream(request)
    last_event_id = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    # Before the upstream is asked: from here on, nothing the gateway publishes is missed.
    subscription = await gateway.subscribe(last_event_id)
    try:
        response = await _open_upstream_stream(upstream, request)
    except UpstreamError as error:
        gateway.unsubscribe(subscription)
        logger.warning("%s: %s", request.url.path, error.message)
        return tool_error(error.status, error.code, error.message)
    except BaseException:
        gateway.unsubscribe(subscription)
        raise
    if response.status_code != 200 or not response.headers.get("content-type", "").startswith(
        "text/event-stream"
    ):
        gateway.unsubscribe(subscription)
        return await _refusal(response)

    merge = _Merge(response, subscription, frame_of, gateway.metrics)

    def closed() -> None:
        gateway.unsubscribe(subscription)
        merge.close()

    return EventStreamResponse(  # type: ignore[return-value]  (an ASGI response, like Starlette's)
        merge.frames(),
        heartbeat=lambda: b"",  # never called: the upstream's heartbeats keep the stream alive
        interval=math.inf,
        send_timeout=gateway.settings.send_timeout,
        on_disconnect=subscription.close,
        on_close=closed,
        headers=streams.HEADERS,
        buffer=gateway.settings.subscriber_buffer,
    )


async def _open_upstream_stream(upstream: Upstream, request: Request) -> httpx.Response:
    scope = request.scope
    url = upstream.url_for(scope.get("raw_path") or scope["path"].encode(), scope.get("query_string", b""))
    # Last-Event-ID names the gateway's events (the upstream's frames carry no id); the stream is
    # read as text, so no compression.
    headers = forwarded_headers(scope["headers"], drop=[b"last-event-id", b"accept-encoding"])
    built = upstream.build("GET", url, headers, read_timeout=UPSTREAM_SILENCE)
    return await upstream.send(built, within=upstream.timeout)


async def _refusal(response: httpx.Response) -> Response:
    """The upstream refused the stream (a 401, a 503): the client gets that answer."""
    body = bytearray()
    try:
        async with asyncio.timeout(REFUSAL_READ_TIMEOUT):
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > ERROR_BODY_LIMIT:
                    break
    except (TimeoutError, httpx.HTTPError) as error:
        logger.debug("the OpenCode server's refusal was cut short: %r", error)
    finally:
        await response.aclose()
    return _as_response(response, bytes(body))


class _Merge:
    """One client's merged stream: the upstream's frames and the gateway's, into one queue."""

    def __init__(
        self,
        response: httpx.Response,
        subscription: Subscription,
        frame_of: Callable[[events.Event], bytes | None],
        metrics: Metrics,
    ) -> None:
        self._response = response
        self._subscription = subscription
        self._frame_of = frame_of
        self._metrics = metrics
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUE_SIZE)
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    async def frames(self) -> AsyncGenerator[bytes, None]:
        chunks = self._response.aiter_bytes()
        splitter = FrameSplitter()
        try:
            first = await self._first_frames(chunks, splitter)
            if not first:
                return
            yield first
            for chunk, count in backlog_chunks(self._frame_of(e) for e in self._subscription.backlog):
                self._metrics.events_sent.inc(count)
                yield chunk
                await asyncio.sleep(0)  # a long backlog must not hold the loop from others
            self._tasks = [
                asyncio.create_task(self._pump_upstream(chunks, splitter)),
                asyncio.create_task(self._pump_gateway()),
            ]
            while (frame := await self._queue.get()) is not None:
                yield frame
        finally:
            for task in self._tasks:
                task.cancel()
            self._closed = True
            await self._response.aclose()

    def close(self) -> None:
        """The response is done with this stream (also when it never started reading it)."""
        for task in self._tasks:
            task.cancel()
        if not self._closed:
            self._closed = True
            task = asyncio.get_running_loop().create_task(self._response.aclose())
            _closing.add(task)
            task.add_done_callback(_closing.discard)

    async def _first_frames(self, chunks: AsyncIterator[bytes], splitter: FrameSplitter) -> bytes:
        """The upstream's first frame (its ``server.connected``) leads the merged stream."""
        try:
            while True:
                if frames := splitter.feed(await anext(chunks)):
                    return b"".join(frames)
        except StopAsyncIteration:
            logger.info("the OpenCode server ended its event stream before its first event")
        except (httpx.HTTPError, FrameTooLarge) as error:
            logger.info("the OpenCode server's event stream failed: %s", str(error) or repr(error))
        return b""

    async def _pump_upstream(self, chunks: AsyncIterator[bytes], splitter: FrameSplitter) -> None:
        try:
            async for chunk in chunks:
                if frames := splitter.feed(chunk):
                    await self._queue.put(b"".join(frames))
            logger.info("the OpenCode server ended its event stream; the client will reconnect")
        except (httpx.HTTPError, FrameTooLarge) as error:
            logger.info("the OpenCode server's event stream failed (%s); the client will reconnect", error)
        await self._queue.put(None)

    async def _pump_gateway(self) -> None:
        async for published in self._subscription:  # ends when the subscription is closed
            if (frame := self._frame_of(published)) is not None:
                self._metrics.events_sent.inc()
                await self._queue.put(frame)
        await self._queue.put(None)
