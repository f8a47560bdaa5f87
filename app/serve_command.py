"""``python -m app [serve]``: run the gateway with flags and ``GATEWAY_*`` settings."""

import argparse
import sys

from pydantic import ValidationError

from app import __version__
from app.settings import Settings


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app",
        description="Elicitation Gateway: MCP elicitations asked as OpenCode questions over SSE.",
        epilog="Every setting can also come from a GATEWAY_* environment variable (see the README). "
        "Other commands: 'python -m app ask --help', 'python -m app answer --help'.",
    )
    parser.add_argument("--host", help="address to listen on (GATEWAY_HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (GATEWAY_PORT, default 4096)")
    parser.add_argument("--store", help="where questions are kept (GATEWAY_STORE, default memory)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = parser.parse_args(argv)

    overrides = {name: value for name, value in vars(args).items() if value is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as error:
        for problem in error.errors():
            name = ".".join(str(part) for part in problem["loc"])
            print(f"invalid setting {name} (GATEWAY_{name.upper()}): {problem['msg']}", file=sys.stderr)
        return 2

    from app.server import serve  # imported here: keeps --help fast

    serve(settings)
    return 0
