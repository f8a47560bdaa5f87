"""A Python client for tools: ask the gateway an MCP elicitation and get the ``ElicitResult`` back.

:meth:`GatewayClient.elicit` uses the asynchronous form of the tool side (``POST /elicitations``,
then ``GET /elicitations/{id}?wait=``) rather than one long ``POST /elicit``, so that a proxy that
cuts long requests only costs a reconnect. :meth:`GatewayClient.elicitation_callback` plugs the
gateway into any ``mcp`` SDK client (``ClientSession`` or ``mcp.client.Client``), so that the
elicitations of its servers are asked through the gateway.

The result types are those of ``mcp.types`` (``mcp_types`` is the same package, lighter to import).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import httpx
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    ErrorData,
)
from pydantic import ValidationError

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext

__all__ = [
    "DEFAULT_URL",
    "ElicitationLost",
    "GatewayClient",
    "GatewayError",
    "GatewayRefused",
    "GatewayResult",
    "GatewayUnavailable",
    "OnTimeout",
    "default_url",
    "form_params",
    "parse_result",
]

DEFAULT_URL = "http://127.0.0.1:4096"
OnTimeout = Literal["cancel", "default"]
"""At a question's timeout the tool gets ``cancel``, or (``default``) the schema's defaults accepted."""
_RETRYABLE_STATUSES = frozenset({502, 503, 504})
"""What a proxy (or a restarting gateway) answers while the gateway cannot be reached."""


class GatewayResult(ElicitResult):
    """An ``ElicitResult`` that also says who answered or declined: the person signed in, on a gateway
    with people (``GATEWAY_PEOPLE``); None otherwise. It is an ``ElicitResult`` wherever one is
    expected; :meth:`GatewayClient.elicitation_callback` gives the MCP server a plain one."""

    answered_by: str | None = None

    def plain(self) -> ElicitResult:
        """The result as MCP defines it, for an MCP peer: who answered stays with the gateway."""
        return ElicitResult(meta=self.meta, action=self.action, content=self.content)


class GatewayError(Exception):
    """The gateway could not give an ``ElicitResult``; ``message`` says why."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


class GatewayRefused(GatewayError):
    """The gateway refused the request (a 4xx, such as an invalid schema): nothing was asked."""


class GatewayUnavailable(GatewayError):
    """The gateway could not be reached, or failed, for longer than the client keeps trying."""


class ElicitationLost(GatewayError):
    """The gateway no longer knows the elicitation (it restarted, or the result expired)."""


def default_url() -> str:
    """Where the gateway is unless told: ``$GATEWAY_URL``, else :data:`DEFAULT_URL`."""
    return os.environ.get("GATEWAY_URL") or DEFAULT_URL


