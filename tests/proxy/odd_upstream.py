"""Upstreams that misbehave at the start, for the proxy's connection tests: plain scripts that speak
JSON-RPC by hand (no ``mcp`` server), each start noted in a file.

``python -m tests.proxy.odd_upstream MODE STARTS_FILE``, MODE one of:

- ``crash``: prints a traceback on stderr and exits 1 at once;
- ``silent``: reads stdin until it closes and never answers (``initialize`` included);
- ``modern-only``: refuses the ``initialize`` handshake with the unsupported-protocol-version error,
  as a server of the 2026-07-28 era only does, and answers ``server/discover``.
"""

import json
import os
import sys

CRASH_OUTPUT = "Traceback (most recent call last):\n  odd upstream: RuntimeError: the database is locked"
MODERN = "2026-07-28"


def answer(message: dict, result: dict | None = None, error: dict | None = None) -> None:
    reply = {"jsonrpc": "2.0", "id": message["id"]}
    reply.update({"error": error} if error is not None else {"result": result})
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


def modern_only() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message.get("method")
        if method == "initialize":
            requested = message["params"]["protocolVersion"]
            data = {"supported": [MODERN], "requested": requested}
            answer(message, error={"code": -32022, "message": "Unsupported protocol version", "data": data})
        elif method == "server/discover":
            answer(
                message,
                {
                    "supportedVersions": [MODERN],
                    "capabilities": {"tools": {}},
                    "resultType": "complete",
                },
            )
        elif method == "tools/list":
            answer(message, {"tools": [], "resultType": "complete"})
        else:
            answer(message, error={"code": -32601, "message": f"no method {method}"})


def main() -> None:
    mode, starts = sys.argv[1], sys.argv[2]
    with open(starts, "a", encoding="utf-8") as noted:
        noted.write(f"{os.getpid()}\n")
    if mode == "crash":
        print(CRASH_OUTPUT, file=sys.stderr, flush=True)
        sys.exit(1)
    if mode == "silent":
        for _ in sys.stdin:
            pass
        return
    modern_only()


if __name__ == "__main__":
    main()
