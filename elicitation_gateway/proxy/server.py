"""The stdio MCP server the client talks to: the upstream's own, forwarded unchanged.

It says it is the upstream (its ``serverInfo``, instructions and capabilities), lists and calls what the
upstream offers, and relays progress and list-changed notifications. Only elicitation differs: the
upstream asks the proxy, and the proxy asks a person (:mod:`.asking`). Upstream errors reach the client
as they were sent; when the upstream is gone, every request gets an error that says so.

A call, prompt or resource the upstream answers with an ``InputRequiredResult`` on the 2025-11-25
connection, which cannot carry it, is asked again on the upstream's 2026-07-28 connection
(``--upstream-era auto``): the upstream runs it up to its question twice, as it would on any later
``InputRequiredResult`` round. Where the era was pinned, an error that the other era would avoid names
the flag, after the upstream's words.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.client import Client
from mcp.client.session import IncomingMessage
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from elicitation_gateway.proxy.asking import Call, Calls, FaultReport, Progress, client_elicitation, say
from elicitation_gateway.proxy.rounds import Exchanges
from elicitation_gateway.proxy.tool_call import call_tool
from elicitation_gateway.proxy.upstream import (
    Era,
    NewerEra,
    UpstreamFailed,
    input_required_refused,
    push_refused,
)

T = TypeVar("T")
_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, ConnectionError, EOFError)


class UpstreamGone(MCPError):
    """The upstream's connection closed: its process exited, or its URL stopped answering."""


