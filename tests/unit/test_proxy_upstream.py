"""Which failed handshakes make ``--upstream-era auto`` try the other era: refusals of the protocol
version only, never a crash or an unreachable upstream (it would be started, and said, twice)."""

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
)

from elicitation_gateway.proxy.upstream import version_refused


@pytest.mark.parametrize(
    "error",
    [
        MCPError(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", {"supported": ["2026-07-28"]}),
        MCPError(METHOD_NOT_FOUND, "Method not found: initialize"),
        RuntimeError("Unsupported protocol version from the server: 2099-01-01"),
        ExceptionGroup(
            "task group", [ExceptionGroup("inner", [MCPError(UNSUPPORTED_PROTOCOL_VERSION, "no")])]
        ),
    ],
)
def test_a_version_refusal_is_one(error: BaseException):
    assert version_refused(error)


@pytest.mark.parametrize(
    "error",
    [
        MCPError(CONNECTION_CLOSED, "Connection closed"),  # the upstream exited
        ExceptionGroup("task group", [ExceptionGroup("inner", [MCPError(CONNECTION_CLOSED, "closed")])]),
        MCPError(INTERNAL_ERROR, "the upstream broke"),
        MCPError(INVALID_PARAMS, "bad capabilities"),
        FileNotFoundError(2, "No such file or directory"),  # the command does not exist
        httpx2.ConnectError("Connection refused"),
        RuntimeError("something else"),
        TimeoutError(),
        ExceptionGroup("two", [MCPError(UNSUPPORTED_PROTOCOL_VERSION, "no"), OSError("and a crash")]),
    ],
)
def test_anything_else_is_a_failure(error: BaseException):
    assert not version_refused(error)
