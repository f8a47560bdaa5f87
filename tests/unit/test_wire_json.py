"""A request's JSON is spliced from its questions' own encodings: byte for byte what ``wire()`` gives."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from elicitation_gateway.models import QuestionInfo, QuestionOption, QuestionRequest, QuestionTool

text = st.text(max_size=20)
questions = st.builds(
    QuestionInfo,
    question=text,
    header=text,
    options=st.lists(st.builds(QuestionOption, label=text, description=text), max_size=3),
    multiple=st.sampled_from([True, None]),
    custom=st.sampled_from([False, None]),
)
requests = st.builds(
    QuestionRequest,
    id=text,
    sessionID=text,
    questions=st.lists(questions, max_size=3),
    tool=st.one_of(st.none(), st.builds(QuestionTool, messageID=text, callID=text)),
)


@settings(max_examples=500)
@given(requests)
def test_wire_json_is_the_compact_encoding_of_wire(request):
    expected = json.dumps(request.wire(), ensure_ascii=False, separators=(",", ":"))
    assert request.wire_json == expected
    for question in request.questions:
        question.shared()
    again = QuestionRequest.new(request.id, request.sessionID, request.questions, request.tool)
    assert again.wire_json == expected


def test_a_shared_question_keeps_its_encoding_and_stays_equal():
    question = QuestionInfo(question="Model?", header="Model", options=[QuestionOption(label="a")])
    fresh = QuestionInfo(question="Model?", header="Model", options=[QuestionOption(label="a")])
    first = QuestionRequest(id="que_1", sessionID="ses_1", questions=[question.shared()])
    second = QuestionRequest.new("que_2", "ses_1", [fresh], None)
    assert first.wire_json.replace("que_1", "que_2") == second.wire_json
    assert question == fresh  # the kept encoding is not part of the question
