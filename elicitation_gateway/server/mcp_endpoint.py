"""The gateway as an MCP server: a ``question`` tool over Streamable HTTP at ``/mcp``.

The tool takes the input of OpenCode's own question tool, so an agent that knows that tool knows
this one. Its questions become a form directly (:mod:`.conversion.questions`: the same checks and
form as a ``requestedSchema`` of one optional property per question) and are asked through the same
pipeline as ``POST /elicit`` (:meth:`.Gateway.ask`, then the record's result): answerers see one
``question.asked`` and answer it as any other. ``?sessionID=`` and ``?directory=`` on the ``/mcp``
URL (or the ``x-opencode-directory`` header) say whose questions they are.
"""

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, field_validator
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicitation_gateway import __version__
from elicitation_gateway.conversion.questions import Questions
from elicitation_gateway.escalation import parsed_escalate
from elicitation_gateway.gateway import (
    CANCEL,
    AskOptions,
    Caller,
    Gateway,
    TooManySubscribers,
    WaitStatus,
    normalize_directory,
    valid_session_id,
)
from elicitation_gateway.people import parsed_to
from elicitation_gateway.server.errors import jsonrpc_error
from elicitation_gateway.server.mcp_server import UnknownNamesRefused
from elicitation_gateway.server.refusals import REFUSED, refused
from elicitation_gateway.server.routes.parsing import IDEMPOTENCY_KEY
from elicitation_gateway.settings import Settings

PATH = "/mcp"

DESCRIPTION = """Ask the person watching the Elicitation Gateway one or more questions, and wait for \
the answers. Use it to gather preferences, clarify ambiguous instructions, or get decisions on choices \
as you work. Each question has a very short header and the complete question; with options, the \
person chooses one of them (or several, with multiple: true), named by label; without options, the \
person types the answer. The result lists one answer per question, in order."""


class QuestionOptionInput(BaseModel):
    label: str = Field(min_length=1, description="Display text (1-5 words, concise)")
    description: str = Field("", description="Explanation of choice")


class QuestionInput(BaseModel):
    question: str = Field(min_length=1, description="Complete question")
    header: str = Field(min_length=1, description="Very short label (max 30 chars)")
    options: list[QuestionOptionInput] = Field(
        default_factory=list, description="Available choices; none for a free-text answer"
    )
    multiple: bool = Field(False, description="Allow selecting multiple choices")

    @field_validator("options")
    @classmethod
    def _distinct_labels(cls, options: list[QuestionOptionInput]) -> list[QuestionOptionInput]:
        """Answers name options by label, so two options must never share one."""
        seen: set[str] = set()
        for option in options:
            if option.label in seen:
                raise ValueError(f"the option label {option.label!r} is given twice; labels must differ")
            seen.add(option.label)
        return options


class EscalationStepInput(BaseModel):
    after: float = Field(
        description="Seconds after the ask; if nobody has answered by then, the step applies"
    )
    to: list[str] = Field(description="Whom the question then also reaches: names and group:NAME")


class QuestionAnswers(BaseModel):
    """What the tool returns as structured content."""

    action: Literal["accept", "decline", "cancel"] = Field(
        description="accept: the person answered; decline: the person refused; cancel: dismissed or timed out"
    )
    answers: list[list[str]] = Field(
        description="One list per question, in order: the chosen labels, or the typed text; [] if unanswered"
    )


def answers_of(count: int, result: dict[str, Any]) -> list[list[str]]:
    """The answers, one list per question, from the content of an accepted result."""
    content = result.get("content") or {}
    answers: list[list[str]] = []
    for index in range(count):
        value = content.get(f"q{index}")
        if value is None:
            answers.append([])
        elif isinstance(value, list):
            answers.append([str(item) for item in value])
        else:
            answers.append([str(value)])
    return answers


def summary(questions: list[QuestionInput], outcome: QuestionAnswers) -> str:
    """What the agent reads, worded as OpenCode's own question tool words it."""
    if outcome.action == "decline":
        return "The user declined to answer the questions."
    if outcome.action == "cancel":
        return "The user dismissed the questions without answering (or they timed out)."
    pairs = ", ".join(
        f'"{question.question}"="{", ".join(answer) if answer else "Unanswered"}"'
        for question, answer in zip(questions, outcome.answers, strict=True)
    )
    return f"User has answered your questions: {pairs}. You can now continue with the user's answers in mind."


