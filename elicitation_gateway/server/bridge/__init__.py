"""Bridge mode: the gateway in front of the user's running ``opencode serve``, on one port.

The OpenCode TUI is a client of a whole OpenCode server. With ``GATEWAY_OPENCODE_URL`` set, the
gateway is one: every request it does not own goes to the upstream unchanged and streams back
(:mod:`.upstream`); the event streams and the question list are both sides' merged (:mod:`.merged`);
replies go to whichever side asked the question. Routes both sides have (``/mcp``, ``/doc``,
``/global/health``, ``/``) are the upstream's, and the gateway's own move under ``/gateway/``
(``/gateway/mcp``, ``/gateway/`` for the answer page, ``/gateway/doc``).

At start-up the gateway finds (or makes) one upstream session titled "Elicitation Gateway" and
asks there the questions whose tool names no ``sessionID``: the TUI shows a question only inside a
session the upstream knows.

Nothing of this is loaded, or in the request path, unless bridge mode is on.
"""

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx

from elicitation_gateway.gateway import Gateway
from elicitation_gateway.server.bridge import merged
from elicitation_gateway.server.bridge.upstream import Upstream, UpstreamError
from elicitation_gateway.server.routes.table import ROUTES, Handler, Owner
from elicitation_gateway.server.security import BodyRule, Role, is_loopback
from elicitation_gateway.settings import Settings

logger = logging.getLogger(__name__)

PREFIX = "/gateway"
"""Where the gateway's own routes are in bridge mode: ``/gateway/mcp``, ``/gateway/doc``, ``/gateway/``."""
SESSION_TITLE = "Elicitation Gateway"
SESSION_CHECK_INTERVAL = 10.0
"""Seconds between checks that the upstream still knows the gateway's session (it may be restarted
with other data), and that it is up."""
CHECK_TIMEOUT = 5.0
"""Seconds the gateway's own calls to the upstream (its session, health) may take."""


def owner(method: str, path: str) -> Owner:
    """Who answers a request: the gateway's own under :data:`PREFIX`, else as the route table says.
    Pure, so that it is tested on its own."""
    if path == PREFIX or path.startswith(PREFIX + "/"):
        return Owner.PREFIXED
    return ROUTES.owner(method, path)


def own_path(path: str) -> str:
    """The gateway's route a path reaches: under :data:`PREFIX`, the path without it."""
    if path.startswith(PREFIX + "/"):
        return path[len(PREFIX) :]
    return path


class BridgedRoutes:
    """The route table as the checks outside the dispatch (the browser guard) must read it: a path
    under ``/gateway/`` is judged as the gateway's route it reaches (``/gateway/mcp`` as ``/mcp``)."""

    def role_of(self, path: str) -> Role:
        return ROUTES.role_of(own_path(path))

    def body_rule(self, method: str, path: str) -> BodyRule | None:
        return ROUTES.body_rule(method, own_path(path))

    def origin_checked(self, method: str, path: str) -> bool:
        return ROUTES.origin_checked(method, own_path(path))


