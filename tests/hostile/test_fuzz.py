"""Both request bodies fuzzed with strings drawn from all of Unicode, lone surrogates included, against a
real gateway process: never a 5xx, never a listing or an event stream that breaks, never a stall."""

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.conftest import STALL_LIMIT_MS

ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=40)
"""Every code point, surrogates included: sent as JSON ``\\uXXXX`` escapes."""
KEYS = st.one_of(ANY_TEXT, st.sampled_from(["title", "description", "type", "enum", "default", "pattern"]))
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)
PROPERTY = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer", "number", "boolean"])},
    optional={
        "title": ANY_TEXT,
        "description": ANY_TEXT,
        "enum": st.lists(ANY_TEXT, min_size=1, max_size=5),
        "default": JSON_VALUES,
        "pattern": ANY_TEXT,
        "minimum": st.integers(-5, 5),
        "maximum": st.integers(-5, 5),
        "format": st.sampled_from(["email", "uri", "date", "date-time", "password"]),
        "x-anything": JSON_VALUES,
    },
)
ASKS = st.fixed_dictionaries(
    {
        "mode": st.just("form"),
        "message": ANY_TEXT,
        "requestedSchema": st.fixed_dictionaries(
            {
                "type": st.just("object"),
                "properties": st.dictionaries(ANY_TEXT, PROPERTY, min_size=1, max_size=4),
            }
        ),
    }
)
ANSWERS = st.one_of(
    st.lists(st.lists(ANY_TEXT, max_size=3), max_size=5),
    JSON_VALUES,
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOOL_REFUSALS = {400, 413, 422, 429}


@pytest.fixture(scope="module")
def http(gateway) -> Any:
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        yield client


def post_json(http: httpx.Client, path: str, body: Any) -> httpx.Response:
    # ensure_ascii: a lone surrogate goes out as its escape, as any JSON writer may send it.
    return http.post(path, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


def assert_listing_works(http: httpx.Client) -> list[dict[str, Any]]:
    listing = http.get("/question")
    assert listing.status_code == 200
    listing.content.decode("utf-8")  # valid UTF-8, whatever was sent
    return listing.json()


def test_asks_fuzzed_with_all_of_unicode(gateway, probe, http):
    mark = probe.mark()

    @FUZZ
    @given(body=ASKS)
    def ask(body: dict[str, Any]) -> None:
        response = post_json(http, "/elicitations", body)
        assert response.status_code == 201 or response.status_code in TOOL_REFUSALS, response.text[:300]
        response.content.decode("utf-8")
        if response.status_code == 201:
            request_id = response.json()["id"]
            assert request_id in [request["id"] for request in assert_listing_works(http)]
            form = http.get(f"/question/{request_id}/form")
            assert form.status_code == 200
            form.content.decode("utf-8")
            assert http.delete(f"/elicitations/{request_id}").status_code == 200
        else:
            assert assert_listing_works(http) == []

    ask()
    assert probe.worst_since(mark) < STALL_LIMIT_MS


def test_replies_fuzzed_with_all_of_unicode(gateway, probe, http):
    schema = {
        "type": "object",
        "properties": {
            "pick": {"type": "string", "enum": ["a", "b"]},
            "many": {"type": "array", "items": {"enum": ["x", "y"]}},
            "count": {"type": "integer", "minimum": 0},
            "ok": {"type": "boolean"},
            "code": {"type": "string", "pattern": "^(a+)+$", "maxLength": 50},
            "when": {"type": "string", "format": "date-time"},
            "note": {"type": "string"},
        },
    }
    mark = probe.mark()

    @FUZZ
    @given(answers=ANSWERS)
    def answer(answers: Any) -> None:
        created = post_json(http, "/elicitations", {"message": "Fuzz", "requestedSchema": schema})
        assert created.status_code == 201, created.text
        request_id = created.json()["id"]
        response = post_json(http, f"/question/{request_id}/reply", {"answers": answers})
        assert response.status_code in (200, 400), response.text[:300]
        response.content.decode("utf-8")
        if response.status_code == 200:
            result = http.get(f"/elicitations/{request_id}").json()["result"]
            assert result["action"] == "accept"
        else:
            assert request_id in [request["id"] for request in assert_listing_works(http)]
            assert http.delete(f"/elicitations/{request_id}").status_code == 200

    answer()
    assert probe.worst_since(mark) < STALL_LIMIT_MS
