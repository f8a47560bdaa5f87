"""Operations: health for orchestrators, metrics for Prometheus, the OpenAPI document."""

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app import __version__
from app.gateway import Gateway
from app.metrics import CONTENT_TYPE
from app.openapi import openapi_document


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


async def global_health(request: Request) -> Response:
    """OpenCode's shape: ``{"healthy": true, "version": ...}``."""
    healthy = await _gateway(request).store.healthy()
    return JSONResponse({"healthy": healthy, "version": __version__}, status_code=200 if healthy else 503)


async def healthz(request: Request) -> Response:
    gateway = _gateway(request)
    store = "ok" if await gateway.store.healthy() else "unavailable"
    status = "ok" if store == "ok" and not gateway.closing else "unavailable"
    body = {"status": status, "store": store, "version": __version__}
    return JSONResponse(body, status_code=200 if status == "ok" else 503)


async def metrics(request: Request) -> Response:
    gateway = _gateway(request)
    gateway.metrics.pending.set(await gateway.store.count_pending())
    return Response(gateway.metrics.exposition(), media_type=CONTENT_TYPE)


async def doc(request: Request) -> Response:
    return JSONResponse(openapi_document())


routes = [
    Route("/doc", doc, methods=["GET"]),
    Route("/global/health", global_health, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
