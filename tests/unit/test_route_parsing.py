"""What the routes read of a request, against what Starlette would read of it."""

from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import QueryParams
from starlette.requests import Request

from elicitation_gateway.server.routes.parsing import query_values

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