class _Link:
    """One connection to the upstream, and why it is gone once it is."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.gone: str | None = None
        self.failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class Forwarder:
    """The handlers of the proxy's server, each forwarding to ``upstream``."""

    def __init__(
        self,
        upstream: Client,
        calls: Calls,
        upstream_name: str,
        faults: FaultReport,
        exchanges: Exchanges | None = None,
        *,
        era: Era = "auto",
        newer: NewerEra | None = None,
    ) -> None:
        """``exchanges``: with ``--answer-with client``, where a 2026-07-28 client's rounds are kept.
        ``era``: the ``--upstream-era`` asked for; ``newer``: the upstream's 2026-07-28 connection, for
        what the 2025-11-25 ``upstream`` cannot carry (``auto`` only)."""
        self.upstream = upstream
        self.exchanges = exchanges
        self.faults = faults
        self.calls = calls
        self.upstream_name = upstream_name
        self.era = era
        self.newer = newer
        self.downstream: ServerSession | None = None
        self._main = _Link(upstream)
        self._newer: _Link | None = None

    @property
    def gone(self) -> str | None:
        return self._main.gone

    async def _forward(
        self, ctx: ServerRequestContext[Any], request: Coroutine[Any, Any, T], link: _Link | None = None
    ) -> T:
        link = link or self._main
        self.downstream = ctx.session
        if link.gone is not None:
            request.close()
            raise UpstreamGone(types.INTERNAL_ERROR, link.gone)
        # On a task of its own: once an HTTP upstream has failed, the SDK's client never answers, and
        # does not even finish being cancelled (it waits to tell the upstream), so the proxy stops
        # waiting for it instead.
        forwarded = asyncio.ensure_future(request)
        try:
            await asyncio.wait({forwarded, link.failed}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            forwarded.cancel()
            raise
        if not forwarded.done():
            forwarded.cancel()
            raise UpstreamGone(types.INTERNAL_ERROR, link.gone or "the upstream MCP server failed")
        try:
            return forwarded.result()
        except MCPError as error:
            if error.code == types.CONNECTION_CLOSED:
                raise self._went_away(link, str(error)) from error
            raise
        except _GONE as error:
            raise self._went_away(link, type(error).__name__) from error

    def _went_away(self, link: _Link, why: str) -> UpstreamGone:
        self._link_failed(link, f"its connection closed ({why})")
        return UpstreamGone(types.INTERNAL_ERROR, link.gone)

    def upstream_failed(self, why: str) -> None:
        """The connection to the upstream broke (its process exited, an exchange with its URL failed).
        The SDK's client sends nothing more then, and may never answer what is in flight: every request
        ends now, with an error that says why."""
        self._link_failed(self._main, why)

    def newer_failed(self, why: str) -> None:
        """The upstream's 2026-07-28 connection broke: what it carries gets an error from now on."""
        if self._newer is not None:
            self._link_failed(self._newer, why)

    def _link_failed(self, link: _Link, why: str) -> None:
        if link.gone is None:
            if link is self._main:
                link.gone = f"the upstream MCP server {self.upstream_name} is gone: {why}"
                self.faults.fault(f"{link.gone}; every request now gets an error")
            else:
                link.gone = (
                    f"the upstream MCP server {self.upstream_name}'s 2026-07-28 connection is gone: {why}"
                )
                self.faults.fault(f"{link.gone}; what answers InputRequiredResult now gets an error")
        if not link.failed.done():
            link.failed.set_result(None)

    async def _in_either_era(
        self, ctx: ServerRequestContext[Any], request: Callable[[Client], Coroutine[Any, Any, T]]
    ) -> T:
        """``request`` on the upstream's connection and, where that connection is in the 2025-11-25 era
        and the upstream answered with an ``InputRequiredResult`` it could not send, once more on its
        2026-07-28 connection (``--upstream-era auto``). Errors a flag would avoid name it."""
        modern = self.upstream.protocol_version in MODERN_PROTOCOL_VERSIONS
        try:
            result = await self._forward(ctx, request(self.upstream))
            return _result_with_hint(result, modern, self.era, second=False)
        except MCPError as error:
            if modern or self.newer is None or not input_required_refused(error):
                raise _with_hint(error, modern, self.era) from None
            failure = error
        try:
            client = await self.newer.client()
        except UpstreamFailed as refused:
            raise MCPError(
                failure.code,
                f"{failure.message} ({PROXY}the upstream answered with an InputRequiredResult, which "
                f"only 2026-07-28 carries, and a 2026-07-28 connection to it failed: {refused})",
                failure.data,
            ) from None
        if self._newer is None or self._newer.client is not client:
            self._newer = _Link(client)
            say(
                f"elicitation-gateway proxy: {self.upstream_name} answered with an InputRequiredResult, "
                "which 2025-11-25 cannot carry: such requests are asked again on a second connection to "
                f"it, in {client.protocol_version}",
                self.faults.stream,
            )
        try:
            result = await self._forward(ctx, request(client), self._newer)
            return _result_with_hint(result, True, self.era, second=True)
        except MCPError as error:
            raise _with_hint(error, True, self.era, second=True) from None

    # -- tools ---------------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> Any:
        return await self._forward(ctx, self.upstream.session.list_tools(params=_paginated(ctx, params)))

    async def call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        meta = _forwarded_meta(ctx.meta)
        if self.exchanges is not None and _asked_in_rounds(ctx):
            exchange = self.exchanges.get(params.request_state)
            if exchange is not None:  # the client's retry, with its answers
                exchange.answer(params.input_responses)
            else:
                call = Call(params.name, ctx.session, ctx.request_id, None)
                exchange = self.exchanges.start(call, self._call(ctx, call, params, meta))
            return await exchange.next_round()
        token = (ctx.meta or {}).get("progress_token", (ctx.meta or {}).get("progressToken"))
        progress = Progress(ctx.session, token, ctx.request_id) if token is not None else None
        return await self._call(ctx, Call(params.name, ctx.session, ctx.request_id, progress), params, meta)

    async def _call(
        self, ctx: ServerRequestContext[Any], call: Call, params: types.CallToolRequestParams, meta: Any
    ) -> Any:
        with self.calls.running(call):
            try:
                return await self._in_either_era(
                    ctx,
                    lambda upstream: call_tool(
                        upstream,
                        params.name,
                        params.arguments,
                        progress_callback=call.progress.relay if call.progress is not None else None,
                        meta=meta,
                    ),
                )
            except (MCPError, anyio.get_cancelled_exc_class()):
                raise
            except Exception as error:  # the SDK's own refusals: too many rounds, a bad result
                raise MCPError(types.INTERNAL_ERROR, f"{self.upstream_name}: {error}") from error

    # -- prompts, resources, completion ----------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> Any:
        return await self._forward(ctx, self.upstream.session.list_prompts(params=_paginated(ctx, params)))

    async def get_prompt(self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> Any:
        meta = _forwarded_meta(ctx.meta)
        return await self._in_either_era(
            ctx, lambda upstream: upstream.get_prompt(params.name, params.arguments, meta=meta)
        )

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> Any:
        return await self._forward(ctx, self.upstream.session.list_resources(params=_paginated(ctx, params)))

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> Any:
        return await self._forward(
            ctx, self.upstream.session.list_resource_templates(params=_paginated(ctx, params))
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> Any:
        meta = _forwarded_meta(ctx.meta)
        return await self._in_either_era(
            ctx, lambda upstream: upstream.read_resource(str(params.uri), meta=meta)
        )

    async def subscribe_resource(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> Any:
        return await self._forward(ctx, self.upstream.subscribe_resource(str(params.uri)))

    async def unsubscribe_resource(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> Any:
        return await self._forward(ctx, self.upstream.unsubscribe_resource(str(params.uri)))

    async def complete(self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams) -> Any:
        return await self._forward(
            ctx,
            self.upstream.complete(
                params.ref,
                {"name": params.argument.name, "value": params.argument.value},
                params.context.arguments if params.context is not None else None,
            ),
        )

    # -- the upstream's notifications ------------------------------------------------------------

    async def relay_notification(self, message: IncomingMessage) -> None:
        """The upstream's list-changed and resource-updated notifications, passed to the client."""
        downstream = self.downstream
        if downstream is None or isinstance(message, Exception):
            return
        notification = getattr(message, "root", message)
        if isinstance(
            notification,
            types.ToolListChangedNotification
            | types.PromptListChangedNotification
            | types.ResourceListChangedNotification
            | types.ResourceUpdatedNotification,
        ):
            with contextlib.suppress(Exception):
                await downstream.send_notification(notification)


PROXY = "elicitation-gateway proxy: "
LEGACY_HINT = (
    "the upstream answered with an InputRequiredResult, which only 2026-07-28 carries; --upstream-era "
    "legacy keeps the proxy on 2025-11-25, where auto (the default) would ask again in 2026-07-28"
)
MODERN_HINTS = {
    "modern": "a push-style ctx.elicit needs 2025-11-25; --upstream-era modern keeps the proxy on "
    "2026-07-28, where auto (the default) would let it through",
    "refused": "a push-style ctx.elicit needs 2025-11-25, which the upstream refused at the handshake",
    "second": "a push-style ctx.elicit needs 2025-11-25, and this request had answered with an "
    "InputRequiredResult, which only 2026-07-28 carries: one request cannot ask in both styles",
}


def _hint(modern: bool, era: Era, second: bool = False) -> str | None:
    """Why an era error happened and which ``--upstream-era`` helps, for the connection it happened on
    (``second``: the 2026-07-28 one beside the 2025-11-25 one)."""
    if not modern:
        return LEGACY_HINT if era == "legacy" else None
    if second:
        return MODERN_HINTS["second"]
    return MODERN_HINTS["modern"] if era == "modern" else MODERN_HINTS["refused"]


def _with_hint(error: MCPError, modern: bool, era: Era, second: bool = False) -> MCPError:
    """``error``, its message followed by the proxy's hint when it is an era error a flag explains."""
    hint = _hint(modern, era, second)
    if isinstance(error, UpstreamGone) or hint is None:
        return error
    if (modern and push_refused(error.message)) or (not modern and input_required_refused(error)):
        return MCPError(error.code, f"{error.message} ({PROXY}{hint})", error.data)
    return error


def _result_with_hint(result: T, modern: bool, era: Era, second: bool) -> T:
    """A tool's error result that is a push-style question refused in 2026-07-28 (FastMCP returns it
    as such), its text followed by the proxy's hint."""
    if not isinstance(result, types.CallToolResult) or not result.is_error:
        return result
    content = list(result.content)
    for index, item in enumerate(content):
        if isinstance(item, types.TextContent) and push_refused(item.text):
            hint = _hint(modern, era, second)
            if hint is None:
                return result
            content[index] = item.model_copy(update={"text": f"{item.text} ({PROXY}{hint})"})
            return result.model_copy(update={"content": content})  # type: ignore[return-value]
    return result


def _asked_in_rounds(ctx: ServerRequestContext[Any]) -> bool:
    """A 2026-07-28 client that can answer elicitations: asked in ``InputRequiredResult`` rounds."""
    return (
        ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS
        and client_elicitation(ctx.session) is not None
    )


def _forwarded_meta(meta: Any) -> Any:
    """The client's ``_meta`` for the upstream: without the progress token (the proxy's connection to
    the upstream has its own) and the protocol's reserved keys (they describe the client's connection,
    not the proxy's)."""
    kept = {
        key: value
        for key, value in (meta or {}).items()
        if key not in ("progress_token", "progressToken") and not key.startswith("io.modelcontextprotocol/")
    }
    return kept or None


def _paginated(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.PaginatedRequestParams | None:
    meta = _forwarded_meta(ctx.meta)
    if params is None and meta is None:
        return None
    return types.PaginatedRequestParams(cursor=params.cursor if params else None, _meta=meta)


def build_server(forwarder: Forwarder) -> tuple[Server[Any], NotificationOptions]:
    """A server that offers what the upstream offers, under the upstream's name."""
    upstream = forwarder.upstream
    capabilities = upstream.server_capabilities
    handlers: dict[str, Any] = {}
    if capabilities.tools is not None:
        handlers.update(on_list_tools=forwarder.list_tools, on_call_tool=forwarder.call_tool)
    if capabilities.prompts is not None:
        handlers.update(on_list_prompts=forwarder.list_prompts, on_get_prompt=forwarder.get_prompt)
    if capabilities.resources is not None:
        handlers.update(
            on_list_resources=forwarder.list_resources,
            on_list_resource_templates=forwarder.list_resource_templates,
            on_read_resource=forwarder.read_resource,
        )
        if capabilities.resources.subscribe:
            handlers.update(
                on_subscribe_resource=forwarder.subscribe_resource,
                on_unsubscribe_resource=forwarder.unsubscribe_resource,
            )
    if capabilities.completions is not None:
        handlers.update(on_completion=forwarder.complete)
    info = upstream.server_info or types.Implementation(name=forwarder.upstream_name, version="")
    server: Server[Any] = Server(
        info.name,
        version=info.version,
        title=info.title,
        description=info.description,
        instructions=upstream.instructions,
        website_url=info.website_url,
        icons=info.icons,
        **handlers,
    )
    notifications = NotificationOptions(
        prompts_changed=bool(capabilities.prompts and capabilities.prompts.list_changed),
        resources_changed=bool(capabilities.resources and capabilities.resources.list_changed),
        tools_changed=bool(capabilities.tools and capabilities.tools.list_changed),
    )
    return server, notifications
