"""Server-Sent Events for answerers: ``/event`` and ``/global/event``."""

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from elicitation_gateway import events
from elicitation_gateway.gateway import Gateway, normalize_directory
from elicitation_gateway.people import Viewer
from elicitation_gateway.server.routes.parsing import directory_of, viewer_of
from elicitation_gateway.server.sse import EventStreamResponse, backlog_chunks

HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}


async def event(request: Request) -> Response:
    directory = normalize_directory(directory_of(request))
    frame_of = addressed(
        viewer_of(request),
        lambda e: e.frame() if e.visible_in(directory) else None,
        request.app.state.gateway.audience_of,
    )
    return await _stream(request, frame_of, wrap=False)


async def global_event(request: Request) -> Response:
    gateway = request.app.state.gateway
    default = gateway.default_directory
    frame_of = addressed(viewer_of(request), lambda e: e.global_frame(default), gateway.audience_of)
    return await _stream(request, frame_of, wrap=True)


FrameOf = Callable[[events.Event], bytes | None]


def addressed(
    viewer: Viewer | None, frame_of: FrameOf, audience_of: Callable[[dict[str, Any]], Any] | None = None
) -> FrameOf:
    """For a gateway with people, a stream without the questions addressed to others: their
    ``question.asked``, and their ``question.replied`` or ``question.rejected``, which carry the ``to``
    they finished with, so that a stream replaying after a reconnect shows the finish of a question
    it showed before (one this stream showed is finished on it whatever the ``to``). ``audience_of``
    says whom a ``question.asked``'s question is for now (an escalation widens it); without it, its
    ``to``. A question is shown once: the ``question.asked`` of an escalation step reaches only those
    it adds."""
    if viewer is None:
        return frame_of
    shown: set[str] = set()

    def frame(event: events.Event) -> bytes | None:
        if event.type == events.ASKED:
            properties = event.properties
            request_id = properties.get("id", "")
            if request_id in shown:
                return None
            if not viewer.sees(properties.get("to") if audience_of is None else audience_of(properties)):
                return None
            shown.add(request_id)
        elif event.type in (events.REPLIED, events.REJECTED):
            properties = event.properties
            request_id = properties.get("requestID", "")
            if request_id in shown:
                shown.discard(request_id)
            elif not viewer.sees(properties.get("to")):
                return None
        return frame_of(event)

    return frame


async def _stream(request: Request, frame_of: FrameOf, *, wrap: bool) -> Response:
    gateway: Gateway = request.app.state.gateway
    metrics = gateway.metrics
    last_event_id = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    # Before the response starts: a client that leaves at any point after it finds a subscription to
    # close. StoreUnavailable becomes a 503, and the client retries; TooManySubscribers a 429.
    subscription = await gateway.subscribe(last_event_id)

    async def frames() -> AsyncGenerator[bytes, None]:
        metrics.events_sent.inc()
        yield frame_of(events.connected()) or b""
        # The frames are made (or found, made once for every stream) a chunk at a time, as it is written.
        for chunk, count in backlog_chunks(frame_of(missed) for missed in subscription.backlog):
            metrics.events_sent.inc(count)
            yield chunk
            await asyncio.sleep(0)  # a long backlog must not hold the loop from others
        async for published in subscription:  # ends when the subscription is closed
            queued = subscription.take_queued()
            if not queued:
                if (frame := frame_of(published)) is not None:
                    metrics.events_sent.inc()
                    yield frame
                continue
            # Events published while this stream waited its turn go out together, in few writes.
            for chunk, count in backlog_chunks(frame_of(ready) for ready in (published, *queued)):
                metrics.events_sent.inc(count)
                yield chunk

    def heartbeat() -> bytes:
        beat = events.heartbeat()
        return beat.global_frame(gateway.default_directory) if wrap else beat.frame()

    return EventStreamResponse(  # type: ignore[return-value]  (an ASGI response, like Starlette's)
        frames(),
        heartbeat=heartbeat,
        interval=gateway.settings.heartbeat,
        send_timeout=gateway.settings.send_timeout,
        on_disconnect=subscription.close,
        on_close=lambda: gateway.unsubscribe(subscription),
        headers=HEADERS,
        buffer=gateway.settings.subscriber_buffer,
    )
