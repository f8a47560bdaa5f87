"""``elicitation-gateway [serve]``: run the gateway with flags and ``GATEWAY_*`` settings."""

import argparse
import importlib.util
import sys

from pydantic import ValidationError

from elicitation_gateway import __version__
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores.schemes import scheme_of

PROG = "elicitation-gateway"  # the console script, also when run as ``python -m elicitation_gateway``
OTHER_COMMANDS = ("ask", "answer", "proxy", "hash-password", "audit")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Elicitation Gateway: MCP elicitations asked as OpenCode questions over SSE.",
        epilog="Every setting can also come from a GATEWAY_* environment variable; docs/settings.md "
        "lists them all. Other commands: "
        + ", ".join(f"'{PROG} {command} --help'" for command in OTHER_COMMANDS)
        + ".",
    )
    parser.add_argument("--host", help="address to listen on (GATEWAY_HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (GATEWAY_PORT, default 4096)")
    parser.add_argument("--store", help="where questions are kept (GATEWAY_STORE, default memory)")
    parser.add_argument(
        "--opencode-url", help="bridge a running `opencode serve` at this URL (GATEWAY_OPENCODE_URL)"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # The usage line names the other commands too: ``serve`` is only the default.
    serve_usage = parser.format_usage().removeprefix("usage: ").rstrip()
    parser.usage = (
        serve_usage.replace(PROG, f"{PROG} [serve]", 1)
        + f"\n       {PROG} {{{','.join(OTHER_COMMANDS)}}} [--help] ..."
    )
    args = parser.parse_args(argv)

    overrides = {name: value for name, value in vars(args).items() if value is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as error:
        for problem in error.errors():
            name = ".".join(str(part) for part in problem["loc"])
            print(
                f"{PROG}: invalid setting {name} (GATEWAY_{name.upper()}): {problem['msg']}", file=sys.stderr
            )
        return 2

    scheme = scheme_of(settings.store)
    if scheme.needs is not None and importlib.util.find_spec(scheme.needs) is None:
        print(
            f"{PROG}: the {scheme.title} store needs the {scheme.needs} package: "
            f"pip install 'elicitation-gateway[{scheme.name}]'",
            file=sys.stderr,
        )
        return 2

    if settings.notify and importlib.util.find_spec("apprise") is None:
        print(
            f"{PROG}: notifications (GATEWAY_NOTIFY) need the apprise package: "
            "pip install 'elicitation-gateway[notify]'",
            file=sys.stderr,
        )
        return 2

    if settings.people is not None:
        from elicitation_gateway.people import PeopleError, load_people

        try:
            load_people(settings.people)
        except PeopleError as error:
            print(f"{PROG}: invalid setting people (GATEWAY_PEOPLE): {error}", file=sys.stderr)
            return 2

    if settings.notify:
        from elicitation_gateway.notify import unusable_urls

        unusable = unusable_urls(settings.notify, settings.notify_timeout)
        for position in unusable:  # by position: a URL may hold a token
            print(
                f"{PROG}: invalid setting notify (GATEWAY_NOTIFY): URL number {position} is not one Apprise "
                "understands (https://github.com/caronc/apprise/wiki)",
                file=sys.stderr,
            )
        if unusable:
            return 2

    from elicitation_gateway.server.runner import AddressUnusable, serve  # here: keeps --help fast
    from elicitation_gateway.server.uvicorn_internals import UvicornMismatch

    try:
        serve(settings)
    except (AddressUnusable, UvicornMismatch) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1
    return 0