class GatewayClient:
    """Ask elicitations of a running gateway.

    ``url`` defaults to ``$GATEWAY_URL``, else ``http://127.0.0.1:4096``; ``token`` (sent as a
    bearer token) to ``$GATEWAY_TOOL_TOKEN``. ``session_id``, ``directory``, ``timeout`` and
    ``on_timeout`` are the defaults of every :meth:`elicit`. Each wait is a long-poll of
    ``poll_wait`` seconds, short enough for proxies that cut idle requests; a failed connection is
    retried for up to ``reconnect_for`` seconds before :class:`GatewayUnavailable` is raised.

    Use it as an async context manager, or call :meth:`aclose` when done.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        session_id: str | None = None,
        directory: str | None = None,
        timeout: float | None = None,
        on_timeout: OnTimeout | None = None,
        poll_wait: float = 25.0,
        reconnect_for: float = 60.0,
        url_mode: Literal["error", "decline"] = "error",
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = (url or default_url()).rstrip("/")
        token = token if token is not None else os.environ.get("GATEWAY_TOOL_TOKEN")
        self.session_id = session_id
        self.directory = directory
        self.timeout = timeout
        self.on_timeout = on_timeout
        self.poll_wait = poll_wait
        self.reconnect_for = reconnect_for
        self.url_mode = url_mode
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(timeout=httpx.Timeout(10.0))
        self._withdrawals: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> GatewayClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Finish withdrawing abandoned questions, then close the connections."""
        if self._withdrawals:
            await asyncio.wait(set(self._withdrawals), timeout=10)
        if self._own_http:
            await self._http.aclose()

    # ---------------------------------------------------------------------------------------------
    # Tool side

    async def elicit(
        self,
        params: ElicitRequestFormParams | Mapping[str, Any],
        *,
        session_id: str | None = None,
        directory: str | None = None,
        message_id: str | None = None,
        call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  (how long the question waits, on the gateway)
        on_timeout: OnTimeout | None = None,
        asker: str | None = None,
        to: Sequence[str] | None = None,
        escalate: Sequence[Mapping[str, Any]] | None = None,
    ) -> GatewayResult:
        """Ask and wait for the person's answer.

        ``params`` are MCP form params (the model, or a dict as on the wire). ``timeout`` is how
        long the question waits for an answer (the gateway's default otherwise); when it passes
        the result is ``cancel``, or with ``on_timeout="default"`` the schema's defaults accepted.
        ``asker`` names who asks (a proxy: the server and its tool), which answerers show apart from
        the message. ``to`` names the people and ``group:`` names it is for (``GATEWAY_PEOPLE``);
        ``escalate`` whom it also reaches while nobody answers: steps such as
        ``{"after": 600, "to": ["group:leads"]}``.
        If the caller is cancelled, the question is withdrawn. Raises :class:`GatewayError` (or a
        subclass) when no result can be had.
        """
        creating = asyncio.ensure_future(
            self.create(
                params,
                session_id=session_id,
                directory=directory,
                message_id=message_id,
                call_id=call_id,
                timeout=timeout,
                on_timeout=on_timeout,
                asker=asker,
                to=to,
                escalate=escalate,
            )
        )
        try:
            # Shielded: a caller cancelled while the question is being created still withdraws it.
            request_id = await asyncio.shield(creating)
            return await self.result(request_id)
        except BaseException:  # cancelled, or given up: nobody will read the answer
            self._withdraw_in_background(creating)
            raise

    async def create(
        self,
        params: ElicitRequestFormParams | Mapping[str, Any],
        *,
        session_id: str | None = None,
        directory: str | None = None,
        message_id: str | None = None,
        call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  (how long the question waits, on the gateway)
        on_timeout: OnTimeout | None = None,
        asker: str | None = None,
        to: Sequence[str] | None = None,
        escalate: Sequence[Mapping[str, Any]] | None = None,
    ) -> str:
        """Ask without waiting (``POST /elicitations``); return the elicitation's id."""
        body = form_params(params)
        if to:
            body = {**body, "to": list(to)}
        if escalate:
            body = {**body, "escalate": [dict(step) for step in escalate]}
        query = {
            "sessionID": session_id or self.session_id,
            "directory": directory or self.directory,
            "messageID": message_id,
            "callID": call_id,
            "timeout": _seconds(timeout or self.timeout),
            "onTimeout": on_timeout or self.on_timeout,
            "asker": asker,
        }
        query = {name: value for name, value in query.items() if value is not None}
        # Not retried: a lost response may have asked already, and a gateway that is down should fail fast.
        response = await self._send("POST", "/elicitations", json=body, params=query, retry=False)
        if response.status_code != 201:
            raise _refusal(response, "POST /elicitations")
        request_id = response.json().get("id")
        if not isinstance(request_id, str):
            raise GatewayError("the gateway answered POST /elicitations without an id")
        return request_id

    async def result(self, request_id: str) -> GatewayResult:
        """Wait for a created elicitation's result, long-polling and reconnecting as needed."""
        path = f"/elicitations/{request_id}"
        while True:
            response = await self._send(
                "GET",
                path,
                params={"wait": _seconds(self.poll_wait)},
                timeout=httpx.Timeout(10.0, read=self.poll_wait + 15.0),
            )
            if response.status_code == 404:
                raise ElicitationLost(
                    f"the gateway no longer knows elicitation {request_id} "
                    "(it restarted, or the result was kept too long)",
                    status=404,
                    code="not_found",
                )
            if response.status_code != 200:
                raise _refusal(response, f"GET {path}")
            body = response.json()
            if body.get("status") != "pending":
                return parse_result(body.get("result"))

    async def withdraw(self, request_id: str) -> None:
        """Withdraw a pending question (answerers see ``question.rejected``)."""
        response = await self._send("DELETE", f"/elicitations/{request_id}")
        if response.status_code not in (200, 404, 409):
            raise _refusal(response, f"DELETE /elicitations/{request_id}")

    # ---------------------------------------------------------------------------------------------
    # The mcp SDK's client side

    async def elicitation_callback(
        self, context: ClientRequestContext, params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> ElicitResult | ErrorData:
        """An ``elicitation_callback`` for ``ClientSession`` and ``mcp.client.Client``.

        Form elicitations are asked through the gateway. URL mode cannot be: it gets an
        ``ErrorData`` (-32602), or ``decline`` when the client was made with ``url_mode="decline"``.
        Gateway errors become ``ErrorData`` whose message says what went wrong.
        """
        if isinstance(params, ElicitRequestURLParams) or getattr(params, "mode", "form") != "form":
            if self.url_mode == "decline":
                return ElicitResult(action="decline")
            return ErrorData(
                code=INVALID_PARAMS,
                message="URL mode elicitation is not supported: the gateway asks form elicitations only",
            )
        try:
            result = await self.elicit(params)
        except GatewayRefused as error:
            return ErrorData(code=INVALID_PARAMS, message=error.message)
        except GatewayError as error:
            return ErrorData(code=INTERNAL_ERROR, message=error.message)
        return result.plain()

    # ---------------------------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        retry: bool = True,
        **options: Any,
    ) -> httpx.Response:
        """Send; with ``retry``, lost connections and proxy errors are retried for ``reconnect_for`` s."""
        deadline = time.monotonic() + (self.reconnect_for if retry else 0)
        delay = 0.1
        while True:
            try:
                response = await self._http.request(method, self.url + path, headers=self._headers, **options)
            except httpx.TransportError as error:
                if time.monotonic() + delay > deadline:
                    raise GatewayUnavailable(
                        f"cannot reach the gateway at {self.url}: {error or type(error).__name__}"
                    ) from error
            else:
                retryable = response.status_code in _RETRYABLE_STATUSES and _from_proxy(response)
                if not retryable or time.monotonic() + delay > deadline:
                    return response
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _withdraw_in_background(self, creating: asyncio.Future[str]) -> None:
        """Withdraw on a task of its own (the caller may be cancelled again at its next await), once
        the question's creation has finished, if it created one."""

        async def withdraw() -> None:
            # Failing this, the question ends at its timeout.
            with contextlib.suppress(GatewayError, ValueError, httpx.HTTPError):
                request_id = await creating
                await self._http.delete(
                    f"{self.url}/elicitations/{request_id}", headers=self._headers, timeout=5.0
                )

        task = asyncio.get_running_loop().create_task(withdraw())
        self._withdrawals.add(task)
        task.add_done_callback(self._withdrawals.discard)


