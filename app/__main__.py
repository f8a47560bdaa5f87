"""``python -m app``: run the gateway (``serve``, the default), or one of its client commands.

Each command lives in its own module with a ``main(argv) -> int``:

- ``serve`` (default): :mod:`app.serve_command`
- ``ask``: post an elicitation from a shell script (:mod:`app.ask`)
- ``answer``: answer questions in the terminal (:mod:`app.answer`)
"""

import importlib
import sys

COMMANDS = {"serve": "app.serve_command", "ask": "app.ask", "answer": "app.answer"}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    command = "serve"
    if args and args[0] in COMMANDS:
        command, args = args[0], args[1:]
    module = importlib.import_module(COMMANDS[command])
    return module.main(args)


if __name__ == "__main__":
    sys.exit(main())
