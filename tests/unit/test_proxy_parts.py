"""The proxy's pure parts: progress that only rises, faults said once, the question the gateway is
asked, the command line, and what of the client's ``_meta`` reaches the upstream."""

import asyncio
import io
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp_types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult, InputRequiredResult

from elicitation_gateway.proxy.asking import Call, Calls, FaultReport, Progress, _as_form, asker
from elicitation_gateway.proxy.command import parse
from elicitation_gateway.proxy.rounds import Exchanges
from elicitation_gateway.proxy.server import _forwarded_meta


class Session:
    """Records the progress notifications a ``ServerSession`` would send."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, float | None, str | None]] = []

    async def send_progress_notification(
        self, token: Any, progress: float, total: float | None, message: str | None, related_request_id: Any
    ) -> None:
        self.sent.append((progress, total, message))


steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("relay"),
            st.floats(0, 1e6, allow_nan=False),
            st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False)),
        ),
        st.tuples(st.just("wait"), st.none(), st.none()),
    ),
    max_size=30,
)


@given(steps)
def test_progress_to_the_client_only_rises_whatever_the_upstream_sends(ops):
    session = Session()
    progress = Progress(session, "token", 1)  # type: ignore[arg-type]

    async def run() -> None:
        for kind, value, total in ops:
            if kind == "relay":
                await progress.relay(value, total, "upstream")
            else:
                await progress.waiting("waiting")

    asyncio.run(run())
    values = [value for value, _, _ in session.sent]
    assert all(a < b for a, b in itertools.pairwise(values)), values
    waits = sum(1 for kind, _, _ in ops if kind == "wait")
    assert sum(1 for _, _, message in session.sent if message == "waiting") == waits  # none swallowed


def test_the_upstreams_progress_is_shifted_above_the_waiting_notes():
    session = Session()
    progress = Progress(session, "token", 1)  # type: ignore[arg-type]

    async def run() -> None:
        await progress.relay(1, 3, "step 1")
        await progress.waiting("waiting")
        await progress.relay(2, 3, "step 2")

    asyncio.run(run())
    assert session.sent == [(1, 3, "step 1"), (2, 4, "waiting"), (3, 4, "step 2")]


def test_a_fault_is_said_once_until_the_gateway_recovers():
    stream = io.StringIO()
    faults = FaultReport(stream)
    faults.fault("cannot reach the gateway")
    faults.fault("cannot reach the gateway")
    faults.fault("the gateway refused the token (401)")
    faults.recovered()
    faults.fault("cannot reach the gateway")
    assert stream.getvalue().splitlines() == [
        "elicitation-gateway proxy: cannot reach the gateway",
        "elicitation-gateway proxy: the gateway refused the token (401)",
        "elicitation-gateway proxy: cannot reach the gateway",
    ]


def test_the_question_keeps_the_message_and_the_schema_and_who_asks_goes_apart():
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    asked = _as_form(ElicitRequestFormParams(message="Deploy?", requested_schema=schema))
    assert asked.message == "Deploy?"
    assert asked.requested_schema == schema
    assert asker("Ops", "deploy") == "Ops · deploy"
    assert asker("Ops", None) == "Ops"


def test_who_asks_is_bounded_whatever_the_upstream_is_called():
    assert asker("S" * 10**6, "t" * 10**6) == "S" * 99 + "… · " + "t" * 99 + "…"


def test_a_url_mode_question_is_a_confirmation_that_shows_the_link():
    url = ElicitRequestURLParams(message="Sign in", url="https://example.com/in", elicitation_id="e1")
    asked = _as_form(url)
    assert asked.message == "Sign in\nhttps://example.com/in"
    (field,) = asked.requested_schema["properties"].values()
    assert field["type"] == "boolean"
    assert "https://example.com/in" in field["title"]


def test_the_upstream_gets_the_clients_meta_without_its_connection_keys():
    meta = {
        "progressToken": 7,
        "progress_token": 7,
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "trace": "abc",
    }
    assert _forwarded_meta(meta) == {"trace": "abc"}
    assert _forwarded_meta({"progressToken": 1}) is None
    assert _forwarded_meta(None) is None


def test_a_question_belongs_to_the_call_that_asks_else_to_every_call_in_progress():
    async def run() -> None:
        calls = Calls()
        one = Call("a", None, 1, None)  # type: ignore[arg-type]
        two = Call("b", None, 2, None)  # type: ignore[arg-type]
        ask = asyncio.Event()

        async def upstream_connection() -> list[Call]:  # started before any call, as the SDK's task is
            await ask.wait()
            return calls.candidates()

        connection = asyncio.ensure_future(upstream_connection())
        assert calls.candidates() == []
        with calls.running(one):
            assert calls.candidates() == [one]  # asked within the call (a resolver's question)
            with calls.running(two):
                assert calls.candidates() == [two]
                ask.set()
                assert await connection == [one, two]  # a push-style question: either call's
        assert calls.candidates() == []

    asyncio.run(run())


def test_a_call_that_ends_withdraws_its_questions():
    async def run() -> bool:
        calls = Calls()
        call = Call("a", None, 1, None)  # type: ignore[arg-type]
        asking = asyncio.ensure_future(asyncio.sleep(60))
        with calls.running(call):
            call.asking.add(asking)
        await asyncio.sleep(0)
        return asking.cancelled()

    assert asyncio.run(run())


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        ([], "name the upstream MCP server"),
        (["--upstream", "http://x/mcp", "--", "server"], "not both"),
        (["--header", "A: b", "--", "server"], "--header is for an --upstream URL"),
        (["--upstream", "http://x/mcp", "--header", "no colon"], "is not 'Name: value'"),
        (["--upstream", "ftp://x/mcp"], "must be an http:// or https:// URL"),
        (["--gateway", "127.0.0.1:4096", "--", "server"], "--gateway must be an http:// or https:// URL"),
        (["--timeout", "0", "--", "server"], "--timeout must be a positive number"),
        (["--answer-with", "nobody", "--", "server"], "invalid choice"),
    ],
)
def test_the_command_line_refuses_what_cannot_work(argv, complaint, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 2
    assert complaint in capsys.readouterr().err


def test_the_two_forms_of_the_command_line():
    args, upstream = parse(["--gateway", "http://g:1", "--", "npx", "-y", "server", "--flag"])
    assert upstream.command == ["npx", "-y", "server", "--flag"]
    assert upstream.url is None
    assert args.gateway == "http://g:1"
    assert args.answer_with == "gateway"
    assert args.upstream_era == "auto"
    _, upstream = parse(["--upstream", "https://m/mcp", "--header", "Authorization: Bearer a:b"])
    assert upstream.url == "https://m/mcp"
    assert upstream.headers == {"Authorization": "Bearer a:b"}


def form(message: str) -> ElicitRequestFormParams:
    return ElicitRequestFormParams(message=message, requested_schema={"type": "object", "properties": {}})


def test_questions_asked_together_go_in_one_round_and_each_answer_to_its_own():
    async def run() -> None:
        call = Call("a", None, 1, None)  # type: ignore[arg-type]
        exchanges = Exchanges(abandon_after=60)
        both_asked = asyncio.Event()

        async def upstream() -> str:
            first = asyncio.ensure_future(exchange.ask(form("one")))
            second = asyncio.ensure_future(exchange.ask(form("two")))
            both_asked.set()
            return f"{(await first).action} {(await second).action}"

        exchange = exchanges.start(call, upstream())
        assert call.exchange is exchange
        await both_asked.wait()
        await asyncio.sleep(0)
        round_ = await exchange.next_round()
        assert isinstance(round_, InputRequiredResult)
        assert round_.request_state == exchange.token
        assert {key: request.params.message for key, request in round_.input_requests.items()} == {
            "elicit-1": "one",
            "elicit-2": "two",
        }
        assert exchanges.get(exchange.token) is exchange
        exchange.answer(
            {"elicit-2": {"action": "decline"}, "elicit-1": ElicitResult(action="accept", content={})}
        )
        assert await exchange.next_round() == "accept decline"
        await asyncio.sleep(0)
        assert exchanges.get(exchange.token) is None  # finished: a retry with its state starts afresh

    asyncio.run(run())


def test_a_round_nobody_answers_is_dismissed():
    async def run() -> str:
        exchanges = Exchanges(abandon_after=0.05)

        async def upstream() -> str:
            return (await exchange.ask(form("one"))).action

        exchange = exchanges.start(Call("a", None, 1, None), upstream())  # type: ignore[arg-type]
        assert isinstance(await exchange.next_round(), InputRequiredResult)
        return await exchange.next_round()

    assert asyncio.run(run()) == "cancel"
