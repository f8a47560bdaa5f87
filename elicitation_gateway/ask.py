"""``elicitation-gateway ask``: ask a running gateway from a shell script, and branch on the answer.

The elicitation is read as JSON from ``--schema FILE`` or standard input; the ``ElicitResult`` is
printed as one line of JSON, and the exit code says what the person did.
"""

import argparse
import asyncio
import json
import sys
from typing import Any, NoReturn

from elicitation_gateway.client import DEFAULT_URL, GatewayClient, GatewayError
from elicitation_gateway.escalation import FLAG_FORM, escalate_flag

ACCEPTED, DECLINED, CANCELLED, FAILED = 0, 1, 2, 3
EXIT_CODES = {"accept": ACCEPTED, "decline": DECLINED, "cancel": CANCELLED}
INTERRUPTED = 130

PROG = "elicitation-gateway ask"
EPILOG = f"""\
The input is MCP form params ({{"message": ..., "requestedSchema": {{...}}}}), a JSON-RPC
elicitation/create request, or a requestedSchema alone (then --message gives the message).

exit codes:
  {ACCEPTED}  accept: the person answered; the content is printed
  {DECLINED}  decline: the person refused to answer
  {CANCELLED}  cancel: the person dismissed the question, or it timed out
  {FAILED}  error: bad input, or the gateway could not be reached or refused the request
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """Usage errors exit with the documented error code (argparse's own 2 means cancel here)."""
        self.print_usage(sys.stderr)
        self.exit(FAILED, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Ask a running Elicitation Gateway an MCP elicitation, print the ElicitResult as JSON.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--schema", metavar="FILE", default="-", help="JSON file to read ('-', the default, reads stdin)"
    )
    parser.add_argument("--message", help="the message shown with the questions (overrides the input's)")
    parser.add_argument(
        "--url", help=f"the gateway (default: $GATEWAY_URL, else {DEFAULT_URL})", default=None
    )
    parser.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="how long the question waits for an answer"
    )
    parser.add_argument(
        "--on-timeout",
        choices=("cancel", "default"),
        help="at the timeout: cancel (the default), or accept the schema's defaults",
    )
    parser.add_argument("--session-id", help="the OpenCode session the question belongs to (ses_...)")
    parser.add_argument("--directory", help="the project directory the question is about")
    parser.add_argument("--token", help="the tool-side bearer token (default: $GATEWAY_TOOL_TOKEN)")
    parser.add_argument(
        "--to",
        action="append",
        metavar="NAME",
        help="a person or group:NAME of the gateway's people file the question is for (repeatable)",
    )
    parser.add_argument(
        "--escalate",
        action="append",
        type=escalate_flag,
        metavar=FLAG_FORM,
        help="if nobody has answered SECONDS after the ask, the question also reaches these people and "
        "group:NAMEs, who are notified (repeatable: one step each)",
    )
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.timeout is not None and not args.timeout > 0:
        return _fail("--timeout must be a positive number of seconds")
    try:
        params = read_params(args.schema, args.message)
    except ValueError as error:
        return _fail(str(error))
    try:
        result = asyncio.run(_ask(args, params))
    except KeyboardInterrupt:  # the question was withdrawn on the way out
        return INTERRUPTED
    except (GatewayError, ValueError) as error:
        return _fail(str(error))
    print(json.dumps(result, ensure_ascii=False, separators=(",", ":")), flush=True)
    return EXIT_CODES[result["action"]]


def read_params(source: str, message: str | None) -> dict[str, Any]:
    """The form params from ``source`` (a file, or ``-`` for stdin), with ``message`` applied."""
    if source == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise ValueError("give --schema FILE, or pipe the JSON on standard input")
        text = sys.stdin.read()
        where = "standard input"
    else:
        try:
            with open(source, encoding="utf-8") as file:
                text = file.read()
        except OSError as error:
            raise ValueError(f"cannot read {source}: {error.strerror or error}") from None
        where = source
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{where} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where} must hold a JSON object")  # noqa: TRY004  (bad input, told as such)
    if "jsonrpc" in data:
        data = data.get("params")
        if not isinstance(data, dict):
            raise ValueError(f"{where}: the JSON-RPC request has no params object")
    if "requestedSchema" not in data:  # a schema alone
        data = {"requestedSchema": data}
    params = {"mode": "form", "message": "", **data}
    if message is not None:
        params["message"] = message
    return params


async def _ask(args: argparse.Namespace, params: dict[str, Any]) -> dict[str, Any]:
    async with GatewayClient(
        args.url, token=args.token, session_id=args.session_id, directory=args.directory
    ) as client:
        result = await client.elicit(
            params, timeout=args.timeout, on_timeout=args.on_timeout, to=args.to, escalate=args.escalate
        )
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return FAILED
