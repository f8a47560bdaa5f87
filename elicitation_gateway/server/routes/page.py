"""The built-in web page at ``/``: plain files shipped inside the package, so it works offline."""

import os
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIRECTORY = Path(__file__).resolve().parent.parent / "static"

# The page loads only its own files and talks only to its own origin; text from tools is never markup,
# and this policy makes sure nothing injected could run even if it were.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Always revalidate, so that a new version of the gateway serves its own page.
    "Cache-Control": "no-cache",
}


class PageFiles(StaticFiles):
    """The page's scripts and styles, revalidated on every load so they never outlive an upgrade."""

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response


async def index(request: Request) -> Response:
    return FileResponse(STATIC_DIRECTORY / "index.html", media_type="text/html", headers=PAGE_HEADERS)


files = PageFiles(directory=STATIC_DIRECTORY)
