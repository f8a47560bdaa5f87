"""``elicitation-gateway proxy``: the command line of :mod:`elicitation_gateway.proxy`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import NoReturn, cast

import anyio
from mcp.server.stdio import stdio_server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from elicitation_gateway.client import DEFAULT_URL, GatewayClient
from elicitation_gateway.display import clip
from elicitation_gateway.escalation import FLAG_FORM, escalate_flag
from elicitation_gateway.proxy.asking import NAME_LENGTH, Asker, Calls, FaultReport, say
from elicitation_gateway.proxy.rounds import Exchanges
from elicitation_gateway.proxy.server import Forwarder, build_server
from elicitation_gateway.proxy.stdin import ClientInput
from elicitation_gateway.proxy.upstream import (
    DEFAULT_CONNECT_TIMEOUT,
    ClientLeft,
    NewerEra,
    Upstream,
    UpstreamFailed,
    held,
)

PROG = "elicitation-gateway proxy"
USAGE = f"""\
{PROG} [OPTIONS] -- COMMAND [ARGS...]        an upstream MCP server started over stdio
       {PROG} [OPTIONS] --upstream URL [--header 'Name: value' ...]   one over Streamable HTTP"""
EPILOG = """\
The proxy is an MCP server over stdio: configure it where the upstream was configured. The upstream's
tools, prompts and resources pass through unchanged; its elicitations are asked through the gateway
(or, with --answer-with client, of the client when it can answer them).