def form_params(params: ElicitRequestFormParams | Mapping[str, Any]) -> dict[str, Any]:
    """MCP form params as they go on the wire (camelCase, no nulls)."""
    if isinstance(params, ElicitRequestURLParams) or (
        isinstance(params, Mapping) and params.get("mode") == "url"
    ):
        raise ValueError("URL mode elicitation is not supported: the gateway asks form elicitations only")
    if isinstance(params, Mapping):
        try:
            params = ElicitRequestFormParams.model_validate(dict(params))
        except ValidationError as error:
            raise ValueError(f"not MCP form params (message, requestedSchema): {error}") from None
    return params.model_dump(mode="json", by_alias=True, exclude_none=True)


def parse_result(result: Any) -> GatewayResult:
    """A :class:`GatewayResult` from the wire, with ``content`` present exactly when accepted."""
    try:
        parsed = GatewayResult.model_validate(result)
    except ValidationError as error:
        raise GatewayError(f"the gateway sent a result that is not an ElicitResult: {error}") from None
    if parsed.action == "accept":
        if parsed.content is None:
            raise GatewayError("the gateway sent an accepted result without content")
        return parsed
    return GatewayResult(action=parsed.action, answered_by=parsed.answered_by)


def _from_proxy(response: httpx.Response) -> bool:
    """A 503 from the gateway itself (it is shutting down) is final; a proxy's is worth a retry."""
    try:
        body = response.json()
    except ValueError:
        return True
    return not (isinstance(body, dict) and body.get("error") == "shutting_down")


def _refusal(response: httpx.Response, what: str) -> GatewayError:
    try:
        body = response.json()
    except ValueError:
        body = None
    code = message = None
    if isinstance(body, dict):
        code = body.get("error") if isinstance(body.get("error"), str) else None
        message = body.get("message") if isinstance(body.get("message"), str) else None
    message = message or f"{what} answered {response.status_code} {response.reason_phrase}".strip()
    kind = GatewayRefused if 400 <= response.status_code < 500 else GatewayUnavailable
    return kind(message, status=response.status_code, code=code)


def _seconds(value: float | None) -> str | None:
    return None if value is None else format(value, "g")
