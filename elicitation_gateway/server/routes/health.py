"""Operations: liveness and readiness for orchestrators, metrics for Prometheus, the OpenAPI document."""

from starlette.requests import Request
from starlette.responses import Response

from elicitation_gateway import __version__
from elicitation_gateway.encoding import JsonResponse
from elicitation_gateway.gateway import Gateway
from elicitation_gateway.metrics import CONTENT_TYPE
from elicitation_gateway.server.bodies import GlobalHealth, Healthz, Livez, json_response


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


async def global_health(request: Request) -> Response:
    """OpenCode's shape: ``{"healthy": true, "version": ...}``."""
    healthy = await _gateway(request).healthy()
    return json_response(GlobalHealth(healthy=healthy, version=__version__), 200 if healthy else 503)


async def livez(request: Request) -> Response:
    """Liveness: answering at all proves the process and its event loop run. It awaits nothing, so an
    unreachable store or upstream (which ``/readyz`` reports) never makes an orchestrator restart it."""
    return json_response(Livez(status="ok", version=__version__))


async def readyz(request: Request) -> Response:
    """Readiness (``/readyz``, and ``/healthz`` as before): the store can serve (reached, its file in
    place and writable), the bridged upstream too (in bridge mode), and no shutdown began; ``reason``
    says what is wrong. The SQLite store says what an ask would get: not ready from a refused write
    until a write as large works again (its own, tried here, so it recovers without traffic), and a
    small write of its own when none worked in the last seconds."""
    gateway = _gateway(request)
    problem = await gateway.store_problem()
    store = "ok" if problem is None else "unavailable"
    bridge = getattr(request.app.state, "bridge", None)  # bridge mode: say which side is unhealthy
    upstream = None if bridge is None else "ok" if await bridge.healthy() else "unavailable"
    if gateway.closing:
        problem = "the gateway is shutting down"
    elif problem is None and upstream == "unavailable":
        problem = "the bridged OpenCode server is unreachable"
    status = "ok" if problem is None else "unavailable"
    body = Healthz(status=status, store=store, upstream=upstream, reason=problem, version=__version__)
    return json_response(body, 200 if status == "ok" else 503)


async def metrics(request: Request) -> Response:
    gateway = _gateway(request)
    gateway.metrics.pending.set(await gateway.count_pending())
    gateway.metrics.pending_bytes.set(gateway.pending_bytes.total)
    return Response(gateway.metrics.exposition(), media_type=CONTENT_TYPE)


async def doc(request: Request) -> Response:
    """The OpenAPI document, which the app hands over: the document reads the route table, which names
    this handler, so this module cannot import it."""
    return JsonResponse(request.app.state.openapi_document())
