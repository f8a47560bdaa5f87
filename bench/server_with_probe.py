"""``python -m bench.server_with_probe [serve flags]``: the gateway as ``elicitation-gateway`` runs it, plus
the loop-lag probe (:mod:`bench.probe`) and a raised open-file limit.

The probe rides on a subclass of the gateway's own uvicorn server; nothing else about the service
changes, so what is measured is what ``python -m elicitation_gateway`` serves.
"""

import sys

from bench.probe import probed, raise_open_file_limit


def main(argv: list[str]) -> int:
    raise_open_file_limit()
    from elicitation_gateway.server import command, runner

    runner.GatewayServer = probed(runner.GatewayServer)  # type: ignore[misc]
    return command.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
