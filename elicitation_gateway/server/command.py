"""``python -m elicitation_gateway [serve]``: run the gateway with flags and ``GATEWAY_*`` settings."""

import argparse
import importlib.util
import sys

from pydantic import ValidationError

from elicitation_gateway import __version__
from elicitation_gateway.settings import Settings


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m elicitation_gateway",
        description="Elicitation Gateway: MCP elicitations asked as OpenCode questions over SSE.",
        epilog="Every setting can also come from a GATEWAY_* environment variable (see the README). "
        "Other commands: 'elicitation-gateway ask --help', 'elicitation-gateway answer --help', "
        "'elicitation-gateway proxy --help'.",
    )
    parser.add_argument("--host", help="address to listen on (GATEWAY_HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (GATEWAY_PORT, default 4096)")
    parser.add_argument("--store", help="where questions are kept (GATEWAY_STORE, default memory)")
    parser.add_argument(
        "--opencode-url", help="bridge a running `opencode serve` at this URL (GATEWAY_OPENCODE_URL)"
    )
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

    is_redis = settings.store.startswith(("redis://", "rediss://", "unix://"))
    if is_redis and importlib.util.find_spec("redis") is None:
        print(
            "the Redis store needs the redis package: pip install 'elicitation-gateway[redis]'",
            file=sys.stderr,
        )
        return 2

    if settings.notify and importlib.util.find_spec("apprise") is None:
        print(
            "notifications (GATEWAY_NOTIFY) need the apprise package: "
            "pip install 'elicitation-gateway[notify]'",
            file=sys.stderr,
        )
        return 2

    if settings.notify:
        from elicitation_gateway.notify import unusable_urls

        unusable = unusable_urls(settings.notify, settings.notify_timeout)
        for position in unusable:  # by position: a URL may hold a token
            print(
                f"invalid setting notify (GATEWAY_NOTIFY): URL number {position} is not one Apprise "
                "understands (https://github.com/caronc/apprise/wiki)",
                file=sys.stderr,
            )
        if unusable:
            return 2

    from elicitation_gateway.server.runner import serve  # imported here: keeps --help fast

    serve(settings)
    return 0
