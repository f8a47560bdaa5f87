"""``python -m elicitation_gateway``: run the gateway (``serve``, the default), or one of its client commands.

Each command lives in its own module with a ``main(argv) -> int``:

- ``serve`` (default): :mod:`elicitation_gateway.server.command`
- ``ask``: post an elicitation from a shell script (:mod:`elicitation_gateway.ask`)
- ``answer``: answer questions in the terminal (:mod:`elicitation_gateway.answerer.command`)
- ``proxy``: put an MCP server behind the gateway (:mod:`elicitation_gateway.proxy.command`)
- ``hash-password``: hash a password for the people file (:mod:`elicitation_gateway.hash_password`)
- ``audit``: export the audit trail, verify an export (:mod:`elicitation_gateway.audit_command`)
"""

import importlib
import sys

COMMANDS = {
    "serve": "elicitation_gateway.server.command",
    "ask": "elicitation_gateway.ask",
    "answer": "elicitation_gateway.answerer.command",
    "proxy": "elicitation_gateway.proxy.command",
    "hash-password": "elicitation_gateway.hash_password",
    "audit": "elicitation_gateway.audit_command",
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    command = "serve"
    if args and args[0] in COMMANDS:
        command, args = args[0], args[1:]
    module = importlib.import_module(COMMANDS[command])
    return module.main(args)


if __name__ == "__main__":
    sys.exit(main())
