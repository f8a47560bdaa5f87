"""``multipleOf`` as the tool's validator computes it: ajv's ``value / step === parseInt(value / step)``,
evaluated by Node on the same numbers; and the default of a property is held to it too."""

import json
import subprocess
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elicitation_gateway.conversion.answers import AnswerError, answers_to_content
from elicitation_gateway.conversion.fields import is_multiple
from elicitation_gateway.conversion.schema import build_form
from tests.unit.test_patterns import node_binary

AJV_RULE = (
    "const pairs = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
    "const fits = ([v, m]) => { const q = v / m; return q === parseInt(q); };"
    "process.stdout.write(JSON.stringify(pairs.map(fits)));"
)


def in_ajv(pairs: list[tuple[float, float]]) -> list[bool]:
    done = subprocess.run(
        [node_binary(), "-e", AJV_RULE], input=json.dumps(pairs), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


STEPS = [0.1, 0.25, 0.5, 0.01, 1, 2, 3, 5, 0.3, 1e-7, 2.5, 7, 1e20, 1e-300]
decimals = st.decimals(min_value=-10_000, max_value=10_000, places=3, allow_nan=False).map(float)
numbers = st.one_of(decimals, st.integers(-(10**6), 10**6), st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=10, deadline=None)
@given(st.lists(st.tuples(numbers, st.one_of(st.sampled_from(STEPS), st.floats(1e-9, 1e9))), min_size=200))
def test_a_multiple_is_what_ajv_takes_for_one(pairs):
    assert [is_multiple(value, step) for value, step in pairs] == in_ajv(pairs)


@pytest.mark.parametrize(
    ("value", "step", "fits"),
    [
        (10, 5, True),
        (12, 5, False),
        (0.75, 0.25, True),
        (0.3, 0.1, False),  # 0.3 / 0.1 is 2.9999999999999996: ajv and jsonschema refuse it
        (0.2, 0.1, True),
        (-15, 5, True),
        (0, 0.7, True),
        (10**400, 3, False),
        (3 * 10**400, 3, True),  # whole numbers are divided exactly
        (1e22, 1, False),  # 1e22 is written 1e+22 in JavaScript: parseInt gives 1
    ],
)
def test_multiples(value: float, step: float, fits: bool) -> None:
    assert is_multiple(value, step) is fits


def content(prop: dict[str, Any], answer: str) -> Any:
    return answers_to_content(build_form({"type": "object", "properties": {"x": prop}}), [[answer]])["x"]


def test_a_multiple_in_decimal_that_is_not_one_in_floating_point_is_explained() -> None:
    with pytest.raises(AnswerError) as refused:
        content({"type": "number", "multipleOf": 0.1}, "0.3")
    assert "0.3 / 0.1 = 2.9999999999999996 in floating point" in refused.value.message
    assert content({"type": "number", "multipleOf": 0.1}, "0.2") == 0.2


def test_a_default_that_is_not_a_multiple_is_ignored() -> None:
    form = build_form(
        {"type": "object", "properties": {"x": {"type": "integer", "multipleOf": 5, "default": 7}}}
    )
    assert not form.fields[0].has_default
    form = build_form(
        {"type": "object", "properties": {"x": {"type": "integer", "multipleOf": 5, "default": 10}}}
    )
    assert form.fields[0].default == 10
    assert form.questions[0].question == "X (a whole number, a multiple of 5; default: 10)"
