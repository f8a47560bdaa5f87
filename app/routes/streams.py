"""Server-Sent Events for answerers: ``/event`` and ``/global/event``."""

from collections.abc import AsyncIterator, Callable

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app import events
from app.gateway import Gateway, normalize_directory
from app.routes.parsing import directory_of
from app.store import StoreUnavailable

HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}


async def event(request: Request) -> Response:
    directory = normalize_directory(directory_of(request))
    return await _stream(request, lambda e: e.frame() if e.visible_in(directory) else None, wrap=False)


async def global_event(request: Request) -> Response:
    default = request.app.state.gateway.default_directory
    return await _stream(request, lambda e: e.global_frame(default), wrap=True)


routes = [
    Route("/event", event, methods=["GET"]),
    Route("/global/event", global_event, methods=["GET"]),
]


async def _stream(
    request: Request, frame_of: Callable[[events.Event], bytes | None], *, wrap: bool
) -> Response:
    gateway: Gateway = request.app.state.gateway
    if not await gateway.store.healthy():
        raise StoreUnavailable("the question store is unreachable; reconnect shortly")
    if gateway.subscribers >= gateway.settings.max_subscribers:
        limit = gateway.settings.max_subscribers
        message = f"{limit} event streams are open, the most the gateway serves (GATEWAY_MAX_SUBSCRIBERS)"
        return JSONResponse({"error": "too_many_subscribers", "message": message}, status_code=429)
    last_event_id = request.headers.get("last-event-id") or request.query_params.get("last_event_id")

    async def frames() -> AsyncIterator[bytes]:
        # Subscribing inside the generator ties the subscription's life to the stream's.
        try:
            subscription = await gateway.store.subscribe(last_event_id)
        except StoreUnavailable:
            return  # the stream ends at once; the client reconnects when the store is back
        gateway.subscribers += 1
        metrics = gateway.metrics
        metrics.subscribers.inc()
        try:
            metrics.events_sent.inc()
            yield frame_of(events.connected())
            for missed in subscription.backlog:
                if (frame := frame_of(missed)) is not None:
                    metrics.events_sent.inc()
                    yield frame
            async for published in subscription:
                if (frame := frame_of(published)) is not None:
                    metrics.events_sent.inc()
                    yield frame
        finally:
            subscription.close()
            gateway.subscribers -= 1
            metrics.subscribers.dec()

    def heartbeat() -> ServerSentEvent:
        payload = events.heartbeat().payload()
        return ServerSentEvent(
            data=events.to_json({"payload": payload} if wrap else payload), sep=events.SEPARATOR
        )

    return EventSourceResponse(
        frames(),
        headers=HEADERS,
        ping=gateway.settings.heartbeat,
        ping_message_factory=heartbeat,
        sep=events.SEPARATOR,
        send_timeout=gateway.settings.send_timeout,
    )
