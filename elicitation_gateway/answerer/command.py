"""``elicitation-gateway answer``: answer a running gateway's questions in the terminal.

The gateway's address comes from ``--url`` (else ``GATEWAY_URL``, else ``http://127.0.0.1:4096``); its
answerer credentials from ``--username``/``--password`` (else ``OPENCODE_SERVER_USERNAME`` and
``OPENCODE_SERVER_PASSWORD``, as the server reads them). ``--directory`` (else
``GATEWAY_ANSWER_DIRECTORY``) keeps one directory's questions, such as a proxied MCP server's
``mcp:NAME``, and those that name none. The gateway is checked once before the screen opens, so a wrong
address or password is a clear message rather than an empty screen.
"""

import argparse
import asyncio
import os
import sys
from urllib.parse import urlsplit

import httpx

PROG = "elicitation-gateway answer"
DEFAULT_URL = "http://127.0.0.1:4096"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    url = args.url.strip().rstrip("/")
    problem = _url_problem(url)
    if problem:
        parser.error(problem)
    directory = (args.directory or "").strip() or None
    if directory is not None and not _is_text(directory):
        parser.error(f"--directory {directory!r} is not valid text (not UTF-8)")
    try:
        from elicitation_gateway.answerer.app import AnswerApp
        from elicitation_gateway.answerer.connection import basic_auth
    except ImportError as missing:
        print(
            f"{PROG}: the terminal answerer needs the 'answer' extra ({missing}); "
            "install it with: pip install 'elicitation-gateway[answer]'",
            file=sys.stderr,
        )
        return 1
    auth = basic_auth(args.username, args.password)
    problem = asyncio.run(_check_gateway(url, auth, directory))
    if problem:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return 1
    app = AnswerApp(url, auth, directory=directory)
    app.run()
    return app.return_code or 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Answer a running gateway's questions in the terminal, one request at a time.",
        epilog="Keys: Tab/←/→ question, ↑/↓ option, 1–9 pick, Enter choose (Confirm tab: send), "
        "Esc dismiss, Ctrl+D (or d on Confirm) decline, Ctrl+Q quit.",
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("GATEWAY_URL") or DEFAULT_URL,
        help=f"the gateway's address (default: $GATEWAY_URL, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--username",
        default=os.environ.get("OPENCODE_SERVER_USERNAME") or "opencode",
        help="HTTP Basic user name (default: $OPENCODE_SERVER_USERNAME, else opencode)",
    )
    parser.add_argument(
        "--password",
        default=os.environ.get("OPENCODE_SERVER_PASSWORD") or None,
        help="HTTP Basic password, sent only when set (default: $OPENCODE_SERVER_PASSWORD)",
    )
    parser.add_argument(
        "--directory",
        metavar="DIR",
        default=os.environ.get("GATEWAY_ANSWER_DIRECTORY") or None,
        help="show only this directory's questions (a project's path, or mcp:NAME for a proxied MCP "
        "server) and those that name none (default: $GATEWAY_ANSWER_DIRECTORY, else every question)",
    )
    return parser


def _url_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as error:
        return f"--url {url!r} is not a valid URL: {error}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--url must be an http:// or https:// address like {DEFAULT_URL}, not {url!r}"
    return None


def _is_text(value: str) -> bool:
    """Arguments that are not UTF-8 reach Python as lone surrogates, which no URL can carry."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


async def _check_gateway(url: str, auth: httpx.Auth | None, directory: str | None = None) -> str | None:
    """``None`` when ``GET /question`` answers as a gateway does, else what is wrong, in a sentence."""
    try:
        async with httpx.AsyncClient(base_url=url, auth=auth, timeout=5) as http:
            response = await http.get("/question", params={"directory": directory} if directory else {})
    except httpx.HTTPError as error:
        from elicitation_gateway.answerer.connection import describe_error

        return f"cannot reach the gateway at {url}: {describe_error(error)}"
    if response.status_code == 401 and auth is not None:
        return f"the gateway at {url} refused these credentials (HTTP 401)"
    if response.status_code == 401:
        return (
            f"the gateway at {url} wants the answerer's credentials: "
            "set OPENCODE_SERVER_PASSWORD (and OPENCODE_SERVER_USERNAME) or pass --password"
        )
    try:
        listed = response.json()
    except ValueError:
        listed = None
    if response.status_code != 200 or not isinstance(listed, list):
        return f"{url} does not answer GET /question as a gateway does (HTTP {response.status_code})"
    return None


if __name__ == "__main__":
    sys.exit(main())
