"""Which failed handshakes make ``--upstream-era auto`` try the other era: refusals of the protocol
version only, never a crash or an unreachable upstream (it would be started, and said, twice). And which
failed requests are era errors: asked again in 2026-07-28, or named with the flag that helps."""

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
)

from elicitation_gateway.proxy.upstream import input_required_refused, push_refused, version_refused


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


FASTMCP_INPUT_REQUIRED = (
    "Tool 'deliver' returned an InputRequiredResult to request client input, but the multi-round-trip "
    "result type (SEP-2322) only exists at MCP 2026-07-28; this connection negotiated '2025-11-25'. "
    "Use ctx.elicit() for server-initiated input on handshake-era connections."
)


@pytest.mark.parametrize(
    ("error", "refused"),
    [
        (MCPError(INVALID_PARAMS, FASTMCP_INPUT_REQUIRED), True),  # FastMCP 4
        (MCPError(INTERNAL_ERROR, "Handler returned an invalid result"), True),  # the mcp package
        (MCPError(INVALID_PARAMS, "Unknown tool: 'deliver'"), False),
        (MCPError(INTERNAL_ERROR, "Handler returned an invalid result, twice"), False),
        (MCPError(INVALID_REQUEST, FASTMCP_INPUT_REQUIRED), False),
        (RuntimeError(FASTMCP_INPUT_REQUIRED), False),
    ],
)
def test_an_input_required_result_refused_on_the_older_era_is_told_by_its_words(
    error: BaseException, refused: bool
):
    assert input_required_refused(error) is refused


def test_a_push_style_question_refused_on_the_newer_era_is_told_by_its_words():
    assert push_refused("elicitation via server-initiated requests is unavailable on 2026-07-28 connections.")
    assert push_refused(
        "Cannot send 'elicitation/create': this transport context has no back-channel for "
        "server-initiated requests."
    )
    assert not push_refused("refused: no stock")
