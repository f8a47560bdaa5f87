"""Questions for a client of the 2026-07-28 era, which the proxy cannot send a request: with
``--answer-with client`` they go to it as ``InputRequiredResult`` rounds.

The upstream's call runs on a task of its own (an :class:`Exchange`). Each time it asks, the client's
pending ``tools/call`` is answered with an ``InputRequiredResult`` carrying the question and an opaque
``requestState`` that names the exchange; the client's retry brings the answers (``inputResponses``),
which go to the upstream, and waits for the next question or the tool's result. A client that does not
retry within ``abandon_after`` seconds has given up: its open questions are answered ``cancel``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Coroutine
from typing import Any

from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)

from elicitation_gateway.proxy.asking import Call


class Exchange:
    """One upstream call of a 2026-07-28 client, across the rounds it takes."""

    def __init__(self, call: Call, abandon_after: float) -> None:
        self.call = call
        self.token = "gwx_" + secrets.token_urlsafe(24)
        self.abandon_after = abandon_after
        self.asked: asyncio.Queue[tuple[str, ElicitRequestFormParams | ElicitRequestURLParams]] = (
            asyncio.Queue()
        )
        self.waiting: dict[str, asyncio.Future[ElicitResult]] = {}
        self.upstream: asyncio.Task[Any] | None = None
        self._numbers = 0
        self._abandon: asyncio.TimerHandle | None = None

    def start(self, work: Coroutine[Any, Any, Any]) -> None:
        self.upstream = asyncio.get_running_loop().create_task(work)

    async def ask(self, params: ElicitRequestFormParams | ElicitRequestURLParams) -> ElicitResult:
        """The upstream's question: asked in the client's next round, answered by its retry."""
        self._numbers += 1
        key = f"elicit-{self._numbers}"
        answer: asyncio.Future[ElicitResult] = asyncio.get_running_loop().create_future()
        self.waiting[key] = answer
        await self.asked.put((key, params))
        try:
            return await answer
        finally:
            self.waiting.pop(key, None)

    def answer(self, responses: dict[str, Any] | None) -> None:
        """The client's retry: each answer to the question it answers."""
        if self._abandon is not None:
            self._abandon.cancel()
            self._abandon = None
        for key, response in (responses or {}).items():
            waiting = self.waiting.get(key)
            if waiting is not None and not waiting.done():
                waiting.set_result(_elicit_result(response))

    async def next_round(self) -> Any:
        """The tool's result, or an ``InputRequiredResult`` with the questions asked meanwhile."""
        assert self.upstream is not None
        question = asyncio.ensure_future(self.asked.get())
        try:
            await asyncio.wait({self.upstream, question}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the client cancelled its call: the upstream's call ends too
            question.cancel()
            self.cancel()
            raise
        if self.upstream.done():
            question.cancel()
            return self.upstream.result()
        asked = [question.result()]
        while not self.asked.empty():
            asked.append(self.asked.get_nowait())
        self._abandon = asyncio.get_running_loop().call_later(self.abandon_after, self._abandoned)
        return InputRequiredResult(
            input_requests={key: ElicitRequest(params=params) for key, params in asked},
            request_state=self.token,
        )

    def _abandoned(self) -> None:
        for waiting in self.waiting.values():
            if not waiting.done():
                waiting.set_result(ElicitResult(action="cancel"))

    def cancel(self) -> None:
        if self._abandon is not None:
            self._abandon.cancel()
        if self.upstream is not None:
            self.upstream.cancel()


class Exchanges:
    """The exchanges in progress, by the ``requestState`` their client echoes."""

    def __init__(self, abandon_after: float = 300.0) -> None:
        self.abandon_after = abandon_after
        self._by_token: dict[str, Exchange] = {}

    def start(self, call: Call, work: Coroutine[Any, Any, Any]) -> Exchange:
        exchange = Exchange(call, self.abandon_after)
        call.exchange = exchange
        self._by_token[exchange.token] = exchange
        exchange.start(work)
        assert exchange.upstream is not None
        exchange.upstream.add_done_callback(lambda _: self._by_token.pop(exchange.token, None))
        return exchange

    def get(self, token: str | None) -> Exchange | None:
        return self._by_token.get(token) if token else None

    async def aclose(self) -> None:
        for exchange in list(self._by_token.values()):
            exchange.cancel()
            if exchange.upstream is not None:
                with contextlib.suppress(BaseException):
                    await exchange.upstream


def _elicit_result(response: Any) -> ElicitResult:
    """The client's response as an ``ElicitResult``; anything else is a dismissal."""
    if isinstance(response, ElicitResult):
        return response
    try:
        return ElicitResult.model_validate(
            response.model_dump(by_alias=True) if hasattr(response, "model_dump") else response
        )
    except ValueError:
        return ElicitResult(action="cancel")
