"""The ASGI application: ``create_app(settings)``, or ``app`` configured from the environment."""

import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from app.gateway import Gateway
from app.routes import routes
from app.settings import Settings

logger = logging.getLogger("app")


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
    return JSONResponse(
        {"error": code, "message": f"{request.method} {request.url.path}: {error.detail}"},
        status_code=error.status_code,
        headers=error.headers,
    )


async def _server_error(request: Request, error: Exception) -> JSONResponse:
    logger.exception("unexpected error on %s %s", request.method, request.url.path)
    return JSONResponse({"error": "internal", "message": "unexpected error; see the server log"}, 500)


def create_app(settings: Settings | None = None, gateway: Gateway | None = None) -> Starlette:
    settings = settings or Settings()
    gateway = gateway or Gateway(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.start()
        try:
            yield
        finally:
            await gateway.shutdown()

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    app.state.gateway = gateway
    app.state.settings = settings
    return app
