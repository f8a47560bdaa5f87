"""An upstream's elicitation becomes one gateway question, and the person's answer goes back.

Questions are attributed to the client's tool call that caused them: a resolver's question is asked
within the call itself (a context variable names it); a push-style ``elicitation/create`` arrives on
the upstream connection with nothing that ties it to a call, so it is the call in progress when only
one is (else it names no tool). While a question waits, every call it may belong to gets a progress
notification each ``progress_interval`` seconds (where the client sent a progress token), so that
clients whose request timeout resets on progress keep waiting for the person.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TextIO

from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INVALID_PARAMS,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    ErrorData,
    RequestId,
)

from elicitation_gateway.client import (
    ElicitationLost,
    GatewayClient,
    GatewayError,
    GatewayRefused,
    GatewayUnavailable,
)
from elicitation_gateway.display import clip, safe

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext
    from mcp.server.session import ServerSession

AnswerWith = Literal["gateway", "client"]
WAITING = "waiting for a person to answer through Elicitation Gateway"
NAME_LENGTH = 100
"""Characters of the upstream's name and of a tool's name in who asks: a name, not a message."""


def asker(server: str, tool: str | None) -> str:
    """Who asks, as answerers show it apart from the message: ``server · tool``, each name cut to
    :data:`NAME_LENGTH` characters (an upstream's name of a megabyte still lets its questions through)."""
    server = clip(server, NAME_LENGTH)
    return f"{server} · {clip(tool, NAME_LENGTH)}" if tool else server


def say(line: str, stream: TextIO | None = None) -> None:
    """One line on stderr, the proxy's own: what an upstream named in it is made safe to show on a
    terminal (:func:`~elicitation_gateway.display.safe`), on one line."""
    print(safe(line, oneline=True), file=stream or sys.stderr, flush=True)


class Progress:
    """Progress notifications to the client for one call: the upstream's, relayed, and the proxy's own
    while a person is being asked. Values only rise, as the spec requires: each of the proxy's own
    notifications adds one to what the client has seen, and the upstream's are shifted by as many."""

    def __init__(self, session: ServerSession, token: str | int, request_id: RequestId | None) -> None:
        self.session = session
        self.token = token
        self.request_id = request_id
        self.shift = 0.0
        self.last: float | None = None
        self.total: float | None = None

    async def relay(self, progress: float, total: float | None, message: str | None) -> None:
        await self._send(progress + self.shift, None if total is None else total + self.shift, message)

    async def waiting(self, message: str) -> None:
        self.shift += 1
        value = (self.last or 0) + 1
        await self._send(value, None if self.total is None else self.total + 1, message)

    async def _send(self, progress: float, total: float | None, message: str | None) -> None:
        if self.last is not None and progress <= self.last:
            return  # an upstream that went backwards: the client has seen more already
        self.last, self.total = progress, total
        with contextlib.suppress(Exception):  # a client gone away hears nothing, and needs nothing
            await self.session.send_progress_notification(
                self.token, progress, total, message, related_request_id=self.request_id
            )


@dataclass(eq=False)
class Call:
    """One tool call of the client, in progress."""

    tool: str
    session: ServerSession
    request_id: RequestId | None
    progress: Progress | None
    asking: set[asyncio.Future[Any]] = field(default_factory=set)
    exchange: Any = None
    """The call's :class:`~.rounds.Exchange` when its client is asked in ``InputRequiredResult`` rounds."""


_current_call: contextvars.ContextVar[Call | None] = contextvars.ContextVar("proxy_call", default=None)


class Calls:
    """The client's tool calls in progress, to attribute the upstream's questions to them."""

    def __init__(self) -> None:
        self._calls: dict[int, Call] = {}
        self._numbers = itertools.count()

    @contextlib.contextmanager
    def running(self, call: Call) -> Iterator[Call]:
        number = next(self._numbers)
        self._calls[number] = call
        token = _current_call.set(call)
        try:
            yield call
        finally:
            _current_call.reset(token)
            del self._calls[number]
            for task in call.asking:  # its questions are nobody's now: withdrawn
                task.cancel()

    def candidates(self) -> list[Call]:
        """The calls a question arriving now may belong to: the one asking, when known."""
        current = _current_call.get()
        if current is not None:
            return [current]
        return list(self._calls.values())


class FaultReport:
    """Says on stderr why questions cannot be asked, once for each new reason."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.last: str | None = None

    def fault(self, reason: str) -> None:
        if reason != self.last:
            self.last = reason
            say(f"elicitation-gateway proxy: {reason}", self.stream)

    def recovered(self) -> None:
        self.last = None


class Asker:
    """The upstream's ``elicitation_callback``: asks the gateway (or the client, with
    ``answer_with="client"`` when the client can be asked) and gives the upstream its answer."""

    def __init__(
        self,
        gateway: GatewayClient,
        calls: Calls,
        *,
        answer_with: AnswerWith = "gateway",
        progress_interval: float = 15.0,
        faults: FaultReport | None = None,
        to: Sequence[str] | None = None,
        escalate: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        self.gateway = gateway
        self.calls = calls
        self.to = to
        """Whom the gateway asks (people and ``group:`` names of its people file); None: everyone."""
        self.escalate = escalate
        """Whom each question also reaches while nobody answers (``escalate`` steps); None: nobody."""
        self.answer_with = answer_with
        self.progress_interval = progress_interval
        self.faults = faults or FaultReport()
        self.server_name = "MCP server"

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> ElicitResult | ErrorData:
        calls = self.calls.candidates()
        # The asking runs in a task of its own, which a call that ends withdraws: the callback itself
        # runs on the SDK's task for the upstream connection, which is not the proxy's to cancel.
        asking = asyncio.ensure_future(self._answer(calls, params))
        for call in calls:
            call.asking.add(asking)
        try:
            return await asking
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the upstream withdrew its question
            return ElicitResult(action="cancel")  # the client's call ended: nobody waits for an answer
        finally:
            for call in calls:
                call.asking.discard(asking)

    async def _answer(
        self, calls: list[Call], params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> ElicitResult | ErrorData:
        client = self._client_to_ask(calls, params)
        if client is not None and client.exchange is not None:
            return await client.exchange.ask(params)
        if client is not None:
            return await client.session.send_request(
                ElicitRequest(params=params),
                ElicitResult,
                metadata=ServerMessageMetadata(related_request_id=client.request_id),
            )
        async with self._keeping_alive(calls, params.message):
            return await self._ask_gateway(params, calls[0].tool if len(calls) == 1 else None)

    def _client_to_ask(
        self, calls: list[Call], params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> Call | None:
        """With ``--answer-with client``: the call whose client declared it can answer this kind of
        elicitation, on a connection that can carry the request (2025-11-25) or in ``InputRequiredResult``
        rounds (2026-07-28), else ``None``."""
        if self.answer_with != "client" or len(calls) != 1:
            return None
        call = calls[0]
        elicitation = client_elicitation(call.session)
        if elicitation is None or not (call.exchange is not None or call.session.can_send_request):
            return None
        if isinstance(params, ElicitRequestURLParams):
            return call if elicitation.url is not None else None
        # A bare {} (the 2025-06-18 form) means form elicitation.
        return call if elicitation.form is not None or elicitation.url is None else None

    async def _ask_gateway(
        self, params: ElicitRequestFormParams | ElicitRequestURLParams, tool: str | None
    ) -> ElicitResult | ErrorData:
        who = asker(self.server_name, tool)
        form = _as_form(params)
        try:
            result = await self.gateway.elicit(form, asker=who, to=self.to, escalate=self.escalate)
        except GatewayRefused as error:
            if error.status in (401, 403):
                self.faults.fault(
                    f"the gateway at {self.gateway.url} refused the token ({error.status}): "
                    "the upstream's questions are answered cancel (set GATEWAY_TOOL_TOKEN or --token)"
                )
                return ElicitResult(action="cancel")
            if error.status in (413, 429):
                self.faults.fault(
                    f"the gateway could not take a question now: {error.message}; answered cancel"
                )
                return ElicitResult(action="cancel")
            self.faults.fault(f"the gateway refused a question of {who}: {error.message}")
            return ErrorData(
                code=INVALID_PARAMS, message=f"Elicitation Gateway refused the question: {error.message}"
            )
        except (GatewayUnavailable, ElicitationLost) as error:
            self.faults.fault(
                f"{error.message}; the upstream's questions are answered cancel until it is back"
            )
            return ElicitResult(action="cancel")
        except GatewayError as error:
            self.faults.fault(f"{error.message}; answered cancel")
            return ElicitResult(action="cancel")
        self.faults.recovered()
        if isinstance(params, ElicitRequestURLParams):
            return ElicitResult(action=result.action)
        return result.plain()

    @contextlib.asynccontextmanager
    async def _keeping_alive(self, calls: list[Call], message: str) -> Any:
        beats = [call.progress for call in calls if call.progress is not None]
        if not beats or self.progress_interval <= 0:
            yield
            return

        async def beat() -> None:
            while True:
                await asyncio.sleep(self.progress_interval)
                for progress in beats:
                    await progress.waiting(f"{WAITING}: {message}"[:200])

        task = asyncio.get_running_loop().create_task(beat())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def client_elicitation(session: ServerSession) -> Any:
    """The elicitation capability the client declared (on this request, in the 2026-07-28 era)."""
    capabilities = session.client_capabilities
    return capabilities.elicitation if capabilities is not None else None


def _as_form(params: ElicitRequestFormParams | ElicitRequestURLParams) -> ElicitRequestFormParams:
    """The gateway's question: the upstream's message (who asks goes apart, as ``asker``). A URL-mode
    elicitation becomes one yes/no question that shows the link: the person opens it and confirms."""
    if isinstance(params, ElicitRequestURLParams):
        schema = {
            "type": "object",
            "properties": {
                "done": {
                    "type": "boolean",
                    "title": f"Open {params.url} and finish there",
                    "description": "Confirm once done; decline to refuse.",
                    "default": True,
                }
            },
        }
        return ElicitRequestFormParams(message=f"{params.message}\n{params.url}", requested_schema=schema)
    return ElicitRequestFormParams(
        message=params.message, requested_schema=params.requested_schema, _meta=params.meta
    )
