"""Tracing, with the ``otel`` extra: OpenTelemetry's ASGI middleware around the app.

It is added only when the extra is installed and a tracer provider has been set up before the app is
made, as ``opentelemetry-instrument elicitation-gateway`` does from the standard ``OTEL_*`` environment.
Otherwise nothing is added, and without the extra nothing is imported.

Each request becomes one server span named by its route (``GET /elicitations/{id}``, never the id), with
the ``mcp`` package's spans for what ``/mcp`` handles. Event streams and long waits stay one span each:
the per-message spans OpenTelemetry would add for every frame sent are left out. Probes and scrapes are
not traced unless ``OTEL_PYTHON_EXCLUDED_URLS`` (or ``OTEL_PYTHON_ASGI_EXCLUDED_URLS``) says otherwise.

A span never carries a query string, which may hold the answerer's password (``?auth_token=``, for
browsers' EventSource) or an upstream's credentials in bridge mode, nor a one-tap link's token: as in
the access log, they are written ``…``.
"""

import os
import urllib.parse
from typing import Any

from starlette.middleware import Middleware
from starlette.routing import Match

DEFAULT_EXCLUDED_URLS = "/livez$,/healthz$,/readyz$,/metrics$,/global/health$"
"""Regular expressions searched in each request's URL (without its query)."""
LINK_PREFIX = "/link/"
HIDDEN = "…"


def secrets_in(scope: dict[str, Any]) -> list[str]:
    """What of the request's URL no span may carry: its query, as sent and decoded, and a link's token."""
    secrets = []
    if (path := scope.get("path") or "").startswith(LINK_PREFIX) and len(path) > len(LINK_PREFIX):
        secrets.append(path[len(LINK_PREFIX) :])
    if query := (scope.get("query_string") or b"").decode("latin-1"):
        secrets += {query, urllib.parse.unquote(query), urllib.parse.unquote_plus(query)}
    return secrets


def hide_secrets(span: Any, scope: dict[str, Any]) -> None:
    """OpenTelemetry's server request hook: rewrite the attributes it set from the URL."""
    if not (secrets := secrets_in(scope)):
        return
    for key, value in dict(getattr(span, "attributes", None) or {}).items():
        if isinstance(value, str) and any(secret in value for secret in secrets):
            for secret in sorted(secrets, key=len, reverse=True):
                value = value.replace(secret, HIDDEN)
            span.set_attribute(key, value)


def span_details(scope: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The span's name and route: the method and the path template of the route that serves it."""
    method = scope.get("method") or "HTTP"
    partial = None
    for route in getattr(scope.get("app"), "routes", ()):
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return f"{method} {route.path}", {"http.route": route.path}
        if match is Match.PARTIAL and partial is None:
            partial = route.path
    if partial is not None:
        return f"{method} {partial}", {"http.route": partial}
    return method, {}


def tracing_middleware() -> list[Middleware]:
    """OpenTelemetry's ASGI middleware when the extra is installed and a tracer provider is set up."""
    try:
        from opentelemetry import trace
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
        from opentelemetry.util.http import get_excluded_urls, parse_excluded_urls
    except ImportError:
        return []
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return []
    configured = "OTEL_PYTHON_ASGI_EXCLUDED_URLS" in os.environ or "OTEL_PYTHON_EXCLUDED_URLS" in os.environ
    excluded = get_excluded_urls("ASGI") if configured else parse_excluded_urls(DEFAULT_EXCLUDED_URLS)
    return [
        Middleware(
            OpenTelemetryMiddleware,
            excluded_urls=excluded,
            default_span_details=span_details,
            exclude_spans=["receive", "send"],
            server_request_hook=hide_secrets,
        )
    ]