class McpRoute:
    """The ``/mcp`` route's ASGI app: the MCP endpoint of the app the request came to (each app makes
    its own, on its gateway)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint: McpEndpoint = scope["app"].state.mcp
        await endpoint.serve(scope, receive, send)


class McpEndpoint:
    """The MCP server of one gateway: its transport, and the session manager its lifespan runs."""

    def __init__(self, gateway: Gateway, settings: Settings) -> None:
        self.gateway = gateway
        with _logging_left_alone():
            self.server = UnknownNamesRefused(
                "elicitation-gateway",
                title="Elicitation Gateway",
                version=__version__,
                instructions="Ask the person watching the gateway questions with the question tool.",
            )
        self.server.add_tool(
            self.question,
            name="question",
            title="Ask the person",
            description=DESCRIPTION,
            annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=True),
        )
        app = self.server.streamable_http_app(
            streamable_http_path=PATH,
            stateless_http=True,
            max_request_body_size=settings.max_body_size,
            # Host and Origin are the gateway's to check, on /mcp as on every route (security.py):
            # the SDK's own check knows neither GATEWAY_ALLOWED_HOSTS nor GATEWAY_CORS_ORIGINS.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        (route,) = app.routes  # the transport at PATH, without the SDK's app around it
        assert isinstance(route, Route), route
        assert route.path == PATH, route.path
        self.asgi: ASGIApp = route.app

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request. One that may be answered with an event stream (a ``GET``, or a ``POST``
        that accepts one) counts against ``GATEWAY_MAX_SUBSCRIBERS`` while it is open, as ``/event``
        does: ``429`` past it. A ``GET`` stream is ended after ``GATEWAY_MCP_GET_STREAM_LIFETIME``: the
        gateway sends nothing on it (each call's messages go on that call's own response), so it only
        holds a place; the client opens another if it wants one. A ``POST`` stream lasts its call, at
        most its question's timeout."""
        if not _may_stream(scope):
            await self.asgi(scope, receive, send)
            return
        try:
            self.gateway.admit_mcp_stream()
        except TooManySubscribers as error:
            said = refused(error)
            refusal = jsonrpc_error(None, SERVER_BUSY, said.message)
            refusal.status_code = said.status
            refusal.headers["Retry-After"] = "1"
            await refusal(scope, receive, send)
            return
        try:
            if scope["method"] == "GET":
                await _for_at_most(
                    self.asgi, self.gateway.settings.mcp_get_stream_lifetime, scope, receive, send
                )
            else:
                await self.asgi(scope, receive, send)
        finally:
            self.gateway.release_mcp_stream()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield

    async def question(
        self,
        questions: Annotated[list[QuestionInput], Field(min_length=1, description="Questions to ask")],
        ctx: Context,
        to: Annotated[
            list[str] | None,
            Field(
                description="Whom to ask, where the gateway has people: names and group:NAME; "
                "absent: everyone"
            ),
        ] = None,
        escalate: Annotated[
            list[EscalationStepInput] | None,
            Field(
                description="Where the gateway has people: whom the question also reaches while nobody "
                "answers, step by step"
            ),
        ] = None,
    ) -> Annotated[CallToolResult, QuestionAnswers]:
        try:
            steps = parsed_escalate(None if escalate is None else [step.model_dump() for step in escalate])
            options = replace(_ask_options(ctx), to=parsed_to(to), escalate=steps)
        except ValueError as error:
            raise ToolError(str(error)) from None
        caller = _caller(ctx, options, questions)
        try:
            record = await self.gateway.ask_or_attach("", Questions(tuple(questions)), options, caller)
        except REFUSED as error:  # the schema, the limits, shutdown, the store: said as over HTTP
            raise ToolError(refused(error).message) from None
        # Waits through a store outage, telling the agent how it stands if it asked for progress; the
        # agent's connection dropping (a cancellation) keeps the question for the same call re-issued.
        result = await self.gateway.final_result(record, caller=caller, heartbeat=_progress(ctx))
        action = result.get("action", CANCEL)
        answers = answers_of(len(questions), result) if action == "accept" else []
        outcome = QuestionAnswers(action=action, answers=answers)
        return CallToolResult(
            content=[TextContent(type="text", text=summary(questions, outcome))],
            structured_content=outcome.model_dump(mode="json"),
        )


