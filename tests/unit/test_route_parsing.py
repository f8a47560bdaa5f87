"""What the routes read of a request, against what Starlette would read of it."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import QueryParams
from starlette.requests import ClientDisconnect, Request

from elicitation_gateway.server.routes.parsing import BodyTooLarge, query_values, read_body

QUERY_BYTES = st.lists(
    st.sampled_from([b"a", b"b", b"=", b"&", b"%", b"+", b"%2", b"%41", b"\xff", b"\xc3\xa9", b" "])
)


def _request(query: bytes) -> Request:
    return Request(
        {"type": "http", "method": "POST", "path": "/elicit", "query_string": query, "headers": []}
    )


@given(QUERY_BYTES.map(b"".join))
def test_the_query_reads_as_starlettes_query_params(query):
    """The last value of each name, empty values and names without ``=`` kept, escapes decoded."""
    expected = QueryParams(query)
    assert dict(query_values(_request(query))) == {name: expected[name] for name in expected}


def test_a_query_without_escapes_is_split_without_parse_qsl():
    values = query_values(_request(b"callID=t1&timeout=20&&asker&callID=t2&x=a=b"))
    assert values == {"callID": "t2", "timeout": "20", "asker": "", "x": "a=b"}
    assert isinstance(values, dict)


def _posting(*messages: dict, headers: list | None = None) -> Request:
    sent = iter(messages)

    async def receive() -> dict:
        return next(sent)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/elicit",
        "query_string": b"",
        "headers": headers or [],
    }
    return Request(scope, receive)


async def test_a_body_is_read_whole_from_its_messages():
    one = _posting({"type": "http.request", "body": b'{"a":1}'})
    assert await read_body(one, 100) == b'{"a":1}'
    parts = [{"type": "http.request", "body": part, "more_body": True} for part in (b'{"a"', b"", b":1")]
    several = _posting(*parts, {"type": "http.request", "body": b"}"})
    assert await read_body(several, 100) == b'{"a":1}'
    assert await read_body(_posting({"type": "http.request"}), 100) == b""


async def test_a_body_over_the_limit_is_refused_as_it_arrives_or_as_declared():
    parts = [{"type": "http.request", "body": b"x" * 60, "more_body": True}] * 2
    with pytest.raises(BodyTooLarge):
        await read_body(_posting(*parts), 100)  # the second message is over: no third is read
    declared = _posting({"type": "http.request", "body": b""}, headers=[(b"content-length", b"101")])
    with pytest.raises(BodyTooLarge):
        await read_body(declared, 100)


async def test_a_client_that_leaves_during_its_body_is_a_disconnect():
    leaving = _posting({"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"})
    with pytest.raises(ClientDisconnect):
        await read_body(leaving, 100)