class Bridge:
    """Bridge mode's parts for :func:`~elicitation_gateway.server.app.create_app`: its handlers, what
    its dispatching layer (:mod:`..middleware.dispatch`) needs, and what it runs while the app runs
    (the gateway's upstream session)."""

    def __init__(self, gateway: Gateway, settings: Settings) -> None:
        assert settings.opencode_url is not None
        self.gateway = gateway
        self.settings = settings
        self.upstream = Upstream(settings.opencode_url, timeout=settings.opencode_timeout)
        self.session_id: str | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._reachable: bool | None = None

    @property
    def handlers(self) -> dict[str, Handler]:
        """Its handlers of the route table's merged rows, by path."""
        return dict(merged.handlers)

    @property
    def routes(self) -> BridgedRoutes:
        """What the layers outside its dispatch ask of a request's route."""
        return BridgedRoutes()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Find or make the gateway's session now (so the first question goes there), then keep it."""
        # httpx logs every request at INFO; uvicorn's access log already has each one the bridge forwards.
        logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger("httpx").level))
        await self._check()
        self._keeper = asyncio.get_running_loop().create_task(self._keep())
        try:
            yield
        finally:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
            await self.upstream.aclose()

    async def healthy(self) -> bool:
        """Whether the upstream answers its health check now."""
        try:
            response = await self._call("GET", "/global/health")
        except UpstreamError:
            return False
        return response.status_code == 200 and _json(response, dict).get("healthy") is True

    # ---------------------------------------------------------------------------------------------

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(SESSION_CHECK_INTERVAL)
            await self._check()

    async def _check(self) -> None:
        try:
            await self._ensure_session()
        except UpstreamError as error:
            if self._reachable is not False:
                logger.warning(
                    "OpenCode bridge: %s; its routes answer 502 until it is back, the gateway's keep working",
                    error.message,
                )
            self._reachable = False
            return
        except Exception:  # an answer of a shape OpenCode does not give: try again at the next check
            logger.exception("OpenCode bridge: checking the gateway's session failed")
            return
        if self._reachable is False:
            logger.info("OpenCode bridge: the OpenCode server at %s is back", self.upstream)
        if self._reachable is None:
            await self._warn_if_exposed()
        self._reachable = True

    async def _warn_if_exposed(self) -> None:
        """Requests for OpenCode pass the gateway's access control by: listening beyond loopback, the
        gateway opens an OpenCode without a password (which runs commands) to the network."""
        if is_loopback(self.settings.host):
            return
        request = self.upstream.build("GET", self.upstream.url_for(b"/config"), httpx.Headers())
        try:
            response = await self.upstream.fetch(request, within=CHECK_TIMEOUT)
        except UpstreamError:
            return
        if response.status_code == 200:
            logger.warning(
                "OpenCode bridge: the OpenCode server at %s answers without a password and the gateway "
                "listens on %s: anyone who can reach the gateway can drive OpenCode; set "
                "OPENCODE_SERVER_PASSWORD for both",
                self.upstream,
                self.settings.host,
            )

    async def _ensure_session(self) -> None:
        if self.session_id is not None:
            response = await self._call("GET", f"/session/{self.session_id}")
            if response.status_code == 200:
                return
            if response.status_code != 404:
                self._refused(response, "check its session")
                return
            logger.warning(
                "OpenCode bridge: session %s is gone from the OpenCode server; making another",
                self.session_id,
            )
        session = await self._find_session() or await self._create_session()
        if session is None:
            return
        self.session_id = session["id"]
        self.gateway.default_session_id = session["id"]
        logger.info(
            'OpenCode bridge to %s: questions whose tool names no sessionID go to session %s ("%s", '
            "directory %s); open it with: opencode attach %s --session %s",
            self.upstream,
            session["id"],
            SESSION_TITLE,
            session.get("directory", "?"),
            self._own_url(),
            session["id"],
        )

    async def _find_session(self) -> dict[str, Any] | None:
        """The newest session titled "Elicitation Gateway": a restarted gateway keeps its session, so
        a TUI opened with ``--session`` keeps showing its questions."""
        response = await self._call("GET", "/session")
        if response.status_code != 200:
            self._refused(response, "list its sessions")
            return None
        listed = _json(response, list)
        mine = [s for s in listed if isinstance(s, dict) and s.get("title") == SESSION_TITLE and "id" in s]
        if not mine:
            return None
        return max(mine, key=lambda s: (s.get("time") or {}).get("updated") or 0)

    async def _create_session(self) -> dict[str, Any] | None:
        response = await self._call("POST", "/session", {"title": SESSION_TITLE})
        session = _json(response, dict)
        if response.status_code != 200 or "id" not in session:
            self._refused(response, "make a session")
            return None
        return session

    async def _call(self, method: str, path: str, body: object = None) -> httpx.Response:
        """The gateway's own request to the upstream, with the answerer's credentials when set: in
        bridge mode ``OPENCODE_SERVER_PASSWORD`` is the upstream's password as well."""
        headers: dict[str, str] = {}
        if body is not None:
            headers["content-type"] = "application/json"
        if self.settings.answerer_password is not None:
            secret = f"{self.settings.answerer_username}:{self.settings.answerer_password.get_secret_value()}"
            headers["authorization"] = "Basic " + base64.b64encode(secret.encode()).decode()
        content = None if body is None else json.dumps(body).encode()
        upstream = self.upstream
        request = upstream.build(
            method, upstream.url_for(path.encode()), httpx.Headers(headers), content=content
        )
        return await upstream.fetch(request, within=CHECK_TIMEOUT)

    def _refused(self, response: httpx.Response, what: str) -> None:
        hint = ""
        if response.status_code == 401:
            hint = ": run the gateway with the OpenCode server's OPENCODE_SERVER_PASSWORD"
        logger.warning(
            "OpenCode bridge: the OpenCode server at %s refused to %s (HTTP %d)%s",
            self.upstream,
            what,
            response.status_code,
            hint,
        )

    def _own_url(self) -> str:
        host = self.settings.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.settings.port}" if self.settings.port else f"http://{shown}:<port>"


def _json(response: httpx.Response, kind: type[Any]) -> Any:
    """The response's JSON if it is a ``kind`` (dict or list), else an empty one."""
    try:
        value = response.json()
    except ValueError:
        return kind()
    return value if isinstance(value, kind) else kind()