SERVER_BUSY = -32000
"""JSON-RPC's implementation-defined server error, for a request refused while too many streams are open."""


def _may_stream(scope: Scope) -> bool:
    """Whether the SDK may answer this request with an event stream: a ``GET`` or a ``POST`` whose
    client accepts one, as the SDK itself reads ``Accept`` (wildcards included)."""
    if scope["method"] not in ("GET", "POST"):
        return False
    _, accepts_stream = check_accept_headers(Request(scope))
    return accepts_stream


async def _for_at_most(app: ASGIApp, seconds: float, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve ``app``'s response, ending it after ``seconds`` as if the client had left, then closing
    its body properly, so that the client sees a stream that ended, not one that broke."""
    deadline = asyncio.get_running_loop().time() + seconds
    started = finished = False

    async def receive_until_deadline() -> Message:
        try:
            async with asyncio.timeout_at(deadline):
                return await receive()
        except TimeoutError:
            return {"type": "http.disconnect"}

    async def sending(message: Message) -> None:
        nonlocal started, finished
        started = started or message["type"] == "http.response.start"
        finished = finished or (message["type"] == "http.response.body" and not message.get("more_body"))
        await send(message)

    await app(scope, receive_until_deadline, sending)
    if started and not finished:
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@contextlib.contextmanager
def _logging_left_alone() -> Iterator[None]:
    """``MCPServer()`` configures the root logger when nothing has yet; the service configures its own."""
    root = logging.getLogger()
    placeholder = logging.NullHandler()
    if not root.handlers:
        root.addHandler(placeholder)
    try:
        yield
    finally:
        root.removeHandler(placeholder)


def _progress(ctx: Context) -> Callable[[WaitStatus], Awaitable[None]] | None:
    """Progress notifications for a call that sent a progress token (nothing for one that did not):
    ``progress`` is the seconds waited so far, ``total`` the question's whole time."""
    meta = getattr(ctx.request_context, "meta", None)
    token = meta.get("progress_token") if isinstance(meta, dict) else getattr(meta, "progress_token", None)
    if token is None:
        return None

    async def report(status: WaitStatus) -> None:
        elapsed = round(status.elapsed, 1)
        await ctx.report_progress(elapsed, round(elapsed + max(0.0, status.expires_in), 1), status.describe())

    return report


def _caller(ctx: Context, options: AskOptions, questions: list[QuestionInput]) -> Caller:
    """The same call from the same caller: its credentials, gateway session and directory, its
    arguments, and its ``Idempotency-Key`` header if it sent one; not the MCP transport's session
    (this server is stateless: there is none, and a reconnecting client would change it).

    Without a key, any caller with the same credentials sending the same call is this caller: it may
    wait on a question left pending, but an answer given while the caller was away is handed to a
    call that comes back only if it sends the same key (``proven``)."""
    request = getattr(ctx.request_context, "request", None)
    headers = getattr(request, "headers", None) or {}
    key = headers.get("idempotency-key")
    if key is not None:
        key = key.strip().strip('"')
        if not IDEMPOTENCY_KEY.fullmatch(key):
            raise ToolError("the Idempotency-Key header must be 1 to 255 printable ASCII characters")
    made_of = {
        "credentials": headers.get("authorization", ""),
        "session": options.session_id,
        "directory": normalize_directory(options.directory),
        "questions": [question.model_dump(mode="json") for question in questions],
        "key": key,
    }
    key_of = hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()
    return Caller(key_of, proven=key is not None)


def _ask_options(ctx: Context) -> AskOptions:
    """The session and directory named on the ``/mcp`` URL (or the OpenCode directory header)."""
    request = getattr(ctx.request_context, "request", None)
    query = getattr(request, "query_params", None) or {}
    headers = getattr(request, "headers", None) or {}
    session_id = query.get("sessionID")
    if session_id is not None and not valid_session_id(session_id):
        raise ToolError("sessionID on the /mcp URL must start with 'ses' and hold no spaces")
    directory = query.get("directory") or headers.get("x-opencode-directory")
    return AskOptions(session_id=session_id, directory=directory)
