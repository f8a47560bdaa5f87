"""Text at the gateway's edges: what enters is valid Unicode (or refused naming where it is not), what
leaves is valid UTF-8 whatever it holds."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitation_gateway.encoding import (
    InvalidText,
    JsonResponse,
    check_text,
    check_url_text,
    dumps,
    parse_json,
    sse_frame,
    to_utf8,
    valid_text,
)

LONE = ["\ud800", "\udbff", "\udc00", "\udfff"]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b'{"message": "x\\ud800y"}', "message"),
        (b'{"message": "\\uDFFF"}', "message"),
        (
            b'{"requestedSchema": {"properties": {"x": {"enum": ["a", "b", "\\ud83d"]}}}}',
            "requestedSchema.properties.x.enum[2]",
        ),
        (b'{"answers": [["ok"], ["fine", "\\udc00"]]}', "answers[1][1]"),
        (b'{"requestedSchema": {"properties": {"k\\ud800": {}}}}', "requestedSchema.properties"),
        (b'["a", {"b": ["\\ud800"]}]', "[1].b[0]"),
        (b'"\\ud800"', "the text"),
    ],
)
def test_a_lone_surrogate_is_refused_naming_where_it_is(body, where):
    with pytest.raises(InvalidText) as refused:
        parse_json(body)
    assert refused.value.where == where
    assert "lone surrogate" in refused.value.message
    assert refused.value.document == json.loads(body)


def test_the_first_bad_string_in_the_document_is_named():
    with pytest.raises(InvalidText) as refused:
        parse_json(b'{"a": "\\ud800", "b": ["\\ud800"]}')
    assert refused.value.where == "a"


@pytest.mark.parametrize(
    "body",
    [
        b'{"emoji": "\\ud83d\\ude00"}',  # a valid pair is one character
        b'{"text": "\\\\ud800"}',  # an escaped backslash followed by letters
        '{"text": "caf\u00e9 \U0001f600"}'.encode(),
    ],
)
def test_valid_text_passes(body):
    assert parse_json(body) == json.loads(body)


def test_a_body_that_starts_with_a_byte_order_mark_is_refused_saying_so():
    with pytest.raises(ValueError, match="Unexpected UTF-8 BOM"):
        parse_json('\ufeff{"a": 1}'.encode())


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_constants_json_does_not_have_are_refused(constant):
    # Python's json reads them as floats; the gateway's one decoder, made once, refuses them each time.
    for _ in range(2):
        with pytest.raises(ValueError, match=f"{constant.lstrip('-')} is not a JSON value"):
            parse_json(f'{{"minimum": {constant}}}'.encode())


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=20,
    )
)
def test_a_document_parses_as_json_loads_reads_it(document):
    raw = json.dumps(document).encode()
    assert parse_json(raw) == json.loads(raw)


@pytest.mark.parametrize(
    ("body", "offset"),
    [
        (b'{"a": "\xff"}', 7),
        (b'{"a": "\xed\xa0\x80"}', 7),  # a surrogate encoded as if it were a character (CESU-8)
        (b'{"a": "\xc3"}', 7),
    ],
)
def test_bytes_that_are_not_utf8_are_refused_with_their_offset(body, offset):
    with pytest.raises(InvalidText) as refused:
        parse_json(body)
    assert refused.value.where == "the body"
    assert f"offset {offset}" in refused.value.message


def test_deep_documents_are_walked_without_recursion():
    deep: object = "\ud800"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(InvalidText) as refused:
        check_text(deep)
    assert refused.value.where == "[0]" * 5000


@pytest.mark.parametrize(
    ("path", "query", "where"),
    [
        (b"/question", b"directory=%ff%fe", "the query parameter 'directory'"),
        (b"/elicit", b"sessionID=ses%ed%a0%80", "the query parameter 'sessionID'"),
        (b"/elicit", b"a=1&%ff=2", "a query parameter's name"),
        (b"/question/que%ed%a0%80/form", b"", "the path"),
        (b"/question", b"directory=\xff", "the query parameter 'directory'"),
    ],
)
def test_percent_encoded_text_that_is_not_utf8_is_refused(path, query, where):
    with pytest.raises(InvalidText) as refused:
        check_url_text(path, query)
    assert refused.value.where == where


@pytest.mark.parametrize(
    ("path", "query"),
    [
        (b"/question", b""),
        (b"/question", b"directory=%2Fsrv%2Fcaf%C3%A9&x=a+b"),
        (b"/caf%C3%A9", b"a=%F0%9F%98%80"),
    ],
)
def test_percent_encoded_utf8_passes(path, query):
    check_url_text(path, query)


@given(st.text())
def test_every_string_is_written_as_valid_utf8(text):
    written = to_utf8(text)
    decoded = written.decode("utf-8")  # never raises
    if valid_text(text):
        assert decoded == text
    else:
        assert "\ufffd" in decoded


@given(
    st.recursive(
        st.text() | st.integers() | st.booleans() | st.none(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=20,
    )
)
def test_any_parsed_document_is_either_valid_or_named(document):
    try:
        check_text(document)
    except InvalidText:
        with pytest.raises(UnicodeEncodeError):
            json.dumps(document, ensure_ascii=False).encode("utf-8")
    else:
        json.dumps(document, ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("lone", LONE)
def test_responses_and_frames_replace_what_a_store_already_holds(lone):
    body = JsonResponse({"message": f"x{lone}y"}).body
    assert json.loads(body.decode("utf-8")) == {"message": "x\ufffdy"}
    frame = sse_frame(dumps({"message": f"x{lone}y"}), "evt_1")
    assert frame.decode("utf-8") == 'id: evt_1\ndata: {"message":"x\ufffdy"}\n\n'


def test_line_breaks_in_frame_data_cannot_end_the_frame():
    frame = sse_frame("a\r\nevent: forged\rb\nc", "evt_1\nid: x").decode()
    assert frame == "id: evt_1id: x\ndata: a\ndata: event: forged\ndata: b\ndata: c\n\n"
