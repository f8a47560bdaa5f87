"""A ``tools/call`` to the upstream, its result as the upstream sent it.

The proxy passes results through: checking one against the tool's output schema is the client's part,
as it would be without the proxy. ``Client.call_tool`` of the ``mcp`` package checks it and cannot be
told not to, so the call is sent here with the session's public ``send_request``, and the rest of what
``Client.call_tool`` does is done the same way:

- progress goes to ``progress_callback``; the session's read timeout applies to each request, and
  cancelling the awaiting task cancels the request on the upstream;
- an ``InputRequiredResult`` (2026-07-28) has its questions answered through the client's callbacks
  (``ClientSession.dispatch_input_request``, all of a round's at once) and the call is sent again with
  the answers and the ``requestState``, up to ``Client.input_required_max_rounds`` rounds; a round with
  no questions waits a moment first (50 ms, doubling to 250 ms);
- a call the upstream refuses with ``HEADER_MISMATCH`` (2026-07-28: its listing of the tool is stale
  in the session) is sent once more after the tools are listed again.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.client import Client, ClientRequestContext, InputRequiredRoundsExceededError
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

RESULT: TypeAdapter[types.CallToolResult | types.InputRequiredResult] = TypeAdapter(
    types.CallToolResult | types.InputRequiredResult
)
FIRST_WAIT = 0.05
"""Seconds before sending a call again whose ``InputRequiredResult`` asked nothing (only state)."""
LONGEST_WAIT = 0.25
RELIST_PAGES = 100
"""Pages of ``tools/list`` read at most after a ``HEADER_MISMATCH``: a listing that never ends
cannot hold a call."""


async def call_tool(
    client: Client,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    progress_callback: ProgressFnT | None = None,
    meta: types.RequestParamsMeta | None = None,
) -> types.CallToolResult:
    """Call ``name`` on ``client``'s server and return its result unchecked against the tool's output
    schema (an ``isError`` result included).

    Raises:
        MCPError: the upstream's error, or a callback's refusal of one of its questions.
        InputRequiredRoundsExceededError: more rounds than ``client.input_required_max_rounds``.
        pydantic.ValidationError: a result that is not a ``CallToolResult`` of the negotiated version.
    """

    async def send(responses: types.InputResponses | None, state: str | None) -> Any:
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(
                name=name, arguments=arguments, input_responses=responses, request_state=state, _meta=meta
            )
        )
        try:
            return await client.session.send_request(request, RESULT, progress_callback=progress_callback)
        except MCPError as mismatch:
            if (
                mismatch.code != types.HEADER_MISMATCH
                or client.protocol_version not in MODERN_PROTOCOL_VERSIONS
            ):
                raise
            try:
                with anyio.fail_after(client.read_timeout_seconds):
                    await _list_again(client, name)
            except (MCPError, TimeoutError, ValidationError) as failed:
                raise mismatch from failed
            return await client.session.send_request(request, RESULT, progress_callback=progress_callback)

    result = await send(None, None)
    rounds = 0
    wait = FIRST_WAIT
    while isinstance(result, types.InputRequiredResult):
        rounds += 1
        if rounds > client.input_required_max_rounds:
            raise InputRequiredRoundsExceededError(client.input_required_max_rounds)
        responses: types.InputResponses | None = None
        if result.input_requests:
            wait = FIRST_WAIT
            responses = await _answers(client, result.input_requests)
        else:
            await anyio.sleep(wait)
            wait = min(wait * 2, LONGEST_WAIT)
        result = await send(responses, result.request_state)
    return result  # type: ignore[no-any-return]


async def _answers(client: Client, requests: dict[str, types.InputRequest]) -> types.InputResponses:
    """Each question of a round answered through the client's callbacks, all at once; the first
    refusal (an ``ErrorData``) ends the others and is raised."""
    session = client.session
    answers: types.InputResponses = {}
    refused: types.ErrorData | None = None

    async def answer(tasks: anyio.abc.TaskGroup, key: str, request: types.InputRequest) -> None:
        nonlocal refused
        meta = request.params.meta if request.params else None
        context = ClientRequestContext(session=session, request_id=key, meta=meta)
        response = await session.dispatch_input_request(context, request)
        if isinstance(response, types.ErrorData):
            refused = response
            tasks.cancel_scope.cancel()
        else:
            answers[key] = response

    async with anyio.create_task_group() as tasks:
        for key, request in requests.items():
            tasks.start_soon(answer, tasks, key, request)
    if refused is not None:
        raise MCPError.from_error_data(refused)
    return answers


async def _list_again(client: Client, name: str) -> None:
    """The tools listed afresh, page by page, until a page lists ``name``."""
    cursor: str | None = None
    for _ in range(RELIST_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        cursor = page.next_cursor
        if cursor is None or any(tool.name == name for tool in page.tools):
            return