examples:
  elicitation-gateway proxy -- npx -y @modelcontextprotocol/server-everything
  elicitation-gateway proxy --upstream https://mcp.example.com/mcp --header 'Authorization: Bearer abc'
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{PROG}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        usage=USAGE,
        description="Put an MCP server behind Elicitation Gateway: its questions reach a person.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--gateway", metavar="URL", help=f"the gateway (default: $GATEWAY_URL, else {DEFAULT_URL})"
    )
    parser.add_argument("--token", help="the gateway's tool-side bearer token (default: $GATEWAY_TOOL_TOKEN)")
    parser.add_argument("--upstream", metavar="URL", help="the upstream's Streamable HTTP endpoint")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="a header sent to the --upstream URL (repeatable)",
    )
    parser.add_argument(
        "--answer-with",
        choices=("gateway", "client"),
        default="gateway",
        help="gateway (the default): every question goes to the gateway; client: to the client when it "
        "declared it can answer elicitations, to the gateway otherwise",
    )
    parser.add_argument(
        "--upstream-era",
        choices=("auto", "legacy", "modern"),
        default="auto",
        help="the protocol spoken to the upstream: legacy (2025-11-25), which lets push-style questions "
        "through; modern (2026-07-28), InputRequiredResult questions only; auto (the default): legacy, "
        "and a second, modern connection for what answers InputRequiredResult (modern alone if the "
        "upstream refuses legacy)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=DEFAULT_CONNECT_TIMEOUT,
        metavar="SECONDS",
        help="how long the upstream has to start and answer the MCP handshake; then the proxy exits "
        f"with status 1 (default: {DEFAULT_CONNECT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--directory",
        help="the directory the questions belong to on the gateway, for answerers to filter by "
        "(default: mcp:NAME, NAME the upstream's name)",
    )
    parser.add_argument("--session-id", help="the OpenCode session the questions belong to (ses_...)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="how long each question waits")
    parser.add_argument(
        "--on-timeout",
        choices=("cancel", "default"),
        help="at the timeout: cancel (the gateway's default), or accept the schema's defaults",
    )
    parser.add_argument(
        "--progress-interval",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="while a person is asked, progress to the client this often (where it sent a token); 0: never",
    )
    parser.add_argument(
        "--to",
        action="append",
        metavar="NAME",
        help="a person or group:NAME of the gateway's people file the questions are for (repeatable)",
    )
    parser.add_argument(
        "--escalate",
        action="append",
        type=escalate_flag,
        metavar=FLAG_FORM,
        help="if nobody has answered SECONDS after the ask, the questions also reach these people and "
        "group:NAMEs, who are notified (repeatable: one step each)",
    )
    parser.add_argument("command", nargs="*", help=argparse.SUPPRESS)
    return parser


def parse(argv: list[str]) -> tuple[argparse.Namespace, Upstream]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.upstream and args.command:
        parser.error("give either --upstream URL or -- COMMAND, not both")
    if not args.upstream and not args.command:
        parser.error("name the upstream MCP server: -- COMMAND [ARGS...], or --upstream URL")
    if args.header and not args.upstream:
        parser.error("--header is for an --upstream URL")
    if args.timeout is not None and not args.timeout > 0:
        parser.error("--timeout must be a positive number of seconds")
    if not args.connect_timeout > 0:
        parser.error("--connect-timeout must be a positive number of seconds")
    headers: dict[str, str] = {}
    for header in args.header:
        name, colon, value = header.partition(":")
        if not colon or not name.strip():
            parser.error(f"--header {header!r} is not 'Name: value'")
        headers[name.strip()] = value.strip()
    if args.upstream and not args.upstream.startswith(("http://", "https://")):
        parser.error(f"--upstream must be an http:// or https:// URL, not {args.upstream!r}")
    if args.gateway and not args.gateway.startswith(("http://", "https://")):
        parser.error(f"--gateway must be an http:// or https:// URL, not {args.gateway!r}")
    return args, Upstream(command=list(args.command), url=args.upstream, headers=headers)


def main(argv: list[str]) -> int:
    args, upstream = parse(argv)
    try:
        return asyncio.run(serve(args, upstream))
    except KeyboardInterrupt:
        return 130


async def serve(args: argparse.Namespace, upstream: Upstream) -> int:
    """Connects to the upstream, then serves the client until it closes stdin (status 0); status 1 when
    the upstream cannot be connected. Stdin is read from the start: a client that leaves while the
    upstream is still connecting stops it there."""
    client_input = ClientInput()
    faults = FaultReport()
    calls = Calls()
    async with GatewayClient(
        args.gateway,
        token=args.token,
        session_id=args.session_id,
        timeout=args.timeout,
        on_timeout=args.on_timeout,
    ) as gateway:
        asker = Asker(
            gateway,
            calls,
            answer_with=args.answer_with,
            progress_interval=args.progress_interval,
            faults=faults,
            to=args.to,
            escalate=args.escalate,
        )
        forwarder: Forwarder | None = None

        async def relay(message: object) -> None:
            if forwarder is not None:
                await forwarder.relay_notification(message)  # type: ignore[arg-type]

        def failed(why: str) -> None:
            if forwarder is not None:
                forwarder.upstream_failed(why)

        def newer_failed(why: str) -> None:
            if forwarder is not None:
                forwarder.newer_failed(why)

        try:
            async with held(
                upstream,
                args.upstream_era,
                failed,
                connect_timeout=args.connect_timeout,
                client_gone=client_input.ended,
                elicitation_callback=asker,
                message_handler=relay,
            ) as client:
                info = client.server_info
                name = info.name if info is not None else upstream.describe()
                asker.server_name = (info.title or info.name) if info is not None else name
                gateway.directory = args.directory or f"mcp:{clip(name, NAME_LENGTH)}"
                started = (
                    f"{PROG}: {clip(asker.server_name, NAME_LENGTH)} ({upstream.describe()}), "
                    f"protocol {client.protocol_version}; questions to {gateway.url} "
                    f"in {gateway.directory} (--answer-with {args.answer_with})"
                )
                say(started)
                exchanges = Exchanges(args.timeout or 300.0) if args.answer_with == "client" else None
                newer = None
                if args.upstream_era == "auto" and client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                    newer = NewerEra(
                        upstream,
                        newer_failed,
                        connect_timeout=args.connect_timeout,
                        client_gone=client_input.ended,
                        elicitation_callback=asker,
                        message_handler=relay,
                    )
                forwarder = Forwarder(
                    client, calls, name, faults, exchanges, era=args.upstream_era, newer=newer
                )
                server, notifications = build_server(forwarder)
                try:
                    # stdio_server takes the lines as they are; only stdout is its own.
                    stdin = cast("anyio.AsyncFile[str]", client_input)
                    async with stdio_server(stdin=stdin) as (read, write):
                        await server.run(read, write, server.create_initialization_options(notifications))
                finally:
                    if exchanges is not None:
                        await exchanges.aclose()
                    if newer is not None:
                        await newer.aclose()
        except ClientLeft:
            return 0
        except UpstreamFailed as error:
            say(f"{PROG}: {error}")
            return 1
    return 0
