"""The answerer side, in OpenCode's shapes: list, reply, reject."""

import logging
from collections.abc import AsyncIterator

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from elicitation_gateway.conversion.answers import AnswerError
from elicitation_gateway.display import safe
from elicitation_gateway.encoding import json_bytes, to_utf8
from elicitation_gateway.gateway import CANCEL, Gateway
from elicitation_gateway.records import Record
from elicitation_gateway.server.bodies import FormField, QuestionForm, QuestionReject, json_response
from elicitation_gateway.server.errors import PayloadError, bad_request
from elicitation_gateway.server.routes.parsing import (
    BodyTooLarge,
    InvalidJson,
    directory_of,
    parse_answers,
    parse_json,
    read_body,
    via_of,
    viewer_of,
)

logger = logging.getLogger(__name__)


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


async def list_questions(request: Request) -> Response:
    """Written whole when small; a long listing (pending questions may hold many megabytes) in chunks,
    each encoded between two writes, so that it never holds the loop or doubles in memory at once."""
    return listing(await _gateway(request).pending_listing(directory_of(request), viewer_of(request)))


def listing(items: list[str]) -> Response:
    """A JSON array of ``items``, each already encoded: spliced, never decoded and encoded again."""
    if sum(len(item) for item in items) <= LISTING_CHUNK:
        return Response(to_utf8("[" + ",".join(items) + "]"), media_type="application/json")
    return StreamingResponse(_listing_chunks(items), media_type="application/json")


LISTING_CHUNK = 256 * 1024


async def _listing_chunks(items: list[str]) -> AsyncIterator[bytes]:
    chunk: list[str] = ["["]
    size = 0
    for index, item in enumerate(items):
        chunk.append(("," if index else "") + item)
        size += len(item)
        if size >= LISTING_CHUNK:
            yield to_utf8("".join(chunk))
            chunk, size = [], 0
    chunk.append("]")
    yield to_utf8("".join(chunk))


async def reply(request: Request) -> Response:
    gateway = _gateway(request)
    try:
        request_id = _request_id(request)
        answers = parse_answers(await _json_body(request, gateway), gateway.settings.max_text_length)
        await gateway.reply(request_id, answers, viewer_of(request), via=via_of(request, "opencode"))
    except PayloadError as error:
        _log_refusal(request, error.message)
        return error.response()
    except AnswerError as error:
        _log_refusal(request, error.message)
        return bad_request(error.message, "Payload", error.issues)
    return _done()


TRUE = json_bytes(True)


def _done() -> Response:
    """OpenCode's answer to a reply or rejection taken: ``true``, its JSON written once."""
    return Response(TRUE, media_type="application/json")


def _log_refusal(request: Request, reason: str) -> None:
    """An answerer may show nothing of a refused reply (the OpenCode TUI does not): the log says why,
    on one line made safe to show (the reason quotes option labels and answers)."""
    logger.info("reply to %s refused: %s", request.path_params.get("requestID"), safe(reason, oneline=True))


async def reject(request: Request) -> Response:
    gateway = _gateway(request)
    try:
        request_id = _request_id(request)
        body = await _json_body(request, gateway, optional=True)
        action = _reject_action(body)
        await gateway.reject(request_id, action, viewer_of(request), via=via_of(request, "opencode"))
    except PayloadError as error:
        return error.response()
    return _done()


async def question_form(request: Request) -> Response:
    """The gateway's own extension: what each question accepts, for answerers that render forms."""
    try:
        request_id = _request_id(request)
        record = await _gateway(request).pending_record(request_id, viewer_of(request))
    except PayloadError as error:
        return error.response()
    return json_response(describe_form(record))


def _request_id(request: Request) -> str:
    request_id = request.path_params["requestID"]
    if not request_id.startswith("que"):
        raise PayloadError(f"requestID must start with 'que': {request_id!r}", kind="Params")
    return request_id


async def _json_body(request: Request, gateway: Gateway, *, optional: bool = False) -> object:
    try:
        raw = await read_body(request, gateway.settings.max_body_size)
        if optional and not raw.strip():
            return None
        return parse_json(raw)
    except BodyTooLarge:
        limit = gateway.settings.max_body_size
        raise PayloadError(f"the body is larger than the limit of {limit} bytes", status=413) from None
    except InvalidJson as error:
        raise PayloadError(error.reason) from None


def _reject_action(body: object) -> str:
    if body is None:
        return CANCEL
    if not isinstance(body, dict):
        raise PayloadError('the body must be empty or a JSON object like {"action": "decline"}')
    try:
        return QuestionReject.model_validate(body).action
    except ValidationError:
        raise PayloadError(f'"action" must be "decline" or "cancel", not {body.get("action")!r}') from None


def describe_form(record: Record) -> QuestionForm:
    """A pending request with what each question accepts: kind, limits, default, option values."""
    form = record.form
    questions = zip(form.fields, record.request.questions, form.texts, strict=True)
    return QuestionForm(
        id=record.id,
        sessionID=record.request.sessionID,
        message=record.message,
        asker=record.asker,
        to=record.request.to,
        legacy=form.legacy,
        confirm=form.confirm,
        expiresAt=record.expires_at,
        onTimeout=record.on_timeout,
        fields=[FormField.of(field, question, text) for field, question, text in questions],
    )
