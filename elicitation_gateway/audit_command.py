"""``elicitation-gateway audit``: the audit trail written to a file, and a file's chain checked.

``audit export [--since TIME] [--question ID] -o FILE`` reads ``GET /audit`` of a running gateway
(``--url``, else ``$GATEWAY_URL``) with the tool token (``--token``, else ``$GATEWAY_TOOL_TOKEN``): the
running gateway holds its store (a SQLite file is locked by its one process; Redis is shared by every
replica), so the trail is read where every store answers alike. ``audit verify FILE`` checks the
chain: exit 0 and the count of entries, or exit 1 naming the first line that breaks it.
"""

import argparse
import os
import sys
from pathlib import Path

import httpx

from elicitation_gateway.audit import parse_since, verify
from elicitation_gateway.client import DEFAULT_URL


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elicitation-gateway audit", description="Export the audit trail, or verify an export."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser(
        "export", help="write a running gateway's audit trail (GET /audit) to a file"
    )
    export.add_argument("-o", "--output", required=True, help="the file to write ('-': standard output)")
    export.add_argument(
        "--since", help="entries from the first at or after this RFC 3339 time (2026-12-06T05:00:00Z) or date"
    )
    export.add_argument("--question", help="entries of this question only (que_...)")
    export.add_argument("--url", help=f"the gateway (default: $GATEWAY_URL, else {DEFAULT_URL})")
    export.add_argument("--token", help="the tool-side bearer token (default: $GATEWAY_TOOL_TOKEN)")
    check = commands.add_parser("verify", help="check an exported trail's hash chain")
    check.add_argument("file", help="the exported trail ('-': standard input)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    return _export(args) if args.command == "export" else _verify(args.file)


def _export(args: argparse.Namespace) -> int:
    params = {}
    if args.since:
        try:
            parse_since(args.since)
        except ValueError as error:
            print(f"elicitation-gateway audit: --since: {error}", file=sys.stderr)
            return 2
        params["since"] = args.since
    if args.question:
        params["question"] = args.question
    url = (args.url or os.environ.get("GATEWAY_URL") or DEFAULT_URL).rstrip("/")
    token = args.token or os.environ.get("GATEWAY_TOOL_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(f"{url}/audit", params=params, headers=headers, timeout=60)
    except httpx.HTTPError as error:
        print(f"elicitation-gateway audit: cannot reach {url}: {error}", file=sys.stderr)
        return 1
    if response.status_code != 200:
        print(
            f"elicitation-gateway audit: {url}/audit answered {response.status_code}: {response.text[:300]}",
            file=sys.stderr,
        )
        return 1
    body = response.content
    if args.output == "-":
        sys.stdout.buffer.write(body)
        sys.stdout.flush()
    else:
        Path(args.output).write_bytes(body)
    count = body.count(b"\n")
    print(f"{count} entries written to {args.output}", file=sys.stderr)
    return 0


def _verify(name: str) -> int:
    try:
        if name == "-":
            verdict = verify(sys.stdin.buffer)
        else:
            with open(name, "rb") as file:
                verdict = verify(file)
    except OSError as error:
        print(f"elicitation-gateway audit: {error}", file=sys.stderr)
        return 2
    if not verdict.ok:
        print(f"{name}: {verdict.problem}", file=sys.stderr)
        return 1
    print(f"{name}: {verdict.entries} entries, the chain holds (last hash {verdict.last_hash})")
    return 0
